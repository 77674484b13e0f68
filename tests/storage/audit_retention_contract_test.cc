// The store contract of core/stores.h for the audit log and the retention of finished jobs
// (docs/storage.md "Retention"), run like store_contract_test.cc against InMemoryStorage,
// SqliteStorage on ":memory:" and SqliteStorage on a temporary file; plus storage/retention.h's
// batched prune, which both the controller and `inac db prune` run.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/stores.h"
#include "storage/retention.h"
#include "storage/sqlite_storage.h"
#include "storage/testing/in_memory_stores.h"
#include "tests/storage/test_util.h"

namespace inac::storage {
namespace {

using core::JobState;
using testing::SampleSpec;

struct Impl {
  std::string name;
  std::function<std::unique_ptr<core::Storage>(const std::string& dir)> make;
};

class AuditRetentionContractTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    storage_ = GetParam().make(dir_.path());
    ASSERT_NE(storage_, nullptr);
  }

  static core::AuditEntry Entry(int64_t time_ms, const std::string& actor, int status = 201,
                                std::optional<core::JobId> job = std::nullopt) {
    core::AuditEntry e;
    e.time_ms = time_ms;
    e.actor = actor;
    e.role = "operator";
    e.remote_addr = "127.0.0.1";
    e.method = "POST";
    e.path = "/api/v1/jobs";
    e.status = status;
    e.job_id = job;
    return e;
  }

  core::Event JobEvent(core::JobId job) {
    core::Event e;
    e.time_ms = 1;
    e.kind = "job_state";
    e.job_id = job;
    e.message = "m";
    return e;
  }

  // A job created at `created_ms` and moved to `state` at `updated_ms` (through the legal path),
  // with an idempotency key "key-<name>" and one event per step.
  core::Job MakeJob(const std::string& name, JobState state, int64_t updated_ms) {
    auto created = storage_->jobs().Create(
        SampleSpec(name), 1, core::IdempotencyKey{"key-" + name, "hash-" + name}, {JobEvent(0)});
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return {};
    const core::JobId id = created->job.id;
    std::vector<JobState> path;
    switch (state) {
      case JobState::kPending:
        break;
      case JobState::kScheduled:
        path = {JobState::kScheduled};
        break;
      case JobState::kRunning:
        path = {JobState::kScheduled, JobState::kRunning};
        break;
      case JobState::kCompleted:
        path = {JobState::kScheduled, JobState::kRunning, JobState::kCompleted};
        break;
      case JobState::kCancelled:
      case JobState::kFailed:
        path = {state};
        break;
    }
    core::Job job = created->job;
    for (JobState next : path) {
      auto updated = storage_->jobs().Update(id, {.state = next}, updated_ms, {JobEvent(id)});
      EXPECT_TRUE(updated.ok()) << updated.status();
      if (updated.ok()) job = *updated;
    }
    if (path.empty()) {
      // A pending job's updated_ms is set by a progress-free update.
      auto touched = storage_->jobs().Update(id, {.failure_reason = ""}, updated_ms);
      EXPECT_TRUE(touched.ok()) << touched.status();
      if (touched.ok()) job = *touched;
    }
    return job;
  }

  bool Exists(core::JobId id) { return storage_->jobs().Get(id).ok(); }
  size_t EventsOf(core::JobId id) { return storage_->events().List({.job_id = id})->size(); }

  testing::TempDir dir_;
  std::unique_ptr<core::Storage> storage_;
};

// --- audit log ---

TEST_P(AuditRetentionContractTest, AuditAppendRoundTripsAndSequences) {
  auto first = storage_->audit().Append(Entry(10, "ops", 201, 7));
  ASSERT_TRUE(first.ok()) << first.status();
  core::AuditEntry denied = Entry(11, "ci", 403);
  denied.method = "DELETE";
  denied.path = "/api/v1/jobs/9";
  denied.role = "viewer";
  denied.remote_addr = "::1";
  auto second = storage_->audit().Append(denied);
  ASSERT_TRUE(second.ok());
  EXPECT_GT(*second, *first);

  auto page = storage_->audit().List({});
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_FALSE(page->next_after_seq);
  core::AuditEntry expected = Entry(10, "ops", 201, 7);
  expected.seq = *first;
  EXPECT_EQ(page->entries[0], expected);
  denied.seq = *second;
  EXPECT_EQ(page->entries[1], denied);
  EXPECT_FALSE(page->entries[1].job_id);
}

