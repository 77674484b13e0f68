// Connection management for one SQLite database file: the controller's lock, pragmas, schema
// migrations, one serialised writer connection and a pool of reader connections.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include <SQLiteCpp/Database.h>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/file_lock.h"

namespace inac::storage {

struct SqliteOptions {
  // How long a connection waits for a lock held by another connection before SQLITE_BUSY.
  int busy_timeout_ms = 5000;
  // PRAGMA max_page_count on the writer when > 0: caps the file size. Lets tests provoke
  // SQLITE_FULL without filling a disk; 0 leaves SQLite's default.
  int64_t max_page_count = 0;
  // true: synchronous=FULL, every acknowledged commit survives power loss (the controller's
  // promise). false: synchronous=NORMAL, still consistent after any crash but the newest commits
  // may be lost on power failure; only for bulk loads in benchmarks and tests.
  bool synchronous_full = true;
  // Time source for schema_version.applied_ms (Unix epoch ms); 0 uses the system clock.
  int64_t now_ms = 0;
};

// Thread safety: all methods may be called from any thread. Writes are serialised by a mutex on
// the single writer connection; reads use their own connections (for ":memory:" there is only the
// writer connection, and reads take the writer mutex too).
class SqliteDatabase {
 public:
  // Opens (creating if absent) the database at `path` (":memory:" for a private in-memory one):
  //   1. takes an exclusive flock on "<path>.lock" (FileLock): FailedPrecondition if another
  //      controller holds it;
  //   2. opens the file; PermissionDenied if it is not writable;
  //   3. reads the schema version without writing anything: FailedPrecondition if the file is not
  //      a SQLite database, is a SQLite database without INAC's schema that already has tables, or
  //      has a newer schema version than LatestSchemaVersion() -- in all three cases the file is
  //      left exactly as it was;
  //   4. sets WAL, synchronous=FULL, foreign_keys=ON, busy_timeout;
  //   5. applies each missing migration in its own transaction.
  // Every error message names the file.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path,
                                                              const SqliteOptions& options = {});
  ~SqliteDatabase();

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  // Runs `fn` in one write transaction (BEGIN IMMEDIATE) on the writer connection and commits if
  // it returns OK; otherwise (error status, or an exception, converted by StatusFromException)
  // rolls back and returns that status. `action` names the operation in error messages.
  absl::Status Write(absl::string_view action,
                     absl::FunctionRef<absl::Status(SQLite::Database&)> fn);
  // Runs `fn` in one read transaction: everything it reads comes from one snapshot.
  absl::Status Read(absl::string_view action,
                    absl::FunctionRef<absl::Status(SQLite::Database&)> fn);

 private:
  SqliteDatabase(std::string path, std::unique_ptr<FileLock> lock,
                 std::unique_ptr<SQLite::Database> writer, int schema_version, int busy_timeout_ms);
  absl::StatusOr<std::unique_ptr<SQLite::Database>> TakeReader();
  void ReturnReader(std::unique_ptr<SQLite::Database> reader);
  absl::Status RunTransaction(SQLite::Database& db, const char* begin, absl::string_view action,
                              absl::FunctionRef<absl::Status(SQLite::Database&)> fn);

  const std::string path_;
  const bool in_memory_;
  const int busy_timeout_ms_;
  const int schema_version_;
  std::unique_ptr<FileLock> lock_;  // null for ":memory:"
  absl::Mutex write_mu_;
  std::unique_ptr<SQLite::Database> writer_ ABSL_GUARDED_BY(write_mu_);
  absl::Mutex readers_mu_;
  std::vector<std::unique_ptr<SQLite::Database>> idle_readers_ ABSL_GUARDED_BY(readers_mu_);
};

// Reads `PRAGMA user_version` and the number of schema objects of `db` without writing.
// Used by Open and by the maintenance commands.
struct SchemaProbe {
  int version = 0;
  int64_t objects = 0;  // entries of sqlite_master
};
absl::StatusOr<SchemaProbe> ProbeSchema(SQLite::Database& db, const std::string& path);

}  // namespace inac::storage
