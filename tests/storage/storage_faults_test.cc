// Storage faults while the controller runs (docs/storage.md "Storage faults while running"): the
// database file deleted, replaced, made read-only or corrupted under an open SqliteStorage. Every
// write then fails with Unavailable (a server fault: the REST layer answers 503, never 2xx or 4xx)
// and writes nothing, and Health() reports the fault. Also: the SQLite result-code mapping, the
// in-memory fake's Health, and the cost of the per-write file check (recorded as test properties,
// never asserted).
#include <fcntl.h>
#include <linux/fs.h>
#include <sqlite3.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "storage/sqlite_error.h"
#include "storage/sqlite_storage.h"
#include "storage/testing/in_memory_stores.h"
#include "tests/storage/test_util.h"

namespace inac::storage {
namespace {

using testing::SampleSpec;
using testing::TempDir;

bool Mentions(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

int64_t JobCount(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  return db.execAndGet("SELECT count(*) FROM jobs").getInt64();
}

// Every kind of write the controller makes; each must fail with Unavailable naming `fault`.
void ExpectEveryWriteUnavailable(SqliteStorage& storage, const std::string& fault) {
  core::Event event;
  event.kind = "test";
  std::vector<absl::Status> failures = {
      storage.jobs()
          .Create(SampleSpec("after"), 100, core::IdempotencyKey{"k-after", "h"})
          .status(),
      storage.jobs().Update(1, core::JobUpdate{.iterations_done = 7}, 100).status(),
      storage.jobs().UpdateMany({{1, core::JobUpdate{.loss = 0.5}}}, 100),
      storage.topology().Put(testing::SampleTopology(), 100).status(),
      storage.plans().Save(testing::SamplePlan(1), {testing::SampleIntent("s1", 1)}, 100).status(),
      storage.switch_states().Put(core::SwitchState{.switch_id = "s1", .applied_version = 1}),
      storage.events().Append(event).status(),
      storage.events().Trim(0).status(),
  };
  for (const absl::Status& s : failures) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_TRUE(Mentions(s, fault)) << s;
    EXPECT_TRUE(Mentions(s, storage.database().path())) << s;
  }
}

// --- Mapping of SQLite's result codes ---

TEST(SqliteErrorTest, ServerFaultsAreNeverClientErrorsWhileServing) {
  // Everything here is the server's (or its disk's) fault: Unavailable or ResourceExhausted, both
  // 503 at the REST edge; none may become a 4xx code (FailedPrecondition, PermissionDenied, ...).
  for (int code : {SQLITE_CORRUPT, SQLITE_CORRUPT_INDEX, SQLITE_NOTADB, SQLITE_READONLY,
                   SQLITE_READONLY_DBMOVED, SQLITE_READONLY_RECOVERY, SQLITE_IOERR,
                   SQLITE_IOERR_WRITE, SQLITE_IOERR_FSYNC, SQLITE_CANTOPEN, SQLITE_PROTOCOL,
                   SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOLFS}) {
    EXPECT_EQ(CodeForSqliteResult(code, SqliteUse::kServing), absl::StatusCode::kUnavailable)
        << code;
  }
  EXPECT_EQ(CodeForSqliteResult(SQLITE_FULL, SqliteUse::kServing),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_NOMEM, SqliteUse::kServing),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_CONSTRAINT_UNIQUE, SqliteUse::kServing),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_MISUSE, SqliteUse::kServing), absl::StatusCode::kInternal);
  EXPECT_TRUE(IsCorruption(SQLITE_CORRUPT_SEQUENCE));
  EXPECT_TRUE(IsCorruption(SQLITE_NOTADB));
  EXPECT_FALSE(IsCorruption(SQLITE_IOERR));
}

TEST(SqliteErrorTest, OpenAndMaintenanceKeepSayingWhatIsWrongWithTheFile) {
  // At open and in `inac db check|backup` the file is the operator's input.
  EXPECT_EQ(CodeForSqliteResult(SQLITE_NOTADB), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_CORRUPT), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_READONLY), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CodeForSqliteResult(SQLITE_IOERR_READ), absl::StatusCode::kUnavailable);
  absl::Status damaged = StatusFromSqliteCode(SQLITE_CORRUPT, "database disk image is malformed",
                                              "/x.db", "get job", SqliteUse::kServing);
  EXPECT_EQ(damaged.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Mentions(damaged, "damaged")) << damaged;
}

