#include "storage/maintenance.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/file_lock.h"
#include "storage/migrations.h"
#include "storage/retention.h"
#include "storage/sqlite_audit_log.h"
#include "storage/sqlite_database.h"
#include "storage/sqlite_error.h"
#include "storage/sqlite_storage.h"
#include "storage/store_rules.h"

namespace inac::storage {

namespace {

constexpr const char* kTables[] = {"topology", "jobs",           "idempotency_keys",
                                   "plans",    "switch_intents", "switch_states",
                                   "events",   "audit",          "schema_version"};

absl::Status CheckExists(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::PermissionDeniedError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  return absl::OkStatus();
}

// Opens `path` read-only and checks it is an INAC database (or an empty SQLite file).
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenSource(const std::string& path,
                                                             SchemaProbe* probe) {
  INAC_RETURN_IF_ERROR(CheckExists(path));
  std::unique_ptr<SQLite::Database> db;
  INAC_RETURN_IF_ERROR(GuardSqlite(path, "open read-only", [&]() -> absl::Status {
    db = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READONLY, 5000);
    return absl::OkStatus();
  }));
  INAC_ASSIGN_OR_RETURN(*probe, ProbeSchema(*db, path));
  if (probe->version == 0 && probe->objects > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is a SQLite database but not an INAC one (no schema version)"));
  }
  return db;
}

bool HasTable(SQLite::Database& db, const char* table) {
  SQLite::Statement exists(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  exists.bind(1, table);
  return exists.executeStep();
}

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a prune with these cutoffs removes, inside the caller's read transaction (the cutoffs are
// timestamps here). May throw SQLite::Exception.
PruneReport CountPrunable(SQLite::Database& db, const RetentionCutoffs& cutoffs) {
  PruneReport report;
  if (cutoffs.finished_jobs_before_ms) {
    constexpr char kFinished[] =
        "SELECT id FROM jobs WHERE state IN ('completed', 'cancelled', 'failed') AND "
        "updated_ms < ?1";
    auto count = [&](const std::string& sql) {
      SQLite::Statement q(db, sql);
      q.bind(1, static_cast<int64_t>(*cutoffs.finished_jobs_before_ms));
      q.executeStep();
      return q.getColumn(0).getInt64();
    };
    report.finished_jobs = count(absl::StrCat("SELECT count(*) FROM (", kFinished, ")"));
    report.idempotency_keys = count(
        absl::StrCat("SELECT count(*) FROM idempotency_keys WHERE job_id IN (", kFinished, ")"));
    report.events =
        count(absl::StrCat("SELECT count(*) FROM events WHERE job_id IN (", kFinished, ")"));
  }
  if (cutoffs.audit_before_ms && HasTable(db, "audit")) {
    SQLite::Statement q(db, "SELECT count(*) FROM audit WHERE time_ms < ?");
    q.bind(1, static_cast<int64_t>(*cutoffs.audit_before_ms));
    q.executeStep();
    report.audit_entries = q.getColumn(0).getInt64();
  }
  return report;
}

}  // namespace

bool CheckReport::ok() const {
  return integrity.size() == 1 && integrity[0] == "ok" && schema_version <= supported_version;
}

absl::StatusOr<CheckReport> CheckDatabase(const std::string& path) {
  SchemaProbe probe;
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> db, OpenSource(path, &probe));
  CheckReport report;
  report.path = path;
  report.schema_version = probe.version;
  report.supported_version = LatestSchemaVersion();
  INAC_RETURN_IF_ERROR(GuardSqlite(path, "check", [&]() -> absl::Status {
    db->exec("BEGIN");
    SQLite::Statement integrity(*db, "PRAGMA integrity_check");
    while (integrity.executeStep()) report.integrity.push_back(integrity.getColumn(0).getString());
    for (const char* table : kTables) {
      SQLite::Statement exists(*db,
                               "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
      exists.bind(1, table);
      if (!exists.executeStep()) continue;
      report.counts.emplace_back(
          table, db->execAndGet(absl::StrCat("SELECT count(*) FROM ", table)).getInt64());
      if (std::string_view(table) == "jobs") {
        SQLite::Statement by_state(*db,
                                   "SELECT state, count(*) FROM jobs GROUP BY state ORDER BY 1");
        while (by_state.executeStep()) {
          report.jobs_by_state.emplace_back(by_state.getColumn(0).getString(),
                                            by_state.getColumn(1).getInt64());
        }
      }
    }
    db->exec("COMMIT");
    return absl::OkStatus();
  }));
  return report;
}

absl::StatusOr<int64_t> BackupDatabase(const std::string& from, const std::string& to) {
  SchemaProbe probe;
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> source, OpenSource(from, &probe));
  struct stat st;
  if (stat(to.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(to, ": already exists; not overwriting it"));
  }
  const std::string tmp = absl::StrCat(to, ".tmp-", getpid());
  int64_t pages = 0;
  absl::Status status = GuardSqlite(tmp, "backup", [&]() -> absl::Status {
    SQLite::Database dest(tmp, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    dest.exec("PRAGMA synchronous = FULL");
    SQLite::Backup backup(dest, *source);
    int rc;
    do {
      rc = backup.executeStep(-1);  // throws on errors other than BUSY/LOCKED
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) sqlite3_sleep(50);
    } while (rc != SQLITE_DONE);
    pages = backup.getTotalPageCount();
    std::string check = dest.execAndGet("PRAGMA quick_check").getString();
    if (check != "ok") {
      return absl::DataLossError(absl::StrCat(tmp, ": backup copy fails quick_check: ", check));
    }
    return absl::OkStatus();
  });
  if (status.ok()) {
    // link() refuses to replace an existing file, so a concurrent creator of `to` is never
    // overwritten; then the temporary name goes away.
    if (link(tmp.c_str(), to.c_str()) != 0) {
      int err = errno;
      status =
          err == EEXIST
              ? absl::AlreadyExistsError(absl::StrCat(to, ": already exists"))
              : absl::InternalError(absl::StrCat("cannot create ", to, ": ", std::strerror(err)));
    }
  }
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  std::filesystem::remove(tmp + "-journal", ignored);
  if (!status.ok()) return status;
  // Make the new directory entry durable.
  std::string dir = std::filesystem::path(to).parent_path().string();
  int dir_fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return pages;
}

