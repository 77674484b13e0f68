#include "cli/cmd_db.h"

#include <iomanip>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "core/json.h"
#include "core/validation.h"
#include "storage/maintenance.h"

namespace inac::cli {

namespace {

// Bad input: the user pointed at the wrong file. Anything else is a failure of the operation.
int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kInvalidArgument:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

[[noreturn]] void Fail(const absl::Status& status) {
  std::cerr << "inac: " << status.message() << "\n";
  throw CLI::RuntimeError(ExitCodeFor(status));
}

void RunCheck(const std::string& db) {
  auto report = storage::CheckDatabase(db);
  if (!report.ok()) Fail(report.status());
  std::cout << "database: " << report->path << "\n";
  std::cout << "schema_version: " << report->schema_version << " (this inac supports up to "
            << report->supported_version << ")\n";
  std::cout << "integrity:";
  for (const std::string& line : report->integrity) std::cout << " " << line;
  std::cout << "\n";
  for (const auto& [table, rows] : report->counts)
    std::cout << "rows." << table << ": " << rows << "\n";
  for (const auto& [state, jobs] : report->jobs_by_state) {
    std::cout << "jobs." << state << ": " << jobs << "\n";
  }
  if (report->schema_version > report->supported_version) {
    std::cerr << "inac: " << db << ": schema version " << report->schema_version
              << " is newer than this inac supports (" << report->supported_version << ")\n";
  }
  if (report->integrity.size() != 1 || report->integrity[0] != "ok") {
    std::cerr << "inac: " << db << ": integrity check failed (" << report->integrity.size()
              << " problems)\n";
  }
  if (!report->ok()) throw CLI::RuntimeError(kExitFailure);
  std::cout << "ok\n";
}

void RunBackup(const std::string& db, const std::string& to) {
  auto pages = storage::BackupDatabase(db, to);
  if (!pages.ok()) Fail(pages.status());
  std::cout << "backed up " << db << " to " << to << " (" << *pages << " pages)\n";
}

struct PruneArgs {
  std::string db;
  std::string finished;  // a duration, e.g. "7d"
  std::string audit;
  bool dry_run = false;
};

void RunPrune(const PruneArgs& args) {
  storage::PruneOptions options;
  options.dry_run = args.dry_run;
  if (!args.finished.empty()) {
    auto ms = ParseDurationMs(args.finished);
    if (!ms.ok())
      Fail(absl::InvalidArgumentError(
          absl::StrCat("--finished-older-than: ", ms.status().message())));
    options.finished_older_than_ms = *ms;
  }
  if (!args.audit.empty()) {
    auto ms = ParseDurationMs(args.audit);
    if (!ms.ok()) {
      Fail(absl::InvalidArgumentError(absl::StrCat("--audit-older-than: ", ms.status().message())));
    }
    options.audit_older_than_ms = *ms;
  }
  if (!options.finished_older_than_ms && !options.audit_older_than_ms) {
    Fail(absl::InvalidArgumentError(
        "nothing to prune: give --finished-older-than and/or --audit-older-than (e.g. 7d)"));
  }
  auto report = storage::PruneDatabase(args.db, options);
  if (!report.ok()) {
    if (absl::IsUnavailable(report.status())) {
      // A controller holds the database: it is the one that may write it.
      std::cerr << "inac: " << report.status().message()
                << "\ninac: stop the controller first, or let it prune: its \"retention\" "
                   "configuration (finished_jobs_days, audit_days) removes the same rows while it "
                   "runs\n";
      throw CLI::RuntimeError(kExitFailure);
    }
    Fail(report.status());
  }
  const char* verb = report->dry_run ? "would remove" : "removed";
  std::cout << "database: " << args.db << "\n";
  if (options.finished_older_than_ms) {
    std::cout << verb << " " << report->finished_jobs
              << " finished job(s) (completed, cancelled or failed) last updated more than "
              << args.finished << " ago, with " << report->idempotency_keys
              << " idempotency key(s) and " << report->events << " event(s)\n";
  }
  if (options.audit_older_than_ms) {
    std::cout << verb << " " << report->audit_entries << " audit entries older than " << args.audit
              << "\n";
  }
  if (report->dry_run) std::cout << "dry run: nothing was changed\n";
}

struct AuditArgs {
  std::string db;
  std::string actor;
  int64_t after = 0;
  int64_t limit = 100;
  bool json = false;
};

void RunAudit(const AuditArgs& args) {
  core::AuditFilter filter;
  filter.after_seq = args.after;
  filter.limit = args.limit;
  if (!args.actor.empty()) filter.actor = args.actor;
  auto page = storage::ListAudit(args.db, filter);
  if (!page.ok()) Fail(page.status());
  if (args.json) {
    core::Json entries = core::Json::array();
    for (const core::AuditEntry& e : page->entries) {
      entries.push_back({{"seq", e.seq},
                         {"time_ms", e.time_ms},
                         {"actor", e.actor},
                         {"role", e.role},
                         {"remote_addr", e.remote_addr},
                         {"method", e.method},
                         {"path", e.path},
                         {"status", e.status},
                         {"job_id", e.job_id ? core::Json(*e.job_id) : core::Json(nullptr)}});
    }
    core::Json body = {{"entries", entries},
                       {"next_after", page->next_after_seq ? core::Json(*page->next_after_seq)
                                                           : core::Json(nullptr)}};
    // A stored path may hold any byte (the REST layer percent-decodes it): bytes that are not
    // UTF-8 print as U+FFFD, as GET /audit answers them, instead of aborting the dump.
    std::cout << body.dump(2, ' ', false, core::Json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << std::left << std::setw(8) << "SEQ" << std::setw(15) << "TIME_MS" << std::setw(18)
            << "ACTOR" << std::setw(10) << "ROLE" << std::setw(8) << "METHOD" << std::setw(7)
            << "STATUS" << std::setw(8) << "JOB"
            << "PATH\n";
  // The table escapes what a request brought (core::EscapeForLog): a stored path with a newline
  // or a terminal escape must not print as a row of its own or reach the terminal raw. --json
  // escapes by being JSON.
  for (const core::AuditEntry& e : page->entries) {
    std::cout << std::left << std::setw(8) << e.seq << std::setw(15) << e.time_ms << std::setw(18)
              << core::EscapeForLog(e.actor) << std::setw(10) << core::EscapeForLog(e.role)
              << std::setw(8) << core::EscapeForLog(e.method) << std::setw(7) << e.status
              << std::setw(8) << (e.job_id ? absl::StrCat(*e.job_id) : "-")
              << core::EscapeForLog(e.path) << "\n";
  }
  if (page->next_after_seq) {
    std::cout << "more: --after " << *page->next_after_seq << "\n";
  }
}

}  // namespace

absl::StatusOr<int64_t> ParseDurationMs(absl::string_view text) {
  constexpr int64_t kMaxDays = 36500;
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text.substr(0, 40),
        "\" is not a duration: a positive whole number and one unit, d, h, m or s (e.g. 7d, 12h, "
        "30m)"));
  };
  if (text.size() < 2) return bad();
  int64_t unit_ms = 0;
  switch (text.back()) {
    case 'd':
      unit_ms = 24LL * 3600 * 1000;
      break;
    case 'h':
      unit_ms = 3600LL * 1000;
      break;
    case 'm':
      unit_ms = 60LL * 1000;
      break;
    case 's':
      unit_ms = 1000;
      break;
    default:
      return bad();
  }
  absl::string_view number = text.substr(0, text.size() - 1);
  int64_t value = 0;
  for (char c : number) {
    if (c < '0' || c > '9') return bad();  // no sign, no space, no fraction
  }
  if (number.size() > 9 || !absl::SimpleAtoi(number, &value) || value <= 0) return bad();
  if (value * unit_ms > kMaxDays * 24LL * 3600 * 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is longer than ", kMaxDays, " days"));
  }
  return value * unit_ms;
}