// --- The file deleted, replaced, read-only ---

TEST(StorageFaultsTest, OpenRecordsTheFileAndItsWal) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  for (int round = 0; round < 2; ++round) {  // a new file, then an existing one
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok()) << storage.status();
    // The WAL exists right after open, so the file check covers it from the first write on.
    EXPECT_TRUE(std::filesystem::exists(path + "-wal")) << "round " << round;
    EXPECT_TRUE((*storage)->database().CheckFile().ok());
    EXPECT_TRUE((*storage)->Health().ok()) << (*storage)->Health();
  }
}

TEST(StorageFaultsTest, DeletedFileFailsEveryWriteAndHealth) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto job = (*storage)->jobs().Create(SampleSpec("before"), 1);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*storage)->jobs().Get(job->job.id).ok());  // leaves a reader connection pooled
  ASSERT_TRUE((*storage)->Health().ok());

  ASSERT_EQ(unlink(path.c_str()), 0);
  ExpectEveryWriteUnavailable(**storage, "deleted");
  absl::Status health = (*storage)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(Mentions(health, "deleted")) << health;
  // Reads keep answering from the open (deleted) file: what was acknowledged before.
  auto again = (*storage)->jobs().Get(job->job.id);
  EXPECT_TRUE(again.ok()) << again.status();
  // Nothing was acknowledged, and nothing was written either: no second job, no key.
  auto listed = (*storage)->jobs().List({});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->jobs.size(), 1u);

  // On close our WAL goes too: SQLite leaves the WAL of a moved file in place, and the next
  // opener would replay it into the new, empty file (a half database).
  ASSERT_TRUE(std::filesystem::exists(path + "-wal"));
  storage->reset();
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  auto fresh = SqliteStorage::Open(path);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE((*fresh)->Health().ok()) << (*fresh)->Health();
  auto empty = (*fresh)->jobs().List({});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->jobs.empty());
}

TEST(StorageFaultsTest, AllDatabaseFilesDeleted) {
  // `rm inac.db*` while the controller runs: the file, its WAL and its shared memory.
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("before"), 1).ok());
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ASSERT_EQ(unlink((path + suffix).c_str()), 0) << suffix;
  }
  ExpectEveryWriteUnavailable(**storage, "deleted");
  EXPECT_EQ((*storage)->Health().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(std::filesystem::exists(path)) << "a write recreated the file";
}

TEST(StorageFaultsTest, DeletedWalFailsWrites) {
  // Commits go to the WAL; one deleted while open would take every commit since the last
  // checkpoint with it at the next restart.
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("before"), 1).ok());
  ASSERT_EQ(unlink((path + "-wal").c_str()), 0);
  ExpectEveryWriteUnavailable(**storage, "write-ahead log");
  absl::Status health = (*storage)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(Mentions(health, path + "-wal")) << health;
  // A clean close checkpoints the open (deleted) WAL into the file: the job acknowledged before
  // is kept. (A kill -9 now would lose it.)
  storage->reset();
  EXPECT_EQ(JobCount(path), 1);
}

TEST(StorageFaultsTest, ReplacedFileFailsWritesReadsOnNewConnectionsAndHealth) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  std::string other = dir.File("other.db");
  {
    auto second = SqliteStorage::Open(other);  // a valid INAC database, but not ours
    ASSERT_TRUE(second.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*second)->jobs().Create(SampleSpec("x"), 1).ok());
  }
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto job = (*storage)->jobs().Create(SampleSpec("before"), 1);
  ASSERT_TRUE(job.ok());
  // No read yet: the first one will need a new reader connection, opened on whatever the path
  // names by then.
  ASSERT_EQ(rename(other.c_str(), path.c_str()), 0);

  ExpectEveryWriteUnavailable(**storage, "replaced");
  EXPECT_EQ((*storage)->Health().code(), absl::StatusCode::kUnavailable);
  auto read = (*storage)->jobs().Get(job->job.id);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable) << read.status();
  EXPECT_TRUE(Mentions(read.status(), "replaced")) << read.status();
  storage->reset();
  EXPECT_EQ(JobCount(path), 3);  // the replacement is untouched
}

