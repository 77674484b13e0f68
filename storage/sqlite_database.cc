#include "storage/sqlite_database.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <SQLiteCpp/Exception.h>
#include <SQLiteCpp/Statement.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/migrations.h"
#include "storage/sqlite_error.h"

namespace inac::storage {

namespace {

constexpr char kMemory[] = ":memory:";

// stat(2) of `path`: 0 and `st`, or the errno value.
int StatPath(const std::string& path, struct stat* st) {
  return stat(path.c_str(), st) == 0 ? 0 : errno;
}

int DefaultWritableCheck(const std::string& path) {
  return access(path.c_str(), W_OK) == 0 ? 0 : errno;
}

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
                               int busy_timeout_ms, FileId file_id, std::optional<FileId> wal_id,
                               std::function<int(const std::string&)> writable_check)
    : path_(std::move(path)),
      in_memory_(path_ == kMemory),
      busy_timeout_ms_(busy_timeout_ms),
      schema_version_(schema_version),
      file_id_(file_id),
      wal_id_(wal_id),
      writable_check_(std::move(writable_check)),
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
  RemoveOrphanedWal();
  lock_.reset();
}

void SqliteDatabase::RemoveOrphanedWal() {
  if (in_memory_ || !wal_id_) return;
  struct stat st;
  if (StatPath(path_, &st) == 0 && st.st_dev == file_id_.dev && st.st_ino == file_id_.ino) return;
  // Our file was deleted or replaced. SQLite does not checkpoint or delete the WAL of a database
  // file that moved, and the next opener of the path (a restarted controller) would apply our
  // frames to whatever file is there now: a replacement, or a new empty database. Our frames
  // belong to the deleted inode, which is gone once our connections are closed.
  const std::string wal = path_ + "-wal";
  if (StatPath(wal, &st) == 0 && st.st_dev == wal_id_->dev && st.st_ino == wal_id_->ino) {
    unlink(wal.c_str());
  }
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
  // Step 6. The WAL exists from the first read of a WAL database on (ProbeSchema above) until the
  // last connection closes; the writer stays open, so it is the same file for our lifetime.
  FileId file_id;
  std::optional<FileId> wal_id;
  if (!in_memory) {
    struct stat st;
    if (int err = StatPath(path, &st); err != 0) {
      return absl::UnavailableError(
          absl::StrCat(path, ": cannot stat the database file after opening it: ", strerror(err)));
    }
    file_id = FileId{st.st_dev, st.st_ino};
    if (StatPath(path + "-wal", &st) == 0) wal_id = FileId{st.st_dev, st.st_ino};
  }
  return std::unique_ptr<SqliteDatabase>(
      new SqliteDatabase(path, std::move(lock), std::move(writer), LatestSchemaVersion(),
                         options.busy_timeout_ms, file_id, wal_id, options.writable_check));
}

std::optional<std::string> SqliteDatabase::FileFault(bool writable) const {
  if (in_memory_) return std::nullopt;
  struct stat st;
  if (int err = StatPath(path_, &st); err != 0) {
    if (err == ENOENT) return std::string("database file was deleted while the controller ran");
    return absl::StrCat("cannot stat the database file: ", strerror(err));
  }
  if (st.st_dev != file_id_.dev || st.st_ino != file_id_.ino) {
    return absl::StrCat("database file was replaced while the controller ran (device:inode ",
                        file_id_.dev, ":", file_id_.ino, " at open, now ", st.st_dev, ":",
                        st.st_ino, ")");
  }
  if (wal_id_) {
    const std::string wal = path_ + "-wal";
    if (int err = StatPath(wal, &st); err != 0) {
      if (err == ENOENT) {
        return absl::StrCat("write-ahead log ", wal, " was deleted while the controller ran");
      }
      return absl::StrCat("cannot stat the write-ahead log ", wal, ": ", strerror(err));
    }
    if (st.st_dev != wal_id_->dev || st.st_ino != wal_id_->ino) {
      return absl::StrCat("write-ahead log ", wal, " was replaced while the controller ran");
    }
  }
  if (writable) {
    int err = writable_check_ ? writable_check_(path_) : DefaultWritableCheck(path_);
    if (err != 0) return absl::StrCat("database file is read-only (", strerror(err), ")");
  }
  return std::nullopt;
}

absl::Status SqliteDatabase::CheckFile() const {
  std::optional<std::string> fault = FileFault(/*writable=*/true);
  if (!fault) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(path_, ": ", *fault, "; restart the controller"));
}

void SqliteDatabase::NoteCorruption(const absl::Status& status) {
  absl::MutexLock l(&corruption_mu_);
  if (corruption_.ok()) corruption_ = status;
}

void SqliteDatabase::NoteWriteOutcome(const absl::Status& status, bool storage_fault) {
  absl::MutexLock l(&corruption_mu_);
  if (status.ok()) {
    write_fault_ = absl::OkStatus();
  } else if (storage_fault) {
    write_fault_ = absl::UnavailableError(absl::StrCat("the last write failed (", status.message(),
                                                       "); not ready until a write succeeds"));
  }
}

