#include "server/cmd_db.h"

#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/cli.h"
#include "storage/maintenance.h"

namespace inac::server {

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

}  // namespace

void AddDbCommand(CLI::App& app) {
  CLI::App* db = app.add_subcommand("db", "Check or back up the controller database");
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
}

}  // namespace inac::server