TEST(StorageFaultsTest, ReadOnlyFileFailsWritesAndHealthUntilWritableAgain) {
  // Root writes through chmod 0444, and tests cannot mount a read-only filesystem: the seam
  // answers the writability question as a read-only filesystem would (EROFS).
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto read_only = std::make_shared<std::atomic<bool>>(false);
  SqliteOptions options;
  options.writable_check = [read_only](const std::string&) {
    return read_only->load() ? EROFS : 0;
  };
  auto storage = SqliteStorage::Open(path, options);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("before"), 1).ok());

  read_only->store(true);
  ExpectEveryWriteUnavailable(**storage, "read-only");
  absl::Status health = (*storage)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(Mentions(health, "read-only")) << health;
  EXPECT_EQ(JobCount(path), 1);

  // Not sticky: once the filesystem is writable again, so is the database.
  read_only->store(false);
  EXPECT_TRUE((*storage)->Health().ok());
  EXPECT_TRUE((*storage)->jobs().Create(SampleSpec("after"), 2).ok());
  EXPECT_EQ(JobCount(path), 2);
}

// Sets or clears the immutable attribute (chattr +i); errno on failure (ENOTTY: filesystem
// without it, EPERM: no CAP_LINUX_IMMUTABLE).
int SetImmutable(const std::string& path, bool on) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return errno;
  int flags = 0;
  int err = 0;
  if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) {
    err = errno;
  } else {
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    if (ioctl(fd, FS_IOC_SETFLAGS, &flags) != 0) err = errno;
  }
  close(fd);
  return err;
}

TEST(StorageFaultsTest, ImmutableFileFailsWritesEvenForRoot) {
  // The real thing without the seam: an immutable file is read-only for root too.
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("before"), 1).ok());
  if (int err = SetImmutable(path, true); err != 0) {
    GTEST_SKIP() << "cannot make the file immutable here: " << strerror(err);
  }
  ExpectEveryWriteUnavailable(**storage, "read-only");
  EXPECT_EQ((*storage)->Health().code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(SetImmutable(path, false), 0);  // or TempDir could not remove it
  EXPECT_EQ(JobCount(path), 1);
}

TEST(StorageFaultsTest, ChmodReadOnlyFailsWritesForNonRoot) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes a 0444 file; see the EROFS and immutable tests";
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  ExpectEveryWriteUnavailable(**storage, "read-only");
  EXPECT_EQ((*storage)->Health().code(), absl::StatusCode::kUnavailable);
}

TEST(StorageFaultsTest, DeletionDuringTheCommitIsNotAcknowledged) {
  // The file disappears between the check before COMMIT and the end of COMMIT (the seam runs
  // inside that first check, after the identity part): the check after COMMIT catches it.
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto armed = std::make_shared<std::atomic<bool>>(false);
  SqliteOptions options;
  options.writable_check = [armed](const std::string& p) {
    if (armed->exchange(false)) unlink(p.c_str());
    return 0;
  };
  auto storage = SqliteStorage::Open(path, options);
  ASSERT_TRUE(storage.ok()) << storage.status();
  armed->store(true);
  auto job = (*storage)->jobs().Create(SampleSpec("racing"), 1);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnavailable) << job.status();
  EXPECT_TRUE(Mentions(job.status(), "will be lost")) << job.status();
}

// --- Corruption ---

// Overwrites `length` bytes at `offset` of the file in place (same inode, as a disk or a stray
// writer would).
void Scribble(const std::string& path, int64_t offset, int64_t length) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good());
  f.seekp(offset);
  for (int64_t i = 0; i < length; ++i) f.put(static_cast<char>((i * 37 + 11) & 0xff));
  ASSERT_TRUE(f.good());
}

