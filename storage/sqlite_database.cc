#include "storage/sqlite_database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include <SQLiteCpp/Statement.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/migrations.h"
#include "storage/sqlite_error.h"

namespace inac::storage {

namespace {

constexpr char kMemory[] = ":memory:";

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Sets the connection pragmas of the writer (step 4 of Open).
absl::Status ConfigureWriter(SQLite::Database& db, const std::string& path, bool in_memory,
                             const SqliteOptions& options) {
  return GuardSqlite(path, "configure connection", [&]() -> absl::Status {
    if (!in_memory) {
      std::string mode = db.execAndGet("PRAGMA journal_mode = WAL").getString();
      if (mode != "wal") {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": cannot switch to WAL journal mode (got \"", mode, "\")"));
      }
    }
    db.exec(options.synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
    if (options.max_page_count > 0) {
      db.exec(absl::StrCat("PRAGMA max_page_count = ", options.max_page_count));
    }
    return absl::OkStatus();
  });
}

absl::Status ApplyMigrations(SQLite::Database& db, const std::string& path, int from_version,
                             int64_t now_ms) {
  for (const Migration& m : Migrations()) {
    if (m.version <= from_version) continue;
    std::string action = absl::StrCat("apply migration ", std::string(m.name));
    absl::Status status = GuardSqlite(path, action, [&]() -> absl::Status {
      db.exec("BEGIN IMMEDIATE");
      db.exec(std::string(m.sql));
      SQLite::Statement insert(
          db, "INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)");
      insert.bind(1, m.version);
      insert.bind(2, std::string(m.name));
      insert.bind(3, static_cast<int64_t>(now_ms));
      insert.exec();
      db.exec(absl::StrCat("PRAGMA user_version = ", m.version));
      db.exec("COMMIT");
      return absl::OkStatus();
    });
    if (!status.ok()) {
      if (sqlite3_get_autocommit(db.getHandle()) == 0) {
        sqlite3_exec(db.getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
      }
      return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SchemaProbe> ProbeSchema(SQLite::Database& db, const std::string& path) {
  return GuardSqlite(path, "read schema version", [&]() -> absl::StatusOr<SchemaProbe> {
    SchemaProbe probe;
    db.exec("BEGIN");
    probe.version = db.execAndGet("PRAGMA user_version").getInt();
    probe.objects = db.execAndGet("SELECT count(*) FROM sqlite_master").getInt64();
    db.exec("COMMIT");
    return probe;
  });
}

SqliteDatabase::SqliteDatabase(std::string path, std::unique_ptr<FileLock> lock,
                               std::unique_ptr<SQLite::Database> writer, int schema_version,
                               int busy_timeout_ms)
    : path_(std::move(path)),
      in_memory_(path_ == kMemory),
      busy_timeout_ms_(busy_timeout_ms),
      schema_version_(schema_version),
      lock_(std::move(lock)),
      writer_(std::move(writer)) {}

SqliteDatabase::~SqliteDatabase() {
  // Connections close before the lock is released (member order would do it the other way).
  {
    absl::MutexLock l(&readers_mu_);
    idle_readers_.clear();
  }
  {
    absl::MutexLock l(&write_mu_);
    writer_.reset();
  }
  lock_.reset();
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const std::string& path,
                                                                     const SqliteOptions& options) {
  const bool in_memory = path == kMemory;
  std::unique_ptr<FileLock> lock;
  if (!in_memory) {
    INAC_ASSIGN_OR_RETURN(lock, FileLock::Acquire(path + ".lock", "database " + path));
  }
  std::unique_ptr<SQLite::Database> writer;
  INAC_RETURN_IF_ERROR(GuardSqlite(path, "open", [&]() -> absl::Status {
    writer = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                                                options.busy_timeout_ms);
    return absl::OkStatus();
  }));
  if (!in_memory && sqlite3_db_readonly(writer->getHandle(), "main") == 1) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": database file is not writable; refusing to open it read-only"));
  }
  INAC_ASSIGN_OR_RETURN(SchemaProbe probe, ProbeSchema(*writer, path));
  if (probe.version > LatestSchemaVersion()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": schema version ", probe.version, " is newer than this inac supports (",
        LatestSchemaVersion(), "); refusing to open it (the file was not modified)"));
  }
  if (probe.version == 0 && probe.objects > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is a SQLite database but not an INAC one (no schema version, ",
                     probe.objects, " existing objects); refusing to modify it"));
  }
  INAC_RETURN_IF_ERROR(ConfigureWriter(*writer, path, in_memory, options));
  INAC_RETURN_IF_ERROR(ApplyMigrations(*writer, path, probe.version,
                                       options.now_ms > 0 ? options.now_ms : SystemNowMs()));
  return std::unique_ptr<SqliteDatabase>(new SqliteDatabase(
      path, std::move(lock), std::move(writer), LatestSchemaVersion(), options.busy_timeout_ms));
}

absl::Status SqliteDatabase::RunTransaction(SQLite::Database& db, const char* begin,
                                            absl::string_view action,
                                            absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  absl::Status status = GuardSqlite(path_, action, [&]() -> absl::Status {
    db.exec(begin);
    INAC_RETURN_IF_ERROR(fn(db));
    db.exec("COMMIT");
    return absl::OkStatus();
  });
  if (!status.ok() && sqlite3_get_autocommit(db.getHandle()) == 0) {
    // Still inside the transaction (SQLite rolls back by itself on some errors, such as FULL).
    sqlite3_exec(db.getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  return status;
}

absl::Status SqliteDatabase::Write(absl::string_view action,
                                   absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  absl::MutexLock l(&write_mu_);
  return RunTransaction(*writer_, "BEGIN IMMEDIATE", action, fn);
}

absl::Status SqliteDatabase::Read(absl::string_view action,
                                  absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  if (in_memory_) {
    absl::MutexLock l(&write_mu_);
    return RunTransaction(*writer_, "BEGIN", action, fn);
  }
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> reader, TakeReader());
  absl::Status status = RunTransaction(*reader, "BEGIN", action, fn);
  ReturnReader(std::move(reader));
  return status;
}

absl::StatusOr<std::unique_ptr<SQLite::Database>> SqliteDatabase::TakeReader() {
  {
    absl::MutexLock l(&readers_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<SQLite::Database> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return reader;
    }
  }
  return GuardSqlite(
      path_, "open reader", [&]() -> absl::StatusOr<std::unique_ptr<SQLite::Database>> {
        return std::make_unique<SQLite::Database>(path_, SQLite::OPEN_READONLY, busy_timeout_ms_);
      });
}

void SqliteDatabase::ReturnReader(std::unique_ptr<SQLite::Database> reader) {
  absl::MutexLock l(&readers_mu_);
  idle_readers_.push_back(std::move(reader));
}

}  // namespace inac::storage
