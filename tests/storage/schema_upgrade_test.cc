// Schema version 2 (storage/migrations/002_audit_and_retention.sql): a database written by a
// version-1 controller is upgraded in place at open with its data intact; and the offline
// maintenance that goes with it (storage/maintenance.h): PruneDatabase (lock refusal, dry run,
// real run, bad ages) and ListAudit.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "core/json.h"
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

constexpr int64_t kDay = 24LL * 3600 * 1000;
constexpr int64_t kNow = 1'700'000'000'000;  // a fixed "now" for the prunes

bool Mentions(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

bool HasObject(SQLite::Database& db, const std::string& type, const std::string& name) {
  SQLite::Statement q(db, "SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?");
  q.bind(1, type);
  q.bind(2, name);
  return q.executeStep();
}

// Writes what a version-1 controller would have left: the 001 schema only, user_version 1, and
// a completed job (updated `updated_ms`) with an idempotency key and an event, plus a running one.
void WriteVersion1Database(const std::string& path, int64_t updated_ms) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("BEGIN");
  db.exec(std::string(Migrations()[0].sql));
  db.exec("INSERT INTO schema_version (version, name, applied_ms) VALUES (1, '001_init', 1)");
  db.exec("PRAGMA user_version = 1");
  SQLite::Statement job(db,
                        "INSERT INTO jobs (id, state, tenant, name, priority, spec, created_ms, "
                        "updated_ms) VALUES (?, ?, 'default', ?, 3, ?, 1, ?)");
  auto insert = [&](int64_t id, const char* state, const std::string& name) {
    job.reset();
    job.bind(1, id);
    job.bind(2, state);
    job.bind(3, name);
    job.bind(4, core::JobSpecToJson(SampleSpec(name)).dump());
    job.bind(5, updated_ms);
    job.exec();
  };
  insert(1, "completed", "done");
  insert(2, "running", "busy");
  db.exec(
      "INSERT INTO idempotency_keys (key, job_id, body_hash, created_ms) VALUES ('k-done', 1, "
      "'h', 1)");
  db.exec(
      "INSERT INTO events (time_ms, kind, job_id, message, data) VALUES "
      "(1, 'job_submitted', 1, 'm', '{}'), (1, 'job_submitted', 2, 'm', '{}'), "
      "(1, 'plan_saved', NULL, 'm', '{}')");
  db.exec("COMMIT");
}

TEST(SchemaUpgradeTest, Version1DatabaseIsUpgradedWithItsDataIntact) {
  ASSERT_EQ(LatestSchemaVersion(), 2);
  TempDir dir;
  const std::string path = dir.File("v1.db");
  WriteVersion1Database(path, kNow - 10 * kDay);
  {
    auto storage = SqliteStorage::Open(path, {.now_ms = 4242});
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_EQ((*storage)->database().schema_version(), 2);
    auto done = (*storage)->jobs().Get(1);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state, core::JobState::kCompleted);
    EXPECT_EQ(done->spec, SampleSpec("done"));
    EXPECT_EQ((*storage)->events().List({})->size(), 3u);
    // The old key still answers with its job.
    auto replay =
        (*storage)->jobs().Create(SampleSpec("done"), 5, core::IdempotencyKey{"k-done", "h"});
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_FALSE(replay->created);
    EXPECT_EQ(replay->job.id, 1);
    // The new table works.
    core::AuditEntry e{.time_ms = 1,
                       .actor = "ops",
                       .role = "admin",
                       .remote_addr = "127.0.0.1",
                       .method = "POST",
                       .path = "/api/v1/jobs",
                       .status = 201};
    auto seq = (*storage)->audit().Append(e);
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_EQ(*seq, 1);
    // And retention over the upgraded data.
    EXPECT_EQ(*(*storage)->jobs().PruneFinished(kNow - 7 * kDay, 100), 1);
    EXPECT_FALSE((*storage)->jobs().Get(1).ok());
    EXPECT_TRUE((*storage)->jobs().Get(2).ok());
  }
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 2);
  EXPECT_EQ(db.execAndGet("SELECT name FROM schema_version WHERE version = 2").getString(),
            "002_audit_and_retention");
  EXPECT_EQ(db.execAndGet("SELECT applied_ms FROM schema_version WHERE version = 2").getInt64(),
            4242);
  EXPECT_TRUE(HasObject(db, "table", "audit"));
  EXPECT_TRUE(HasObject(db, "index", "idempotency_keys_by_job"));
  EXPECT_TRUE(HasObject(db, "index", "jobs_finished_by_time"));
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM idempotency_keys").getInt(), 0);
  EXPECT_EQ(db.execAndGet("PRAGMA integrity_check").getString(), "ok");
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM pragma_foreign_key_check").getInt(), 0);
}

