// Connection management for one SQLite database file: the controller's lock, pragmas, schema
// migrations, one serialised writer connection and a pool of reader connections.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
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
  // Test seam of the file check (SqliteDatabase::CheckFile): how it asks whether the database
  // file is writable; returns 0 or an errno value. Empty: access(path, W_OK). Tests use it to
  // simulate a read-only filesystem (EROFS), which they cannot mount, even as root (for whom
  // chmod 0444 changes nothing).
  std::function<int(const std::string& path)> writable_check;
};

// Storage faults (docs/storage.md "Storage faults while running"). At open the database records the
// identity (st_dev, st_ino) of its file and of its write-ahead log "<path>-wal". Every write
// transaction checks, just before its COMMIT and again just after, that the path still names that
// file, the WAL is still that WAL, and the file is writable (CheckFile: three system calls). A
// write that fails the first check is rolled back; one that fails the second committed into a file
// that is no longer the database. In both cases it returns Unavailable and so is never
// acknowledged. Reads keep working on the open connections (they see what was written); a new
// reader connection checks the identity too. Deleting "<path>-shm" or "<path>.lock", and
// overwriting the file in place (same inode, e.g. `cp other.db inac.db`), are not detected.
//
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
  //   5. applies each missing migration in its own transaction;
  //   6. records the identity of the file and of its WAL.
  // Every error message names the file.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path,
                                                              const SqliteOptions& options = {});
  // Closes the connections, then releases the lock. If path() no longer names the file opened
  // (deleted or replaced), also deletes our WAL "<path>-wal" (when it is still ours): SQLite
  // leaves the WAL of a moved file in place, and the next opener would apply it to the file now
  // at the path. Its frames belong to the deleted file, which is gone with our connections.
  ~SqliteDatabase();

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  // Runs `fn` in one write transaction (BEGIN IMMEDIATE) on the writer connection and commits if
  // it returns OK and CheckFile passes; otherwise (error status, exception converted by
  // StatusFromException, or a file fault) rolls back and returns that status. Unavailable, after
  // the commit, when CheckFile fails then (see "Storage faults"). `action` names the operation in
  // error messages.
  absl::Status Write(absl::string_view action,
                     absl::FunctionRef<absl::Status(SQLite::Database&)> fn);
  // Write, but the commit is not fsynced (synchronous=NORMAL for this transaction only): it
  // survives a crash of the process, and a power cut once a later Write (whose fsync of the WAL
  // covers it) or a checkpoint completed; a power cut before that may lose it. For records whose
  // loss in a power cut is acceptable and whose fsync would double the cost of a durable write
  // (the audit log). The writer goes back to its durability setting before the next transaction.
  absl::Status WriteUnsynced(absl::string_view action,
                             absl::FunctionRef<absl::Status(SQLite::Database&)> fn);
  // Runs `fn` in one read transaction: everything it reads comes from one snapshot.
  absl::Status Read(absl::string_view action,
                    absl::FunctionRef<absl::Status(SQLite::Database&)> fn);

  // OK when path() still names the file opened at Open, "<path>-wal" the WAL recorded then, and
  // the file is writable; otherwise Unavailable saying which ("was deleted", "was replaced",
  // "is read-only"). Only system calls (stat, stat, access), no SQLite. Always OK for ":memory:".
  absl::Status CheckFile() const;

  // Whether the database can durably accept writes now (core::Storage::Health): CheckFile, then
  // Unavailable if any connection has reported the file corrupt (SQLITE_CORRUPT / NOTADB; sticky
  // until the database is closed: corruption does not heal), then Unavailable if SQLite failed the
  // last write transaction -- an error other than a busy lock: an I/O error, a read-only or full
  // disk -- naming it, until a later write succeeds (a filesystem that turned read-only under the
  // controller while the file's own checks still pass is seen here; a file fault is not
  // remembered, CheckFile sees it while it lasts), then one small read (schema version and schema)
  // on a fresh read-only connection -- what a restarted controller would read first. Never writes.
  // About 0.1 ms.
  absl::Status Health();

 private:
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
  };
  SqliteDatabase(std::string path, std::unique_ptr<FileLock> lock,
                 std::unique_ptr<SQLite::Database> writer, int schema_version, int busy_timeout_ms,
                 FileId file_id, std::optional<FileId> wal_id,
                 std::function<int(const std::string&)> writable_check);
  absl::StatusOr<std::unique_ptr<SQLite::Database>> TakeReader();
  void ReturnReader(std::unique_ptr<SQLite::Database> reader);
  absl::Status RunTransaction(SQLite::Database& db, const char* begin, absl::string_view action,
                              bool write, absl::FunctionRef<absl::Status(SQLite::Database&)> fn);
  // What is wrong with the file ("was deleted while the controller ran", ...), or nullopt.
  // `writable`: also ask whether it is writable.
  std::optional<std::string> FileFault(bool writable) const;
  // After the connections are closed: deletes "<path>-wal" if it is still our WAL but path() no
  // longer names our file (see ~SqliteDatabase).
  void RemoveOrphanedWal();
  // Remembers the first corruption an SQLite call reported (for Health).
  void NoteCorruption(const absl::Status& status);
  // After each write transaction: a success forgets a remembered write failure; a failure that is
  // the storage's (`storage_fault`) is remembered for Health.
  void NoteWriteOutcome(const absl::Status& status, bool storage_fault);

  const std::string path_;
  const bool in_memory_;
  const int busy_timeout_ms_;
  const int schema_version_;
  const FileId file_id_;                // meaningless for ":memory:"
  const std::optional<FileId> wal_id_;  // nullopt: no WAL file existed after open (not checked)
  const std::function<int(const std::string&)> writable_check_;  // empty: access(W_OK)
  std::unique_ptr<FileLock> lock_;                               // null for ":memory:"
  absl::Mutex write_mu_;
  std::unique_ptr<SQLite::Database> writer_ ABSL_GUARDED_BY(write_mu_);
  absl::Mutex readers_mu_;
  std::vector<std::unique_ptr<SQLite::Database>> idle_readers_ ABSL_GUARDED_BY(readers_mu_);
  absl::Mutex corruption_mu_;
  absl::Status corruption_ ABSL_GUARDED_BY(corruption_mu_);
  absl::Status write_fault_ ABSL_GUARDED_BY(corruption_mu_);  // OK, or the last write's failure
};

// Reads `PRAGMA user_version` and the number of schema objects of `db` without writing.
// Used by Open and by the maintenance commands.
struct SchemaProbe {
  int version = 0;
  int64_t objects = 0;  // entries of sqlite_master
};
absl::StatusOr<SchemaProbe> ProbeSchema(SQLite::Database& db, const std::string& path);

}  // namespace inac::storage
