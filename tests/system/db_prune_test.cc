// `inac db prune` and `inac db audit` as an operator runs them (docs/storage.md "Maintenance
// commands"): the real CLI process on a database written the way a controller writes it; refused
// while a controller (`inac serve`) holds the database; a dry run changes nothing; a real run
// removes the finished jobs and audit entries older than the ages and nothing else.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

constexpr int64_t kDay = 24LL * 3600 * 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool Has(const CliRun& run, const std::string& text) {
  return run.out.find(text) != std::string::npos;
}

struct Ids {
  core::JobId old_finished = 0;
  core::JobId recent_finished = 0;
  core::JobId old_running = 0;
};

// What a controller that ran for weeks leaves: a job cancelled 10 days ago (with an idempotency
// key and events), one cancelled an hour ago, one running for 10 days; audit entries 100 and 1
// day(s) old.
Ids WriteDatabase(const std::string& path) {
  Ids ids;
  auto storage = storage::SqliteStorage::Open(path);
  EXPECT_TRUE(storage.ok()) << storage.status();
  if (!storage.ok()) return ids;
  core::Storage& s = **storage;
  const int64_t now = NowMs();
  auto job = [&](const std::string& name, int64_t at, std::vector<core::JobState> path) {
    core::JobSpec spec;
    spec.name = name;
    spec.tenant = "systest";
    spec.workers = {"h0_0_0", "h0_0_1"};
    spec.parameter_servers = {"h1_0_0"};
    spec.gradient_bytes = 1000;
    spec.compute_ms = 1;
    spec.iterations = 10;
    spec.batch_size = 1;
    core::Event submitted{.time_ms = at, .kind = "job_submitted", .message = "submitted"};
    auto created = s.jobs().Create(spec, at, core::IdempotencyKey{"key-" + name, "h"}, {submitted});
    EXPECT_TRUE(created.ok()) << created.status();
    for (core::JobState state : path) {
      core::Event e{.time_ms = at, .kind = "job_state", .message = "state"};
      EXPECT_TRUE(s.jobs().Update(created->job.id, {.state = state}, at, {e}).ok());
    }
    return created->job.id;
  };
  using core::JobState;
  ids.old_finished = job("old-finished", now - 10 * kDay, {JobState::kCancelled});
  ids.recent_finished = job("recent-finished", now - 3600 * 1000, {JobState::kCancelled});
  ids.old_running = job("old-running", now - 10 * kDay, {JobState::kScheduled, JobState::kRunning});
  for (int64_t age : {100 * kDay, kDay}) {
    core::AuditEntry e{.time_ms = now - age,
                       .actor = "ops",
                       .role = "admin",
                       .remote_addr = "127.0.0.1",
                       .method = "POST",
                       .path = "/api/v1/jobs",
                       .status = 201};
    EXPECT_TRUE(s.audit().Append(e).ok());
  }
  return ids;
}

struct Counts {
  int64_t jobs = 0;
  int64_t audit = 0;
  int64_t events = 0;
};

Counts CountRows(const std::string& path) {
  Counts c;
  auto storage = storage::SqliteStorage::Open(path);
  EXPECT_TRUE(storage.ok()) << storage.status();
  if (!storage.ok()) return c;
  c.jobs = static_cast<int64_t>((*storage)->jobs().List({.limit = 1000})->jobs.size());
  c.audit = static_cast<int64_t>((*storage)->audit().List({.limit = 1000})->entries.size());
  c.events = static_cast<int64_t>((*storage)->events().List({.limit = 1000})->size());
  return c;
}

