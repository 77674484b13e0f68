// SqliteDatabase / SqliteStorage at open and under faults: migrations, refusal of newer schemas,
// non-database files, foreign SQLite files, the controller lock, unwritable paths, a full disk,
// durability across reopen, and the maintenance commands (check, backup).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "storage/maintenance.h"
#include "storage/migrations.h"
#include "storage/sqlite_database.h"
#include "storage/sqlite_storage.h"
#include "tests/storage/test_util.h"

namespace inac::storage {
namespace {

using testing::ReadAll;
using testing::SampleSpec;
using testing::TempDir;
using testing::WriteAll;

bool Mentions(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST(SqliteDatabaseTest, FreshFileGetsLatestSchemaAndPragmas) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ((*storage)->database().schema_version(), LatestSchemaVersion());
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), LatestSchemaVersion());
  EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM schema_version").getInt(), LatestSchemaVersion());
  EXPECT_EQ(db.execAndGet("SELECT name FROM schema_version WHERE version = 1").getString(),
            "001_init");
}

TEST(SqliteDatabaseTest, MigrationsAreEmbeddedInOrder) {
  auto migrations = Migrations();
  ASSERT_FALSE(migrations.empty());
  for (size_t i = 0; i < migrations.size(); ++i) {
    EXPECT_EQ(migrations[i].version, static_cast<int>(i) + 1);
    EXPECT_NE(migrations[i].sql.find("CREATE TABLE"), std::string_view::npos);
  }
}

TEST(SqliteDatabaseTest, DataSurvivesReopen) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  core::JobId id = 0;
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok());
    auto job = (*storage)->jobs().Create(SampleSpec("a"), 5, core::IdempotencyKey{"k", "h"});
    ASSERT_TRUE(job.ok());
    id = job->job.id;
  }
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto job = (*storage)->jobs().Get(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spec, SampleSpec("a"));
  // The idempotency key survived too.
  auto again = (*storage)->jobs().Create(SampleSpec("a"), 6, core::IdempotencyKey{"k", "h"});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, id);
}

TEST(SqliteDatabaseTest, SnapshotAfterReopenEqualsTheCachedOne) {
  // Writes and snapshots fill in-process caches of decoded values; a fresh open must decode
  // exactly the same values.
  TempDir dir;
  std::string path = dir.File("inac.db");
  core::Plan plan = testing::SamplePlan(4);
  std::vector<core::SwitchIntent> intents = {testing::SampleIntent("s2", 4),
                                             testing::SampleIntent("s1", 4)};
  core::Snapshot warm;
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok());
    ASSERT_TRUE((*storage)->plans().Save(plan, intents, 9).ok());
    ASSERT_TRUE((*storage)->topology().Put(testing::SampleTopology(), 10).ok());
    ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("a"), 11).ok());
    ASSERT_TRUE((*storage)->ReadSnapshot().ok());  // fills the spec cache
    auto snap = (*storage)->ReadSnapshot();
    ASSERT_TRUE(snap.ok());
    warm = *snap;
  }
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok());
  auto cold = (*storage)->ReadSnapshot();
  ASSERT_TRUE(cold.ok()) << cold.status();
  ASSERT_TRUE(cold->plan && warm.plan);
  EXPECT_EQ(*cold->plan, *warm.plan);
  EXPECT_EQ(cold->intents, warm.intents);
  EXPECT_EQ(cold->topology, warm.topology);
  EXPECT_EQ(cold->jobs, warm.jobs);
  EXPECT_EQ(cold->jobs.at(0).spec, SampleSpec("a"));
  EXPECT_EQ(*(*storage)->plans().Intents(1), warm.intents);
  EXPECT_EQ((*storage)->plans().Get(1)->plan, warm.plan->plan);
}