TEST(SchemaUpgradeTest, FinishedJobsQueryUsesTheRetentionIndex) {
  TempDir dir;
  const std::string path = dir.File("inac.db");
  ASSERT_TRUE(SqliteStorage::Open(path).ok());
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  // The query of SqliteJobStore::PruneFinished: a range of the partial index, no sort.
  SQLite::Statement plan(db,
                         "EXPLAIN QUERY PLAN SELECT id FROM jobs INDEXED BY jobs_finished_by_time "
                         "WHERE state IN ('completed', 'cancelled', 'failed') AND updated_ms < 5 "
                         "ORDER BY updated_ms, id LIMIT 10");
  std::string detail;
  while (plan.executeStep()) detail += plan.getColumn(3).getString() + "\n";
  EXPECT_NE(detail.find("jobs_finished_by_time (updated_ms<?)"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("TEMP B-TREE"), std::string::npos) << detail;
  // The events and keys of a job are found by index too (DELETE ... WHERE job_id = ?).
  for (const char* sql : {"EXPLAIN QUERY PLAN DELETE FROM events WHERE job_id = 5",
                          "EXPLAIN QUERY PLAN DELETE FROM idempotency_keys WHERE job_id = 5"}) {
    SQLite::Statement q(db, sql);
    std::string how;
    while (q.executeStep()) how += q.getColumn(3).getString() + "\n";
    EXPECT_NE(how.find("USING"), std::string::npos) << sql << ": " << how;
  }
}

// --- the audit log's commits ---

TEST(AuditDurabilityTest, UnsyncedWriteIsNotFsyncedAndTheNextWriteIsAgain) {
  TempDir dir;
  auto db = SqliteDatabase::Open(dir.File("inac.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto synchronous = [](SQLite::Database& c) {
    return c.execAndGet("PRAGMA synchronous").getInt();
  };
  int during = -1, after = -1;
  ASSERT_TRUE((*db)
                  ->WriteUnsynced("t",
                                  [&](SQLite::Database& c) -> absl::Status {
                                    during = synchronous(c);
                                    return absl::OkStatus();
                                  })
                  .ok());
  ASSERT_TRUE((*db)
                  ->Write("t",
                          [&](SQLite::Database& c) -> absl::Status {
                            after = synchronous(c);
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_EQ(during, 1);  // NORMAL
  EXPECT_EQ(after, 2);   // FULL again
  // Also after a failed unsynced write.
  EXPECT_FALSE(
      (*db)
          ->WriteUnsynced(
              "t", [](SQLite::Database&) -> absl::Status { return absl::InternalError("x"); })
          .ok());
  ASSERT_TRUE((*db)
                  ->Write("t",
                          [&](SQLite::Database& c) -> absl::Status {
                            after = synchronous(c);
                            return absl::OkStatus();
                          })
                  .ok());
  EXPECT_EQ(after, 2);
  // An audit entry appended unsynced is committed all the same (visible to a new connection).
  auto storage = SqliteStorage::Open(dir.File("audit.db"));
  ASSERT_TRUE(storage.ok());
  core::AuditEntry e{.time_ms = 1,
                     .actor = "ops",
                     .role = "admin",
                     .remote_addr = "127.0.0.1",
                     .method = "POST",
                     .path = "/api/v1/jobs",
                     .status = 201};
  ASSERT_TRUE((*storage)->audit().Append(e).ok());
  SQLite::Database reader(dir.File("audit.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(reader.execAndGet("SELECT count(*) FROM audit").getInt(), 1);
}

// --- inac db prune ---

TEST(PruneDatabaseTest, DryRunCountsAndChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("v1.db");
  WriteVersion1Database(path, kNow - 10 * kDay);
  const std::string before = ReadAll(path);
  auto report = PruneDatabase(path, {.finished_older_than_ms = 7 * kDay,
                                     .audit_older_than_ms = kDay,
                                     .dry_run = true,
                                     .now_ms = kNow});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->dry_run);
  EXPECT_EQ(report->finished_jobs, 1);
  EXPECT_EQ(report->idempotency_keys, 1);
  EXPECT_EQ(report->events, 1);
  EXPECT_EQ(report->audit_entries, 0);  // version 1: no audit table yet
  EXPECT_EQ(ReadAll(path), before);     // not even migrated
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(db.execAndGet("PRAGMA user_version").getInt(), 1);
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM jobs").getInt(), 2);
}

TEST(PruneDatabaseTest, RemovesWhatTheDryRunCountedAndUpgradesTheSchema) {
  TempDir dir;
  const std::string path = dir.File("v1.db");
  WriteVersion1Database(path, kNow - 10 * kDay);
  // Too young for a 30-day retention: nothing.
  auto young = PruneDatabase(path, {.finished_older_than_ms = 30 * kDay, .now_ms = kNow});
  ASSERT_TRUE(young.ok()) << young.status();
  EXPECT_EQ(young->finished_jobs, 0);
  auto report = PruneDatabase(path, {.finished_older_than_ms = 7 * kDay, .now_ms = kNow});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->dry_run);
  EXPECT_EQ(report->finished_jobs, 1);
  EXPECT_EQ(report->idempotency_keys, 1);
  EXPECT_EQ(report->events, 1);
  auto storage = SqliteStorage::Open(path);
  ASSERT_TRUE(storage.ok()) << storage.status();
  EXPECT_FALSE((*storage)->jobs().Get(1).ok());
  EXPECT_TRUE((*storage)->jobs().Get(2).ok());
  EXPECT_EQ((*storage)->events().List({})->size(), 2u);
}

TEST(PruneDatabaseTest, PrunesAuditEntriesByAge) {
  TempDir dir;
  const std::string path = dir.File("inac.db");
  {
    auto storage = SqliteStorage::Open(path);
    ASSERT_TRUE(storage.ok());
    for (int64_t age_days : {100, 95, 10}) {
      core::AuditEntry e{.time_ms = kNow - age_days * kDay,
                         .actor = "ops",
                         .role = "admin",
                         .remote_addr = "127.0.0.1",
                         .method = "PUT",
                         .path = "/api/v1/topology",
                         .status = 200};
      ASSERT_TRUE((*storage)->audit().Append(e).ok());
    }
  }
  auto report = PruneDatabase(path, {.audit_older_than_ms = 90 * kDay, .now_ms = kNow});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->audit_entries, 2);
  EXPECT_EQ(report->finished_jobs, 0);
  auto left = ListAudit(path, {});
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->entries.size(), 1u);
  EXPECT_EQ(left->entries[0].seq, 3);
}

TEST(PruneDatabaseTest, RefusedWhileAControllerHoldsTheDatabase) {
  TempDir dir;
  const std::string path = dir.File("inac.db");
  auto controller = SqliteStorage::Open(path);  // what `inac serve` holds
  ASSERT_TRUE(controller.ok());
  for (bool dry_run : {false, true}) {
    auto report =
        PruneDatabase(path, {.finished_older_than_ms = kDay, .dry_run = dry_run, .now_ms = kNow});
    EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable) << report.status();
    EXPECT_TRUE(Mentions(report.status(), "in use by another controller")) << report.status();
    EXPECT_TRUE(Mentions(report.status(), std::to_string(getpid()))) << report.status();
  }
  controller->reset();
  EXPECT_TRUE(PruneDatabase(path, {.finished_older_than_ms = kDay, .now_ms = kNow}).ok());
}

TEST(PruneDatabaseTest, BadArgumentsAndFiles) {
  TempDir dir;
  const std::string missing = dir.File("missing.db");
  EXPECT_EQ(PruneDatabase(missing, {.finished_older_than_ms = kDay}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(missing));  // never created
  const std::string path = dir.File("inac.db");
  ASSERT_TRUE(SqliteStorage::Open(path).ok());
  EXPECT_EQ(PruneDatabase(path, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PruneDatabase(path, {.finished_older_than_ms = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PruneDatabase(path, {.audit_older_than_ms = -5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A SQLite file that is not INAC's.
  const std::string foreign = dir.File("foreign.db");
  {
    SQLite::Database db(foreign, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("CREATE TABLE t (x)");
  }
  for (bool dry_run : {false, true}) {
    EXPECT_EQ(PruneDatabase(foreign, {.finished_older_than_ms = kDay, .dry_run = dry_run})
                  .status()
                  .code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// --- inac db audit ---

TEST(ListAuditTest, ReadsTheLogAndRefusesAVersion1Database) {
  TempDir dir;
  const std::string v1 = dir.File("v1.db");
  WriteVersion1Database(v1, 1);
  auto old = ListAudit(v1, {});
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Mentions(old.status(), "no audit log")) << old.status();

  const std::string path = dir.File("inac.db");
  auto storage = SqliteStorage::Open(path);  // a running controller does not stop a reader
  ASSERT_TRUE(storage.ok());
  for (const char* actor : {"ops", "ci", "ops"}) {
    core::AuditEntry e{.time_ms = 1,
                       .actor = actor,
                       .role = "operator",
                       .remote_addr = "::1",
                       .method = "DELETE",
                       .path = "/api/v1/jobs/4",
                       .status = 409,
                       .job_id = 4};
    ASSERT_TRUE((*storage)->audit().Append(e).ok());
  }
  auto ops = ListAudit(path, {.actor = "ops", .limit = 1});
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->entries.size(), 1u);
  EXPECT_EQ(ops->entries[0].status, 409);
  EXPECT_EQ(ops->entries[0].job_id, 4);
  ASSERT_TRUE(ops->next_after_seq);
  auto rest = ListAudit(path, {.after_seq = *ops->next_after_seq, .actor = "ops"});
  ASSERT_EQ(rest->entries.size(), 1u);
  EXPECT_EQ(rest->entries[0].seq, 3);
  EXPECT_EQ(ListAudit(path, {.limit = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListAudit(dir.File("none.db"), {}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace inac::storage