void AddDbCommand(CLI::App& app) {
  CLI::App* db =
      app.add_subcommand("db", "Check, back up, prune or read the audit log of the database");
  db->require_subcommand(1);

  auto check_db = std::make_shared<std::string>();
  CLI::App* check = db->add_subcommand(
      "check", "Integrity check, schema version and row counts (read-only, safe while serving)");
  check->add_option("--db", *check_db, "SQLite database file")->required();
  check->callback([check_db] { RunCheck(*check_db); });

  auto backup_db = std::make_shared<std::string>();
  auto backup_to = std::make_shared<std::string>();
  CLI::App* backup = db->add_subcommand(
      "backup", "Consistent copy with SQLite's online backup API (safe while serving)");
  backup->add_option("--db", *backup_db, "SQLite database file")->required();
  backup->add_option("--to", *backup_to, "New file to write (must not exist)")->required();
  backup->callback([backup_db, backup_to] { RunBackup(*backup_db, *backup_to); });

  auto prune_args = std::make_shared<PruneArgs>();
  CLI::App* prune = db->add_subcommand(
      "prune",
      "Remove finished jobs (with their idempotency keys and events) and audit entries older "
      "than the given ages (refused while a controller serves the database)");
  prune->add_option("--db", prune_args->db, "SQLite database file")->required();
  prune->add_option("--finished-older-than", prune_args->finished,
                    "Completed, cancelled or failed jobs last updated longer ago than this "
                    "(e.g. 7d, 12h, 30m)");
  prune->add_option("--audit-older-than", prune_args->audit,
                    "Audit entries older than this (e.g. 90d)");
  prune->add_flag("--dry-run", prune_args->dry_run, "Count only; change nothing");
  prune->callback([prune_args] { RunPrune(*prune_args); });

  auto audit_args = std::make_shared<AuditArgs>();
  CLI::App* audit = db->add_subcommand(
      "audit", "The audit log of API writes, oldest first (read-only, safe while serving)");
  audit->add_option("--db", audit_args->db, "SQLite database file")->required();
  audit->add_option("--actor", audit_args->actor, "Only this token name");
  audit->add_option("--after", audit_args->after, "Cursor: entries after this sequence number")
      ->check(CLI::NonNegativeNumber);
  audit->add_option("--limit", audit_args->limit, "At most this many entries (1..1000)")
      ->check(CLI::Range(1, 1000));
  audit->add_flag("--json", audit_args->json, "JSON instead of a table");
  audit->callback([audit_args] { RunAudit(*audit_args); });
}

}  // namespace inac::cli