TEST(SqliteDatabaseTest, NewerSchemaIsRefusedAndLeftUntouched) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  { ASSERT_TRUE(SqliteStorage::Open(path).ok()); }
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA user_version = " + std::to_string(LatestSchemaVersion() + 1));
    db.exec("PRAGMA journal_mode = DELETE");  // fold the WAL in so the main file is everything
  }
  std::string before = ReadAll(path);
  auto storage = SqliteStorage::Open(path);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(storage.status(), path)) << storage.status();
  EXPECT_TRUE(Mentions(storage.status(), "newer")) << storage.status();
  EXPECT_EQ(ReadAll(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(SqliteDatabaseTest, NonDatabaseFileIsRefusedAndLeftUntouched) {
  TempDir dir;
  std::string path = dir.File("notes.db");
  std::string content = "these are my notes, not a database\n";
  for (int i = 0; i < 6; ++i) content += content;
  WriteAll(path, content);
  auto storage = SqliteStorage::Open(path);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(storage.status(), path)) << storage.status();
  EXPECT_TRUE(Mentions(storage.status(), "not a SQLite database")) << storage.status();
  EXPECT_EQ(ReadAll(path), content);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(SqliteDatabaseTest, ForeignSqliteDatabaseIsRefused) {
  TempDir dir;
  std::string path = dir.File("other.db");
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE jobs (x); INSERT INTO jobs VALUES (1)");
  }
  std::string before = ReadAll(path);
  auto storage = SqliteStorage::Open(path);
  ASSERT_FALSE(storage.ok());
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(storage.status(), "not an INAC one")) << storage.status();
  EXPECT_EQ(ReadAll(path), before);
}

TEST(SqliteDatabaseTest, SecondOpenerInProcessIsRefused) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto first = SqliteStorage::Open(path);
  ASSERT_TRUE(first.ok());
  auto second = SqliteStorage::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(second.status(), "in use by another controller")) << second.status();
  EXPECT_TRUE(Mentions(second.status(), path + ".lock")) << second.status();
  EXPECT_TRUE(Mentions(second.status(), std::to_string(getpid()))) << second.status();
  first->reset();
  EXPECT_TRUE(SqliteStorage::Open(path).ok());  // released with the first storage
}

TEST(SqliteDatabaseTest, LockHeldByAnotherProcessIsRefused) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto storage = SqliteStorage::Open(path);
    char ok = storage.ok() ? '1' : '0';
    if (write(ready[1], &ok, 1) != 1) _exit(3);
    pause();  // hold the database until killed
    _exit(0);
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, '1');
  auto storage = SqliteStorage::Open(path);
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(storage.status(), "pid " + std::to_string(child))) << storage.status();
  kill(child, SIGKILL);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  // The kernel dropped the dead holder's lock: no stale lock to clean up by hand.
  auto after = SqliteStorage::Open(path);
  EXPECT_TRUE(after.ok()) << after.status();
}

TEST(SqliteDatabaseTest, UnwritablePathIsAClearError) {
  // /proc refuses new files even to root, so this cannot pass by accident of privileges.
  auto storage = SqliteStorage::Open("/proc/inac-storage-test.db");
  ASSERT_FALSE(storage.ok());
  EXPECT_TRUE(Mentions(storage.status(), "/proc/inac-storage-test.db")) << storage.status();

  TempDir dir;
  std::string missing = dir.File("no/such/dir/inac.db");
  auto in_missing_dir = SqliteStorage::Open(missing);
  ASSERT_FALSE(in_missing_dir.ok());
  EXPECT_TRUE(Mentions(in_missing_dir.status(), missing)) << in_missing_dir.status();
  EXPECT_FALSE(std::filesystem::exists(dir.File("no")));
}

TEST(SqliteDatabaseTest, ReadOnlyFileIsRefused) {
  if (geteuid() == 0) GTEST_SKIP() << "root can write a 0444 file; covered by the /proc case";
  TempDir dir;
  std::string path = dir.File("inac.db");
  { ASSERT_TRUE(SqliteStorage::Open(path).ok()); }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read);
  auto storage = SqliteStorage::Open(path);
  EXPECT_EQ(storage.status().code(), absl::StatusCode::kPermissionDenied) << storage.status();
}