TEST(StorageFaultsTest, CorruptPageIsUnavailableNotAClientError) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  int64_t root = 0;
  int64_t page_size = 0;
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok());
    for (int i = 0; i < 300; ++i) ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("j"), i).ok());
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA journal_mode = DELETE");  // fold the WAL in: the main file is everything
    root = db.execAndGet("SELECT rootpage FROM sqlite_master WHERE name = 'jobs'").getInt64();
    page_size = db.execAndGet("PRAGMA page_size").getInt64();
  }
  ASSERT_GT(root, 1);
  Scribble(path, (root - 1) * page_size, page_size);  // the jobs table's root page

  auto storage = SqliteStorage::Open(path);  // page 1 and the schema are intact
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto created = (*storage)->jobs().Create(SampleSpec("new"), 1000);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable) << created.status();
  EXPECT_TRUE(Mentions(created.status(), path)) << created.status();
  auto got = (*storage)->jobs().Get(5);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  // Corruption does not heal: readiness reports it from then on.
  absl::Status health = (*storage)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(Mentions(health, "damaged")) << health;
}

TEST(StorageFaultsTest, CorruptHeaderWhileRunningIsUnavailableNotAConflict) {
  // A corrupted page once answered 409: the first page overwritten while the controller runs
  // made SQLite answer SQLITE_NOTADB, once mapped to FailedPrecondition.
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("j"), i).ok());
  {
    // Another connection checkpoints everything into the main file and empties the WAL, so the
    // next transaction of every connection reads page 1 from the main file again.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  Scribble(path, 0, 100);  // the database header

  auto created = (*storage)->jobs().Create(SampleSpec("new"), 1000);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable) << created.status();
  absl::Status health = (*storage)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  auto listed = (*storage)->jobs().List({});
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kUnavailable) << listed.status();
}

// --- Other stores ---

TEST(StorageFaultsTest, InMemorySqliteIsAlwaysHealthy) {
  auto storage = SqliteStorage::Open(":memory:");
  ASSERT_TRUE(storage.ok());
  EXPECT_TRUE((*storage)->Health().ok());
  EXPECT_TRUE((*storage)->database().CheckFile().ok());
  EXPECT_TRUE((*storage)->jobs().Create(SampleSpec("a"), 1).ok());
}

TEST(StorageFaultsTest, InMemoryStorageHealthIsInjectedSeparatelyFromWrites) {
  InMemoryStorage storage;
  EXPECT_TRUE(storage.Health().ok());
  storage.FailNextWrites(absl::UnavailableError("disk"), 1);
  EXPECT_TRUE(storage.Health().ok());  // a pending failed write is not a state of the store
  storage.SetHealth(absl::UnavailableError("database file was deleted"));
  EXPECT_EQ(storage.Health().code(), absl::StatusCode::kUnavailable);
  storage.SetHealth(absl::OkStatus());
  EXPECT_TRUE(storage.Health().ok());
}

// --- Cost ---

TEST(StorageFaultsTest, CostOfTheFileCheck) {
  // Figures only (as test properties, see --gtest_output=xml): no timed assertion. The per-write
  // check runs CheckFile's system calls twice per write (before and after COMMIT).
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok());
  using Clock = std::chrono::steady_clock;
  auto ns_per = [](Clock::duration d, int n) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count() / n;
  };
  constexpr int kChecks = 20000;
  auto start = Clock::now();
  for (int i = 0; i < kChecks; ++i) ASSERT_TRUE((*storage)->database().CheckFile().ok());
  RecordProperty("check_file_ns", static_cast<int>(ns_per(Clock::now() - start, kChecks)));

  constexpr int kHealth = 500;
  start = Clock::now();
  for (int i = 0; i < kHealth; ++i) ASSERT_TRUE((*storage)->Health().ok());
  RecordProperty("health_ns", static_cast<int>(ns_per(Clock::now() - start, kHealth)));

  constexpr int kWrites = 200;  // synchronous=FULL: every one is an fsync
  start = Clock::now();
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("j"), i).ok());
  }
  RecordProperty("create_job_ns", static_cast<int>(ns_per(Clock::now() - start, kWrites)));
}

}  // namespace
}  // namespace inac::storage