TEST_P(AuditRetentionContractTest, AuditRejectsIncompleteEntries) {
  core::AuditEntry e = Entry(1, "");
  EXPECT_EQ(storage_->audit().Append(e).status().code(), absl::StatusCode::kInvalidArgument);
  e = Entry(1, "ops");
  e.path = "";
  EXPECT_EQ(storage_->audit().Append(e).status().code(), absl::StatusCode::kInvalidArgument);
  e = Entry(1, "ops", 99);
  EXPECT_EQ(storage_->audit().Append(e).status().code(), absl::StatusCode::kInvalidArgument);
  e = Entry(1, "ops", 600);
  EXPECT_EQ(storage_->audit().Append(e).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(storage_->audit().List({})->entries.empty());
  EXPECT_EQ(storage_->audit().List({.limit = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(storage_->audit().List({.after_seq = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(AuditRetentionContractTest, AuditPagesByCursorAndFiltersByActor) {
  std::vector<int64_t> all, ops;
  for (int i = 0; i < 7; ++i) {
    const std::string actor = i % 3 == 0 ? "ops" : "ci";
    auto seq = storage_->audit().Append(Entry(100 + i, actor));
    ASSERT_TRUE(seq.ok());
    all.push_back(*seq);
    if (actor == "ops") ops.push_back(*seq);
  }
  std::vector<int64_t> seen;
  core::AuditFilter filter{.limit = 3};
  for (int page_no = 0; page_no < 10; ++page_no) {
    auto page = storage_->audit().List(filter);
    ASSERT_TRUE(page.ok());
    for (const auto& e : page->entries) seen.push_back(e.seq);
    if (!page->next_after_seq) break;
    EXPECT_EQ(page->entries.size(), 3u);
    filter.after_seq = *page->next_after_seq;
  }
  EXPECT_EQ(seen, all);

  auto by_ops = storage_->audit().List({.actor = "ops"});
  ASSERT_TRUE(by_ops.ok());
  std::vector<int64_t> got;
  for (const auto& e : by_ops->entries) got.push_back(e.seq);
  EXPECT_EQ(got, ops);  // entries 0, 3, 6
  // Exactly `limit` matches: no next page; one more than the page: a cursor to it.
  EXPECT_FALSE(storage_->audit().List({.actor = "ops", .limit = 3})->next_after_seq);
  auto two = storage_->audit().List({.actor = "ops", .limit = 2});
  ASSERT_TRUE(two->next_after_seq);
  EXPECT_EQ(*two->next_after_seq, ops[1]);
  EXPECT_TRUE(storage_->audit().List({.actor = "nobody"})->entries.empty());
}

TEST_P(AuditRetentionContractTest, AuditPruneRemovesOldestInBatchesAndNeverReusesSeq) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(storage_->audit().Append(Entry(i * 10, "a")).ok());
  // time_ms 0..90; older than 55: 0, 10, 20, 30, 40, 50 -- in batches of 4.
  auto first = storage_->audit().Prune(55, 4);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 4);
  auto left = storage_->audit().List({});
  ASSERT_EQ(left->entries.size(), 6u);
  EXPECT_EQ(left->entries.front().time_ms, 40);  // the oldest went first
  EXPECT_EQ(*storage_->audit().Prune(55, 4), 2);
  EXPECT_EQ(*storage_->audit().Prune(55, 4), 0);
  left = storage_->audit().List({});
  ASSERT_EQ(left->entries.size(), 4u);
  EXPECT_EQ(left->entries.front().time_ms, 60);
  EXPECT_EQ(storage_->audit().Prune(55, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // Pruned sequence numbers are never handed out again.
  auto next = storage_->audit().Append(Entry(1000, "a"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 11);
}

// --- retention of finished jobs ---

TEST_P(AuditRetentionContractTest, PruneFinishedKeepsActiveAndRecentJobs) {
  // Old (updated at 100) in every state, and recent (updated at 10000) finished ones.
  core::Job pending = MakeJob("pending", JobState::kPending, 100);
  core::Job scheduled = MakeJob("scheduled", JobState::kScheduled, 100);
  core::Job running = MakeJob("running", JobState::kRunning, 100);
  core::Job completed = MakeJob("completed", JobState::kCompleted, 100);
  core::Job cancelled = MakeJob("cancelled", JobState::kCancelled, 100);
  core::Job failed = MakeJob("failed", JobState::kFailed, 100);
  core::Job recent = MakeJob("recent", JobState::kCompleted, 10000);
  ASSERT_EQ(storage_->jobs().List({})->jobs.size(), 7u);

  auto pruned = storage_->jobs().PruneFinished(5000, 1000);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 3);
  EXPECT_FALSE(Exists(completed.id));
  EXPECT_FALSE(Exists(cancelled.id));
  EXPECT_FALSE(Exists(failed.id));
  // Never a non-terminal job, however old; never a recent finished one.
  for (const core::Job& kept : {pending, scheduled, running, recent}) {
    auto job = storage_->jobs().Get(kept.id);
    ASSERT_TRUE(job.ok()) << kept.spec.name;
    EXPECT_EQ(*job, kept);
  }
  EXPECT_EQ(*storage_->jobs().PruneFinished(5000, 1000), 0);
  // The boundary is strict: updated_ms == cutoff is kept.
  EXPECT_EQ(*storage_->jobs().PruneFinished(10000, 1000), 0);
  EXPECT_EQ(*storage_->jobs().PruneFinished(10001, 1000), 1);
  EXPECT_EQ(storage_->jobs().PruneFinished(1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(AuditRetentionContractTest, PruneFinishedRemovesKeysAndEventsOfThoseJobsOnly) {
  core::Job old = MakeJob("old", JobState::kCancelled, 100);
  core::Job active = MakeJob("active", JobState::kRunning, 100);
  ASSERT_GT(EventsOf(old.id), 0u);
  core::Event global;
  global.time_ms = 1;
  global.kind = "plan_saved";
  ASSERT_TRUE(storage_->events().Append(global).ok());
  const size_t events_before = storage_->events().List({})->size();
  const size_t old_events = EventsOf(old.id);

  ASSERT_EQ(*storage_->jobs().PruneFinished(5000, 10), 1);
  EXPECT_EQ(EventsOf(old.id), 0u);
  EXPECT_GT(EventsOf(active.id), 0u);
  EXPECT_EQ(storage_->events().List({})->size(), events_before - old_events);
  EXPECT_EQ(storage_->events().List({.kind = "plan_saved"})->size(), 1u);

  // The key went with its job: replaying it creates a new job (the key is free again)...
  auto replay = storage_->jobs().Create(SampleSpec("old"), 20000,
                                        core::IdempotencyKey{"key-old", "hash-old"});
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->created);
  EXPECT_GT(replay->job.id, active.id);  // ids are never reused
  // ... while the key of the kept job still answers with that job.
  auto kept = storage_->jobs().Create(SampleSpec("active"), 20000,
                                      core::IdempotencyKey{"key-active", "hash-active"});
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(kept->created);
  EXPECT_EQ(kept->job.id, active.id);
}

TEST_P(AuditRetentionContractTest, PruneFinishedTakesTheOldestFirstInBoundedBatches) {
  std::vector<core::Job> jobs;
  // Finished at 500, 400, 300, 200, 100: the last created is the oldest.
  for (int i = 0; i < 5; ++i) {
    jobs.push_back(MakeJob("j" + std::to_string(i), JobState::kFailed, 500 - 100 * i));
  }
  ASSERT_EQ(*storage_->jobs().PruneFinished(1000, 2), 2);
  EXPECT_FALSE(Exists(jobs[4].id));
  EXPECT_FALSE(Exists(jobs[3].id));
  EXPECT_TRUE(Exists(jobs[2].id));
  EXPECT_EQ(*storage_->jobs().PruneFinished(1000, 2), 2);
  EXPECT_EQ(*storage_->jobs().PruneFinished(1000, 2), 1);
  EXPECT_EQ(*storage_->jobs().PruneFinished(1000, 2), 0);
  EXPECT_TRUE(storage_->jobs().List({})->jobs.empty());
}

TEST_P(AuditRetentionContractTest, PruneExpiredDrainsBatchByBatch) {
  for (int i = 0; i < 7; ++i) MakeJob("f" + std::to_string(i), JobState::kCompleted, 100);
  core::Job running = MakeJob("r", JobState::kRunning, 100);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(storage_->audit().Append(Entry(100, "a")).ok());
  ASSERT_TRUE(storage_->audit().Append(Entry(9000, "a")).ok());

  RetentionResult result;
  absl::Status s = PruneExpired(
      *storage_, {.finished_jobs_before_ms = 5000, .audit_before_ms = 5000, .batch_rows = 3},
      &result);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(result.jobs, 7);
  EXPECT_EQ(result.audit, 5);
  EXPECT_EQ(result.batches, 3 + 2);  // jobs 3+3+1, audit 3+2
  EXPECT_EQ(storage_->jobs().List({})->jobs.size(), 1u);
  EXPECT_TRUE(Exists(running.id));
  EXPECT_EQ(storage_->audit().List({})->entries.size(), 1u);

  // Nothing named, nothing done; a stop request ends the run before the next batch.
  RetentionResult none;
  ASSERT_TRUE(PruneExpired(*storage_, {}, &none).ok());
  EXPECT_EQ(none.batches, 0);
  for (int i = 0; i < 4; ++i) MakeJob("g" + std::to_string(i), JobState::kCancelled, 100);
  RetentionResult stopped;
  int asked = 0;
  ASSERT_TRUE(
      PruneExpired(*storage_, {.finished_jobs_before_ms = 5000, .batch_rows = 1}, &stopped, [&] {
        return ++asked > 2;
      }).ok());
  EXPECT_EQ(stopped.jobs, 2);
  EXPECT_EQ(PruneExpired(*storage_, {.batch_rows = 0}, &none).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, AuditRetentionContractTest,
    ::testing::Values(Impl{"InMemory",
                           [](const std::string&) -> std::unique_ptr<core::Storage> {
                             return std::make_unique<InMemoryStorage>();
                           }},
                      Impl{"SqliteMemory",
                           [](const std::string&) -> std::unique_ptr<core::Storage> {
                             auto s = SqliteStorage::Open(":memory:");
                             EXPECT_TRUE(s.ok()) << s.status();
                             return s.ok() ? std::move(*s) : nullptr;
                           }},
                      Impl{"SqliteFile",
                           [](const std::string& dir) -> std::unique_ptr<core::Storage> {
                             auto s = SqliteStorage::Open(dir + "/inac.db");
                             EXPECT_TRUE(s.ok()) << s.status();
                             return s.ok() ? std::move(*s) : nullptr;
                           }}),
    [](const ::testing::TestParamInfo<Impl>& info) { return info.param.name; });

TEST(InMemoryAuditTest, InjectedWriteFailuresChangeNothing) {
  InMemoryStorage storage;
  core::AuditEntry e;
  e.actor = "a";
  e.role = "admin";
  e.method = "POST";
  e.path = "/x";
  e.status = 200;
  storage.FailNextWrites(absl::UnavailableError("injected"), 2);
  EXPECT_EQ(storage.audit().Append(e).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(storage.jobs().PruneFinished(1, 1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(storage.audit().List({})->entries.empty());
  EXPECT_EQ(*storage.audit().Append(e), 1);
}

}  // namespace
}  // namespace inac::storage