TEST(SqliteDatabaseTest, DiskFullIsResourceExhaustedAndWritesNothingPartial) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  SqliteOptions options;
  options.max_page_count = 40;  // ~160 KiB with 4 KiB pages: fills after a few hundred jobs
  auto storage = SqliteStorage::Open(path, options);
  ASSERT_TRUE(storage.ok()) << storage.status();
  core::Event event;
  event.kind = "job_submitted";
  event.message = std::string(200, 'x');
  absl::Status failure;
  int created = 0;
  for (int i = 0; i < 100000 && failure.ok(); ++i) {
    auto job =
        (*storage)->jobs().Create(SampleSpec("job-" + std::to_string(i)), i,
                                  core::IdempotencyKey{"key-" + std::to_string(i), "h"}, {event});
    if (job.ok()) {
      ++created;
    } else {
      failure = job.status();
    }
  }
  ASSERT_FALSE(failure.ok());
  EXPECT_EQ(failure.code(), absl::StatusCode::kResourceExhausted) << failure;
  EXPECT_TRUE(Mentions(failure, path)) << failure;
  ASSERT_GT(created, 0);
  // The failed submission left nothing behind: as many jobs as events as keys.
  auto page = (*storage)->jobs().List({.limit = 1000000});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(static_cast<int>(page->jobs.size()), created);
  EXPECT_EQ(static_cast<int>((*storage)->events().List({.limit = 1000000})->size()), created);
  // Reads and smaller writes keep working; after reopen without the cap everything is there.
  storage->reset();
  auto reopened = SqliteStorage::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(static_cast<int>((*reopened)->jobs().List({.limit = 1000000})->jobs.size()), created);
  EXPECT_TRUE((*reopened)->jobs().Create(SampleSpec("after"), 1).ok());
}

// Readiness remembers a failed write: after a write the storage refused (here the disk is full),
// Health is Unavailable naming it, although the file itself is fine and reads work; a refusal that
// is the transaction's own answer changes nothing; the next write that succeeds clears it.
TEST(SqliteDatabaseTest, AFailedWriteMakesHealthUnavailableUntilAWriteSucceeds) {
  TempDir dir;
  SqliteOptions options;
  options.max_page_count = 40;
  auto db = SqliteDatabase::Open(dir.File("inac.db"), options);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)
                  ->Write("create",
                          [](SQLite::Database& d) {
                            d.exec("CREATE TABLE filler(id INTEGER PRIMARY KEY, blob BLOB)");
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_TRUE((*db)->Health().ok());
  absl::Status full;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    full = (*db)->Write("fill", [](SQLite::Database& d) {
      d.exec("INSERT INTO filler(blob) VALUES (zeroblob(8000))");
      return absl::OkStatus();
    });
  }
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  absl::Status health = (*db)->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(absl::StrContains(health.message(), "the last write failed")) << health;
  EXPECT_TRUE((*db)->CheckFile().ok());  // the file's own checks see nothing wrong

  // The transaction's own refusal is not a storage fault: still not healthy.
  EXPECT_EQ(
      (*db)->Write("refused", [](SQLite::Database&) { return absl::NotFoundError("no"); }).code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ((*db)->Health().code(), absl::StatusCode::kUnavailable);

  // A write that succeeds (a delete needs no new page) makes it healthy again.
  ASSERT_TRUE((*db)
                  ->Write("free",
                          [](SQLite::Database& d) {
                            d.exec("DELETE FROM filler");
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_TRUE((*db)->Health().ok()) << (*db)->Health();
}

TEST(SqliteDatabaseTest, ReadersSeeCommittedStateWhileWriting) {
  TempDir dir;
  auto storage = SqliteStorage::Open(dir.File("inac.db"));
  ASSERT_TRUE(storage.ok());
  core::Storage& s = **storage;
  std::atomic<bool> done = false;
  std::atomic<int> bad = 0;
  std::thread reader([&] {
    while (!done) {
      // A job and its event are written together: a snapshot never shows one without the other.
      auto snap = s.ReadSnapshot();
      if (!snap.ok() || static_cast<int64_t>(snap->jobs.size()) != snap->last_event_seq) ++bad;
    }
  });
  core::Event event;
  event.kind = "job_submitted";
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(s.jobs().Create(SampleSpec("j"), i, {}, {event}).ok());
  done = true;
  reader.join();
  EXPECT_EQ(bad, 0);
}

// --- maintenance ---

TEST(MaintenanceTest, CheckReportsVersionCountsAndIntegrity) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok());
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("a"), 1).ok());
  ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("b"), 1).ok());
  // Works while the controller holds the database open.
  auto report = CheckDatabase(path);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->schema_version, LatestSchemaVersion());
  EXPECT_EQ(report->integrity, std::vector<std::string>{"ok"});
  bool saw_jobs = false;
  for (const auto& [table, rows] : report->counts) {
    if (table == "jobs") {
      saw_jobs = true;
      EXPECT_EQ(rows, 2);
    }
  }
  EXPECT_TRUE(saw_jobs);
  EXPECT_EQ(report->jobs_by_state, (std::vector<std::pair<std::string, int64_t>>{{"pending", 2}}));
}