TEST(DbPruneTest, RefusedWhileServingDryRunChangesNothingThenPrunes) {
  const std::string dir = MakeTempDir("db-prune");
  const std::string db = dir + "/inac.db";
  const Ids ids = WriteDatabase(db);
  ASSERT_GT(ids.old_running, 0);
  const std::string args =
      "db prune --db " + db + " --finished-older-than 7d --audit-older-than 90d";

  // A controller serves the file (its own retention off, so only the CLI prunes here).
  {
    ControllerProcess controller;
    Json config = {{"retention", {{"finished_jobs_days", 0}, {"audit_days", 0}}}};
    ASSERT_TRUE(controller.Start(dir, "serve", db, config).ok());
    for (const char* extra : {"", " --dry-run"}) {
      const CliRun refused = RunInac(args + extra, dir);
      EXPECT_EQ(refused.exit, 1) << refused.out;
      EXPECT_TRUE(Has(refused, "in use by another controller")) << refused.out;
      EXPECT_TRUE(Has(refused, "stop the controller first")) << refused.out;
      EXPECT_TRUE(Has(refused, "retention")) << refused.out;
    }
    // Reading the audit log is fine while serving.
    const CliRun audit = RunInac("db audit --db " + db + " --json", dir);
    EXPECT_EQ(audit.exit, 0) << audit.out;
    EXPECT_TRUE(Has(audit, "\"actor\": \"ops\"")) << audit.out;
    EXPECT_EQ(controller.Terminate(), 0);
  }
  const Counts before = CountRows(db);
  EXPECT_EQ(before.jobs, 3);
  EXPECT_EQ(before.audit, 2);

  const CliRun dry = RunInac(args + " --dry-run", dir);
  ASSERT_EQ(dry.exit, 0) << dry.out;
  EXPECT_TRUE(Has(dry, "would remove 1 finished job(s)")) << dry.out;
  EXPECT_TRUE(Has(dry, "with 1 idempotency key(s) and 2 event(s)")) << dry.out;
  EXPECT_TRUE(Has(dry, "would remove 1 audit entries older than 90d")) << dry.out;
  EXPECT_TRUE(Has(dry, "dry run: nothing was changed")) << dry.out;
  const Counts after_dry = CountRows(db);
  EXPECT_EQ(after_dry.jobs, before.jobs);
  EXPECT_EQ(after_dry.audit, before.audit);
  EXPECT_EQ(after_dry.events, before.events);

  const CliRun pruned = RunInac(args, dir);
  ASSERT_EQ(pruned.exit, 0) << pruned.out;
  EXPECT_TRUE(Has(pruned, "removed 1 finished job(s)")) << pruned.out;
  EXPECT_TRUE(Has(pruned, "removed 1 audit entries")) << pruned.out;
  const Counts after = CountRows(db);
  EXPECT_EQ(after.jobs, 2);
  EXPECT_EQ(after.audit, 1);
  EXPECT_EQ(after.events, before.events - 2);
  {
    auto storage = storage::SqliteStorage::Open(db);
    ASSERT_TRUE(storage.ok());
    EXPECT_FALSE((*storage)->jobs().Get(ids.old_finished).ok());
    EXPECT_TRUE((*storage)->jobs().Get(ids.recent_finished).ok());
    EXPECT_TRUE((*storage)->jobs().Get(ids.old_running).ok());  // old, but not finished
  }
  // Again: nothing left of that age.
  const CliRun again = RunInac(args, dir);
  EXPECT_EQ(again.exit, 0) << again.out;
  EXPECT_TRUE(Has(again, "removed 0 finished job(s)")) << again.out;
}

TEST(DbPruneTest, BadInputIsAClearErrorAndChangesNothing) {
  const std::string dir = MakeTempDir("db-prune-bad");
  const std::string db = dir + "/inac.db";
  WriteDatabase(db);
  for (const char* bad :
       {"7", "d", "7days", "-7d", "0d", "1.5d", "7 d", "7D", "99999999d", "7dd"}) {
    const CliRun run =
        RunInac(absl::StrCat("db prune --db ", db, " --finished-older-than '", bad, "'"), dir);
    EXPECT_EQ(run.exit, 2) << bad << ": " << run.out;
    EXPECT_TRUE(Has(run, "--finished-older-than: ")) << bad << ": " << run.out;
  }
  const CliRun nothing = RunInac("db prune --db " + db, dir);
  EXPECT_EQ(nothing.exit, 2) << nothing.out;
  EXPECT_TRUE(Has(nothing, "nothing to prune")) << nothing.out;
  const CliRun missing = RunInac("db prune --db " + dir + "/none.db --finished-older-than 7d", dir);
  EXPECT_EQ(missing.exit, 2) << missing.out;
  EXPECT_TRUE(Has(missing, "no such file")) << missing.out;
  EXPECT_EQ(CountRows(db).jobs, 3);
}

}  // namespace
}  // namespace inac::systest