absl::Status SqliteDatabase::Health() {
  if (in_memory_) return absl::OkStatus();
  INAC_RETURN_IF_ERROR(CheckFile());
  {
    absl::MutexLock l(&corruption_mu_);
    if (!corruption_.ok()) return corruption_;
    if (!write_fault_.ok()) return write_fault_;
  }
  constexpr char kAction[] = "health check";
  try {
    SQLite::Database db(path_, SQLite::OPEN_READONLY, busy_timeout_ms_);
    db.exec("BEGIN");
    int version = db.execAndGet("PRAGMA user_version").getInt();
    db.execAndGet("SELECT count(*) FROM sqlite_master");
    db.exec("COMMIT");
    if (version != schema_version_) {
      return absl::UnavailableError(absl::StrCat(path_, ": ", kAction, ": schema version is ",
                                                 version, ", not ", schema_version_,
                                                 " as at open; restart the controller"));
    }
    return absl::OkStatus();
  } catch (const SQLite::Exception& e) {
    absl::Status status = StatusFromException(e, path_, kAction, SqliteUse::kServing);
    if (e.getErrorCode() != -1 && IsCorruption(e.getExtendedErrorCode())) NoteCorruption(status);
    return status;
  } catch (const std::exception& e) {
    return StatusFromException(e, path_, kAction, SqliteUse::kServing);
  }
}

absl::Status SqliteDatabase::RunTransaction(SQLite::Database& db, const char* begin,
                                            absl::string_view action, bool write,
                                            absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  absl::Status status;
  bool committed = false;
  // Whether SQLite itself failed the write (an error other than a busy lock: I/O, read-only, full)
  // rather than the transaction answering NotFound, FailedPrecondition, ...: only those make
  // Health remember a failed write. A file fault is not remembered: CheckFile, which Health runs,
  // sees it for as long as it lasts.
  bool storage_fault = false;
  try {
    db.exec(begin);
    status = fn(db);
    if (status.ok() && write) {
      if (std::optional<std::string> fault = FileFault(/*writable=*/true)) {
        status = absl::UnavailableError(
            absl::StrCat(path_, ": ", action, ": ", *fault,
                         "; the change was not written; restart the controller"));
      }
    }
    if (status.ok()) {
      db.exec("COMMIT");
      committed = true;
    }
  } catch (const SQLite::Exception& e) {
    status = StatusFromException(e, path_, action, SqliteUse::kServing);
    if (e.getErrorCode() != -1 && IsCorruption(e.getExtendedErrorCode())) NoteCorruption(status);
    storage_fault = e.getErrorCode() != SQLITE_BUSY && e.getErrorCode() != SQLITE_LOCKED;
  } catch (const std::exception& e) {
    status = StatusFromException(e, path_, action, SqliteUse::kServing);
    storage_fault = true;
  }
  if (!status.ok() && sqlite3_get_autocommit(db.getHandle()) == 0) {
    // Still inside the transaction (SQLite rolls back by itself on some errors, such as FULL).
    sqlite3_exec(db.getHandle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  if (committed && write) {
    // Closes the window between the check above and the end of COMMIT: a commit into a file that
    // is no longer the database is not durable, so it is not acknowledged either.
    if (std::optional<std::string> fault = FileFault(/*writable=*/false)) {
      status = absl::UnavailableError(absl::StrCat(path_, ": ", action, ": ", *fault,
                                                   "; the change went to the old file and will "
                                                   "be lost; restart the controller"));
    }
  }
  if (write) NoteWriteOutcome(status, storage_fault);
  return status;
}

absl::Status SqliteDatabase::Write(absl::string_view action,
                                   absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  absl::MutexLock l(&write_mu_);
  return RunTransaction(*writer_, "BEGIN IMMEDIATE", action, /*write=*/true, fn);
}

absl::Status SqliteDatabase::WriteUnsynced(absl::string_view action,
                                           absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  absl::MutexLock l(&write_mu_);
  int previous = 0;
  INAC_RETURN_IF_ERROR(GuardSqlite(
      path_, action,
      [&]() -> absl::Status {
        previous = writer_->execAndGet("PRAGMA synchronous").getInt();
        writer_->exec("PRAGMA synchronous = NORMAL");
        return absl::OkStatus();
      },
      SqliteUse::kServing));
  absl::Status status = RunTransaction(*writer_, "BEGIN IMMEDIATE", action, /*write=*/true, fn);
  // Setting the pragma back only changes a flag of the connection; if even that failed, every
  // later "durable" write would silently not be: an impossible state, not a status.
  if (sqlite3_exec(writer_->getHandle(), absl::StrCat("PRAGMA synchronous = ", previous).c_str(),
                   nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::abort();
  }
  return status;
}

absl::Status SqliteDatabase::Read(absl::string_view action,
                                  absl::FunctionRef<absl::Status(SQLite::Database&)> fn) {
  if (in_memory_) {
    absl::MutexLock l(&write_mu_);
    return RunTransaction(*writer_, "BEGIN", action, /*write=*/false, fn);
  }
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> reader, TakeReader());
  absl::Status status = RunTransaction(*reader, "BEGIN", action, /*write=*/false, fn);
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
  // A new connection opens whatever the path names now: never a file that is not ours (checked
  // before, so that a foreign file is not even opened, and after, for a replacement in between).
  if (std::optional<std::string> fault = FileFault(/*writable=*/false)) {
    return absl::UnavailableError(
        absl::StrCat(path_, ": open reader: ", *fault, "; restart the controller"));
  }
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SQLite::Database> reader,
                        GuardSqlite(
                            path_, "open reader",
                            [&]() -> absl::StatusOr<std::unique_ptr<SQLite::Database>> {
                              return std::make_unique<SQLite::Database>(
                                  path_, SQLite::OPEN_READONLY, busy_timeout_ms_);
                            },
                            SqliteUse::kServing));
  if (std::optional<std::string> fault = FileFault(/*writable=*/false)) {
    return absl::UnavailableError(
        absl::StrCat(path_, ": open reader: ", *fault, "; restart the controller"));
  }
  return reader;
}

void SqliteDatabase::ReturnReader(std::unique_ptr<SQLite::Database> reader) {
  absl::MutexLock l(&readers_mu_);
  idle_readers_.push_back(std::move(reader));
}

}  // namespace inac::storage
