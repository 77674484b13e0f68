#include "storage/maintenance.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/migrations.h"
#include "storage/sqlite_database.h"
#include "storage/sqlite_error.h"

namespace inac::storage {

namespace {

constexpr const char* kTables[] = {"topology", "jobs",           "idempotency_keys",
                                   "plans",    "switch_intents", "switch_states",
                                   "events",   "schema_version"};

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

}  // namespace inac::storage