absl::StatusOr<core::AuditPage> ListAudit(const std::string& path,
                                          const core::AuditFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateAuditFilter(filter));
  SchemaProbe probe;
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> db, OpenSource(path, &probe));
  absl::StatusOr<core::AuditPage> page = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(GuardSqlite(path, "list audit entries", [&]() -> absl::Status {
    db->exec("BEGIN");
    if (!HasTable(*db, "audit")) {
      page = absl::FailedPreconditionError(absl::StrCat(
          path, ": schema version ", probe.version,
          " has no audit log (it starts at version 2, when a controller of this version first "
          "opens the database)"));
    } else {
      page = ListAuditRows(*db, filter);
    }
    db->exec("COMMIT");
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<PruneReport> PruneDatabase(const std::string& path, const PruneOptions& options) {
  if (!options.finished_older_than_ms && !options.audit_older_than_ms) {
    return absl::InvalidArgumentError(
        "nothing to prune: give an age for finished jobs and/or audit entries");
  }
  for (const std::optional<int64_t>& age :
       {options.finished_older_than_ms, options.audit_older_than_ms}) {
    if (age && *age <= 0) return absl::InvalidArgumentError("a retention age must be positive");
  }
  INAC_RETURN_IF_ERROR(ValidatePruneBatch(options.batch_rows));
  INAC_RETURN_IF_ERROR(CheckExists(path));
  const int64_t now = options.now_ms > 0 ? options.now_ms : SystemNowMs();
  RetentionCutoffs cutoffs;
  if (options.finished_older_than_ms) {
    cutoffs.finished_jobs_before_ms = now - *options.finished_older_than_ms;
  }
  if (options.audit_older_than_ms) cutoffs.audit_before_ms = now - *options.audit_older_than_ms;
  cutoffs.batch_rows = options.batch_rows;
  cutoffs.pause_ms = 0;  // nobody else writes: the lock is ours

  // The controller's lock: a running controller (FailedPrecondition from FileLock) makes this
  // Unavailable, so that callers can tell it from a file that is not an INAC database.
  absl::StatusOr<std::unique_ptr<FileLock>> lock =
      FileLock::Acquire(path + ".lock", "database " + path);
  if (!lock.ok()) {
    if (absl::IsFailedPrecondition(lock.status())) {
      return absl::UnavailableError(lock.status().message());
    }
    return lock.status();
  }
  if (options.dry_run) {
    SchemaProbe probe;
    INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> db, OpenSource(path, &probe));
    if (probe.version > LatestSchemaVersion()) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": schema version ", probe.version,
                                                        " is newer than this inac supports (",
                                                        LatestSchemaVersion(), ")"));
    }
    PruneReport report;
    INAC_RETURN_IF_ERROR(GuardSqlite(path, "count prunable rows", [&]() -> absl::Status {
      db->exec("BEGIN");
      if (probe.version > 0) report = CountPrunable(*db, cutoffs);
      db->exec("COMMIT");
      return absl::OkStatus();
    }));
    report.dry_run = true;
    return report;
  }

  // Opens as the controller does: the lock, the schema checks, the migrations. SqliteStorage takes
  // the lock itself, so ours goes first; a controller starting in between makes Open fail with
  // the lock's FailedPrecondition.
  lock->reset();
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStorage> storage, SqliteStorage::Open(path));
  PruneReport report;
  INAC_RETURN_IF_ERROR(
      storage->database().Read("count prunable rows", [&](SQLite::Database& db) -> absl::Status {
        report = CountPrunable(db, cutoffs);
        return absl::OkStatus();
      }));
  // Nobody else writes while we hold the lock, so the counts above are what the prune removes;
  // the prune's own counts are authoritative for jobs and audit entries.
  RetentionResult result;
  absl::Status status = PruneExpired(*storage, cutoffs, &result);
  report.finished_jobs = result.jobs;
  report.audit_entries = result.audit;
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(status.message(), " (before the failure ",
                                                    result.jobs, " finished job(s) and ",
                                                    result.audit, " audit entries were removed)"));
  }
  return report;
}

}  // namespace inac::storage