TEST(MaintenanceTest, CheckRefusesMissingAndNonDatabaseFiles) {
  TempDir dir;
  EXPECT_EQ(CheckDatabase(dir.File("absent.db")).status().code(), absl::StatusCode::kNotFound);
  WriteAll(dir.File("text.db"), std::string(4096, 'z'));
  auto report = CheckDatabase(dir.File("text.db"));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition) << report.status();
  EXPECT_EQ(ReadAll(dir.File("text.db")), std::string(4096, 'z'));
}

TEST(MaintenanceTest, CheckFindsCorruption) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok());
    for (int i = 0; i < 300; ++i) ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("j"), i).ok());
  }
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.exec("PRAGMA journal_mode = DELETE");
  }
  // Overwrite the middle of the file (past the header and schema page) with garbage.
  std::string bytes = ReadAll(path);
  ASSERT_GT(bytes.size(), 16384u);
  for (size_t i = 8192; i < 12288; ++i) bytes[i] = static_cast<char>(i * 7);
  WriteAll(path, bytes);
  auto report = CheckDatabase(path);
  if (report.ok()) {
    EXPECT_FALSE(report->ok());
    EXPECT_NE(report->integrity, std::vector<std::string>{"ok"});
  } else {
    EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss) << report.status();
  }
}

TEST(MaintenanceTest, BackupCopiesAConsistentDatabaseAndNeverOverwrites) {
  TempDir dir;
  std::string path = dir.File("inac.db");
  std::string copy = dir.File("backup.db");
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*storage)->jobs().Create(SampleSpec("j"), i).ok());
  auto pages = BackupDatabase(path, copy);  // while the controller holds it
  ASSERT_TRUE(pages.ok()) << pages.status();
  EXPECT_GT(*pages, 0);
  auto report = CheckDatabase(copy);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->jobs_by_state, (std::vector<std::pair<std::string, int64_t>>{{"pending", 50}}));
  std::string before = ReadAll(copy);
  EXPECT_EQ(BackupDatabase(path, copy).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadAll(copy), before);
  // The copy opens as a controller database.
  storage->reset();
  auto opened = SqliteStorage::Open(copy);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->jobs().List({.limit = 100})->jobs.size(), 50u);
  // No temporary files left next to the copy.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    files += entry.path().string().find(".tmp-") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(files, 0);
}

}  // namespace
}  // namespace inac::storage
