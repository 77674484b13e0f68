// The contract of core/stores.h, run against every implementation: InMemoryStorage, SqliteStorage
// on ":memory:", SqliteStorage on a real temporary file, and EtcdStorage on a one-member etcd
// started by the test (tests/ha/etcd_cluster.h; skipped when no etcd binary is installed). The
// fakes other layers test with are thereby held to the same semantics as production storage.
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/stores.h"
#include "storage/etcd/etcd_storage.h"
#include "storage/sqlite_storage.h"
#include "storage/testing/in_memory_stores.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/storage/test_util.h"

namespace inac::storage {
namespace {

using core::JobState;
using testing::SampleIntent;
using testing::SamplePlan;
using testing::SampleSpec;
using testing::SampleTopology;

struct Impl {
  std::string name;
  std::function<std::unique_ptr<core::Storage>(const std::string& dir)> make;
  // Non-empty: why this implementation cannot run here (the test is skipped with it).
  std::function<std::string()> unavailable = [] { return std::string(); };
};

// EtcdStorage over a one-member etcd of its own (each test is a process of its own under ctest),
// with a SqliteStorage on ":memory:" as the local part (plans, switch records, audit).
class EtcdBacked {
 public:
  static std::unique_ptr<core::Storage> Make() {
    auto* self = new EtcdBacked();  // owned by the storage's deleter below
    if (auto s = self->cluster_.Start(1); !s.ok()) {
      ADD_FAILURE() << s;
      delete self;
      return nullptr;
    }
    auto client = etcd::EtcdClient::Create({self->cluster_.endpoint_list()});
    auto local = SqliteStorage::Open(":memory:");
    if (!client.ok() || !local.ok()) {
      delete self;
      return nullptr;
    }
    self->client_ = std::move(*client);
    struct Holder : core::Storage {
      std::unique_ptr<EtcdBacked> owner;
      std::unique_ptr<etcd::EtcdStorage> storage;
      core::TopologyStore& topology() override { return storage->topology(); }
      core::JobStore& jobs() override { return storage->jobs(); }
      core::PlanStore& plans() override { return storage->plans(); }
      core::SwitchStateStore& switch_states() override { return storage->switch_states(); }
      core::EventLog& events() override { return storage->events(); }
      core::AuditLog& audit() override { return storage->audit(); }
      absl::StatusOr<core::Snapshot> ReadSnapshot() override { return storage->ReadSnapshot(); }
      absl::Status Health() override { return storage->Health(); }
      ~Holder() override { storage.reset(); }
    };
    auto holder = std::make_unique<Holder>();
    holder->owner.reset(self);
    holder->storage = std::make_unique<etcd::EtcdStorage>(self->client_.get(), std::move(*local),
                                                          etcd::EtcdStorageOptions{});
    return holder;
  }

 private:
  inac::testing::EtcdCluster cluster_;
  std::unique_ptr<etcd::EtcdClient> client_;
};

class StoreContractTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    if (std::string why = GetParam().unavailable(); !why.empty()) GTEST_SKIP() << why;
    storage_ = GetParam().make(dir_.path());
    ASSERT_NE(storage_, nullptr);
  }
  core::Event MakeEvent(const std::string& kind, std::optional<core::JobId> job = std::nullopt) {
    core::Event e;
    e.time_ms = 1000;
    e.kind = kind;
    e.job_id = job;
    e.message = kind + " happened";
    e.data_json = R"({"n":1})";
    return e;
  }
  core::Job CreateJob(const std::string& name, const std::string& tenant = "default") {
    auto r = storage_->jobs().Create(SampleSpec(name, tenant), 100);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->job : core::Job{};
  }

  testing::TempDir dir_;
  std::unique_ptr<core::Storage> storage_;
};

// --- jobs ---

TEST_P(StoreContractTest, CreateThenGetRoundTrips) {
  auto created = storage_->jobs().Create(SampleSpec("resnet"), 1234);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->created);
  EXPECT_GT(created->job.id, 0);
  EXPECT_EQ(created->job.state, JobState::kPending);
  EXPECT_EQ(created->job.created_ms, 1234);
  EXPECT_EQ(created->job.updated_ms, 1234);
  auto got = storage_->jobs().Get(created->job.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, created->job);
  EXPECT_EQ(got->spec, SampleSpec("resnet"));
}

TEST_P(StoreContractTest, IdsIncrease) {
  core::JobId a = CreateJob("a").id;
  core::JobId b = CreateJob("b").id;
  EXPECT_LT(a, b);
}

TEST_P(StoreContractTest, GetUnknownIsNotFound) {
  EXPECT_EQ(storage_->jobs().Get(999).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreContractTest, CreateAppendsEventsWithTheNewJobId) {
  auto created =
      storage_->jobs().Create(SampleSpec("x"), 5, std::nullopt, {MakeEvent("job_submitted")});
  ASSERT_TRUE(created.ok());
  auto events = storage_->events().List({});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].job_id, created->job.id);
  EXPECT_EQ((*events)[0].kind, "job_submitted");
  EXPECT_EQ((*events)[0].data_json, R"({"n":1})");
}

TEST_P(StoreContractTest, IdempotentCreateSameBodyReturnsSameJob) {
  core::IdempotencyKey key{"k-1", "hash-a"};
  auto first = storage_->jobs().Create(SampleSpec("a"), 1, key, {MakeEvent("job_submitted")});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->created);
  auto again = storage_->jobs().Create(SampleSpec("a"), 2, key, {MakeEvent("job_submitted")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job, first->job);
  // The replay wrote nothing: one job, one event.
  auto page = storage_->jobs().List({});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(storage_->events().List({})->size(), 1u);
}

TEST_P(StoreContractTest, IdempotentCreateDifferentBodyConflicts) {
  ASSERT_TRUE(storage_->jobs().Create(SampleSpec("a"), 1, core::IdempotencyKey{"k", "h1"}).ok());
  auto conflict = storage_->jobs().Create(SampleSpec("b"), 2, core::IdempotencyKey{"k", "h2"});
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(conflict.status().message().find("conflict"), std::string::npos);
  EXPECT_EQ(storage_->jobs().List({})->jobs.size(), 1u);
  // A different key is a different submission.
  auto other = storage_->jobs().Create(SampleSpec("b"), 2, core::IdempotencyKey{"k2", "h2"});
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->created);
}

TEST_P(StoreContractTest, UpdateChecksTransitions) {
  core::Job job = CreateJob("a");
  auto bad = storage_->jobs().Update(job.id, {.state = JobState::kCompleted}, 10);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->jobs().Get(job.id)->state, JobState::kPending);

  auto ok = storage_->jobs().Update(job.id, {.state = JobState::kScheduled}, 20,
                                    {MakeEvent("job_state")});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->state, JobState::kScheduled);
  EXPECT_EQ(ok->updated_ms, 20);
  EXPECT_EQ(*storage_->jobs().Get(job.id), *ok);
  auto events = storage_->events().List({.job_id = job.id});
  ASSERT_EQ(events->size(), 1u);

  // The same state again is not a transition.
  EXPECT_TRUE(storage_->jobs().Update(job.id, {.state = JobState::kScheduled}, 21).ok());
}

TEST_P(StoreContractTest, FailedUpdateAppendsNoEvent) {
  core::Job job = CreateJob("a");
  auto bad =
      storage_->jobs().Update(job.id, {.state = JobState::kRunning}, 10, {MakeEvent("job_state")});
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(storage_->events().List({})->empty());
}

TEST_P(StoreContractTest, ProgressUpdate) {
  core::Job job = CreateJob("a");
  auto updated = storage_->jobs().Update(job.id, {.iterations_done = 250, .loss = 0.75}, 30);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->iterations_done, 250);
  EXPECT_EQ(updated->loss, 0.75);
  EXPECT_EQ(*storage_->jobs().Get(job.id), *updated);
  EXPECT_EQ(storage_->jobs().Update(job.id, {.iterations_done = -1}, 31).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreContractTest, FailureReasonStored) {
  core::Job job = CreateJob("a");
  auto failed = storage_->jobs().Update(
      job.id, {.state = JobState::kFailed, .failure_reason = "no route"}, 40);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(storage_->jobs().Get(job.id)->failure_reason, "no route");
}

TEST_P(StoreContractTest, UpdateManyIsAllOrNothing) {
  core::Job a = CreateJob("a");
  core::Job b = CreateJob("b");
  // b cannot go to running from pending: nothing is written, not even a's change.
  absl::Status s = storage_->jobs().UpdateMany(
      {{a.id, {.state = JobState::kScheduled}}, {b.id, {.state = JobState::kRunning}}}, 50,
      {MakeEvent("plan_applied")});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->jobs().Get(a.id)->state, JobState::kPending);
  EXPECT_TRUE(storage_->events().List({})->empty());

  ASSERT_TRUE(storage_->jobs()
                  .UpdateMany({{a.id, {.state = JobState::kScheduled}},
                               {a.id, {.state = JobState::kRunning}},
                               {b.id, {.state = JobState::kCancelled}}},
                              60, {MakeEvent("plan_applied")})
                  .ok());
  EXPECT_EQ(storage_->jobs().Get(a.id)->state, JobState::kRunning);
  EXPECT_EQ(storage_->jobs().Get(b.id)->state, JobState::kCancelled);
  EXPECT_EQ(storage_->events().List({})->size(), 1u);
  EXPECT_EQ(storage_->jobs().UpdateMany({{777, {.loss = 1.0}}}, 70).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StoreContractTest, ListFiltersAndPaginates) {
  std::vector<core::JobId> ids;
  for (int i = 0; i < 7; ++i)
    ids.push_back(CreateJob("j" + std::to_string(i), i % 2 ? "t1" : "t2").id);
  ASSERT_TRUE(storage_->jobs().Update(ids[2], {.state = JobState::kCancelled}, 1).ok());

  // Cursor pagination over everything, 3 at a time.
  std::vector<core::JobId> seen;
  core::JobFilter filter{.limit = 3};
  for (int page_no = 0; page_no < 10; ++page_no) {
    auto page = storage_->jobs().List(filter);
    ASSERT_TRUE(page.ok());
    for (const auto& j : page->jobs) seen.push_back(j.id);
    if (!page->next_after_id) break;
    EXPECT_EQ(page->jobs.size(), 3u);
    filter.after_id = *page->next_after_id;
  }
  EXPECT_EQ(seen, ids);

  auto t1 = storage_->jobs().List({.tenant = "t1"});
  ASSERT_TRUE(t1.ok());
  EXPECT_EQ(t1->jobs.size(), 3u);
  for (const auto& j : t1->jobs) EXPECT_EQ(j.spec.tenant, "t1");
  EXPECT_FALSE(t1->next_after_id);

  auto pending_t2 =
      storage_->jobs().List({.states = {JobState::kPending}, .tenant = "t2", .limit = 10});
  ASSERT_TRUE(pending_t2.ok());
  EXPECT_EQ(pending_t2->jobs.size(), 3u);  // 0, 4, 6 (2 was cancelled)

  auto cancelled = storage_->jobs().List({.states = {JobState::kCancelled, JobState::kFailed}});
  ASSERT_EQ(cancelled->jobs.size(), 1u);
  EXPECT_EQ(cancelled->jobs[0].id, ids[2]);

  // Exactly `limit` matches: no next page.
  auto exact = storage_->jobs().List({.tenant = "t1", .limit = 3});
  EXPECT_EQ(exact->jobs.size(), 3u);
  EXPECT_FALSE(exact->next_after_id);

  EXPECT_EQ(storage_->jobs().List({.limit = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreContractTest, CountByState) {
  core::Job a = CreateJob("a");
  CreateJob("b");
  ASSERT_TRUE(storage_->jobs().Update(a.id, {.state = JobState::kCancelled}, 1).ok());
  auto counts = storage_->jobs().CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts,
            (std::map<JobState, int64_t>{{JobState::kPending, 1}, {JobState::kCancelled, 1}}));
}

// --- topology ---

TEST_P(StoreContractTest, TopologyVersions) {
  auto none = storage_->topology().Get();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto v1 = storage_->topology().Put(SampleTopology(), 10, std::nullopt, {MakeEvent("topology")});
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v1, 1);
  auto got = storage_->topology().Get();
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->topology, SampleTopology());
  EXPECT_EQ((*got)->version, 1);
  EXPECT_EQ((*got)->updated_ms, 10);

  core::Topology changed = SampleTopology();
  changed.links[0].status = core::LinkStatus::kDown;
  EXPECT_EQ(storage_->topology().Put(changed, 11, /*expected_version=*/0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*storage_->topology().Get())->topology, SampleTopology());
  auto v2 = storage_->topology().Put(changed, 12, /*expected_version=*/1);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(*v2, 2);
  EXPECT_EQ((*storage_->topology().Get())->topology, changed);
  EXPECT_EQ(storage_->events().List({.kind = "topology"})->size(), 1u);
}

// --- plans ---

TEST_P(StoreContractTest, PlanSaveAssignsVersionsAndStoresIntents) {
  EXPECT_FALSE(storage_->plans().Latest()->has_value());
  core::Job job = CreateJob("a");
  core::SwitchIntent s2 = SampleIntent("s2", job.id);
  core::SwitchIntent s1 = SampleIntent("s1", job.id);
  auto v1 = storage_->plans().Save(SamplePlan(job.id), {s2, s1}, 100, {MakeEvent("plan_saved")});
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(*v1, 1);
  auto latest = storage_->plans().Latest();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  core::Plan expected = SamplePlan(job.id);
  expected.version = 1;
  EXPECT_EQ((*latest)->plan, expected);
  EXPECT_EQ((*latest)->created_ms, 100);

  auto intents = storage_->plans().Intents(1);
  ASSERT_TRUE(intents.ok());
  ASSERT_EQ(intents->size(), 2u);
  s1.version = 1;
  s2.version = 1;
  EXPECT_EQ((*intents)[0], s1);  // by switch id
  EXPECT_EQ((*intents)[1], s2);

  auto v2 = storage_->plans().Save(SamplePlan(job.id), {SampleIntent("s1", job.id)}, 200);
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(*v2, 2);
  EXPECT_EQ(storage_->plans().Latest()->value().plan.version, 2);
  EXPECT_EQ(storage_->plans().Get(1)->plan, expected);
  EXPECT_EQ(storage_->plans().Intents(2)->size(), 1u);

  core::Plan explicit_version = SamplePlan(job.id);
  explicit_version.version = 10;
  EXPECT_EQ(*storage_->plans().Save(explicit_version, {}, 300), 10);
  explicit_version.version = 10;
  EXPECT_EQ(storage_->plans().Save(explicit_version, {}, 301).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(storage_->plans().Get(5).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->plans().Intents(5).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(StoreContractTest, PlanWithBadIntentsWritesNothing) {
  auto s = storage_->plans().Save(SamplePlan(1), {SampleIntent("s1", 1), SampleIntent("s1", 1)}, 1,
                                  {MakeEvent("plan_saved")});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(storage_->plans().Latest()->has_value());
  EXPECT_TRUE(storage_->events().List({})->empty());
}

TEST_P(StoreContractTest, PrunePlans) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(storage_->plans().Save(SamplePlan(1), {SampleIntent("s1", 1)}, i).ok());
  auto deleted = storage_->plans().Prune(2);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 3);
  EXPECT_EQ(storage_->plans().Get(3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(storage_->plans().Intents(3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(storage_->plans().Get(4).ok());
  EXPECT_EQ(storage_->plans().Intents(5)->size(), 1u);
  EXPECT_EQ(storage_->plans().Prune(0).status().code(), absl::StatusCode::kInvalidArgument);
  // Versions keep increasing after pruning.
  EXPECT_EQ(*storage_->plans().Save(SamplePlan(1), {}, 9), 6);
}

// --- switch states ---

TEST_P(StoreContractTest, SwitchStates) {
  EXPECT_FALSE(storage_->switch_states().Get("s1")->has_value());
  EXPECT_EQ(*storage_->switch_states().MaxElectionId(), 0u);
  core::SwitchState s1{"s1", 3, "", 1000, 7};
  core::SwitchState s0{"s0", 2, "UNAVAILABLE: connection refused", 900,
                       0xFFFF'FFFF'FFFF'FFF0ull};  // above INT64_MAX: stored bit for bit
  ASSERT_TRUE(storage_->switch_states().Put(s1).ok());
  ASSERT_TRUE(storage_->switch_states().Put(s0, {MakeEvent("switch_error")}).ok());
  EXPECT_EQ(storage_->switch_states().Get("s1")->value(), s1);
  EXPECT_EQ(*storage_->switch_states().List(), (std::vector<core::SwitchState>{s0, s1}));
  EXPECT_EQ(*storage_->switch_states().MaxElectionId(), 0xFFFF'FFFF'FFFF'FFF0ull);
  s1.applied_version = 4;
  ASSERT_TRUE(storage_->switch_states().Put(s1).ok());
  EXPECT_EQ(storage_->switch_states().Get("s1")->value().applied_version, 4);
  EXPECT_EQ(storage_->switch_states().Put(core::SwitchState{}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(storage_->events().List({.kind = "switch_error"})->size(), 1u);
}

// --- events ---

TEST_P(StoreContractTest, EventLogFiltersAndSequence) {
  EXPECT_EQ(*storage_->events().LastSeq(), 0);
  std::vector<int64_t> seqs;
  for (int i = 0; i < 10; ++i) {
    auto seq = storage_->events().Append(MakeEvent(
        i % 2 ? "odd" : "even", i % 3 == 0 ? std::optional<core::JobId>(7) : std::nullopt));
    ASSERT_TRUE(seq.ok()) << seq.status();
    seqs.push_back(*seq);
  }
  for (size_t i = 1; i < seqs.size(); ++i) EXPECT_GT(seqs[i], seqs[i - 1]);
  EXPECT_EQ(*storage_->events().LastSeq(), seqs.back());

  auto all = storage_->events().List({});
  ASSERT_EQ(all->size(), 10u);
  EXPECT_EQ((*all)[3].seq, seqs[3]);
  EXPECT_EQ((*all)[3].time_ms, 1000);
  EXPECT_EQ((*all)[3].message, "odd happened");

  EXPECT_EQ(storage_->events().List({.after_seq = seqs[6]})->size(), 3u);
  EXPECT_EQ(storage_->events().List({.job_id = 7})->size(), 4u);  // i = 0, 3, 6, 9
  EXPECT_EQ(storage_->events().List({.kind = "odd"})->size(), 5u);
  auto limited = storage_->events().List({.kind = "even", .limit = 2});
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[0].seq, seqs[0]);
  EXPECT_EQ((*limited)[1].seq, seqs[2]);
  auto combined = storage_->events().List({.after_seq = seqs[0], .job_id = 7, .kind = "odd"});
  ASSERT_EQ(combined->size(), 2u);  // i = 3, 9
  EXPECT_EQ((*combined)[0].seq, seqs[3]);

  EXPECT_EQ(storage_->events().List({.limit = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  core::Event bad = MakeEvent("");
  EXPECT_EQ(storage_->events().Append(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = MakeEvent("x");
  bad.data_json = "{not json";
  EXPECT_EQ(storage_->events().Append(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreContractTest, EventRetentionKeepsNewestAndNeverReusesSeq) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(storage_->events().Append(MakeEvent("e")).ok());
  auto deleted = storage_->events().Trim(4);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, 6);
  auto left = storage_->events().List({});
  ASSERT_EQ(left->size(), 4u);
  EXPECT_EQ(left->front().seq, 7);
  EXPECT_EQ(left->back().seq, 10);
  EXPECT_EQ(*storage_->events().Trim(100), 0);
  EXPECT_EQ(*storage_->events().Trim(0), 4);
  EXPECT_EQ(*storage_->events().LastSeq(), 10);
  EXPECT_EQ(*storage_->events().Append(MakeEvent("e")), 11);
  EXPECT_EQ(storage_->events().Trim(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

// --- snapshot ---

TEST_P(StoreContractTest, SnapshotHoldsActiveJobsLatestPlanAndIntents) {
  auto empty = storage_->ReadSnapshot();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_FALSE(empty->topology);
  EXPECT_TRUE(empty->jobs.empty());
  EXPECT_FALSE(empty->plan);

  ASSERT_TRUE(storage_->topology().Put(SampleTopology(), 1).ok());
  core::Job a = CreateJob("a");
  core::Job b = CreateJob("b");
  core::Job c = CreateJob("c");
  ASSERT_TRUE(storage_->jobs().Update(b.id, {.state = JobState::kCancelled}, 2).ok());
  ASSERT_TRUE(storage_->plans().Save(SamplePlan(a.id), {SampleIntent("s1", a.id)}, 3).ok());
  ASSERT_TRUE(storage_->plans()
                  .Save(SamplePlan(c.id), {SampleIntent("s1", c.id), SampleIntent("s0", c.id)}, 4)
                  .ok());
  ASSERT_TRUE(storage_->switch_states().Put({"s1", 1, "", 5, 2}).ok());
  ASSERT_TRUE(storage_->events().Append(MakeEvent("x")).ok());

  auto snap = storage_->ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_TRUE(snap->topology);
  EXPECT_EQ(snap->topology->topology, SampleTopology());
  ASSERT_EQ(snap->jobs.size(), 2u);
  EXPECT_EQ(snap->jobs[0].id, a.id);
  EXPECT_EQ(snap->jobs[1].id, c.id);
  ASSERT_TRUE(snap->plan);
  EXPECT_EQ(snap->plan->plan.version, 2);
  ASSERT_EQ(snap->intents.size(), 2u);
  EXPECT_EQ(snap->intents[0].switch_id, "s0");
  EXPECT_EQ(snap->intents[0].version, 2);
  EXPECT_EQ(snap->switch_states.size(), 1u);
  EXPECT_EQ(snap->last_event_seq, 1);
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreContractTest,
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
                           }},
                      Impl{"Etcd", [](const std::string&) { return EtcdBacked::Make(); },
                           [] {
                             return inac::testing::FindEtcdBinary().empty()
                                        ? std::string(
                                              "no etcd binary (apt-get install "
                                              "etcd-server): EtcdStorage not tested")
                                        : std::string();
                           }}),
    [](const ::testing::TestParamInfo<Impl>& info) { return info.param.name; });

}  // namespace
}  // namespace inac::storage

namespace inac::storage {
namespace {

TEST(InMemoryStorageTest, InjectedWriteFailuresChangeNothing) {
  InMemoryStorage storage;
  storage.FailNextWrites(absl::UnavailableError("injected"), 2);
  EXPECT_EQ(storage.jobs().Create(testing::SampleSpec("a"), 1).status().code(),
            absl::StatusCode::kUnavailable);
  core::Event event;
  event.kind = "x";
  EXPECT_EQ(storage.events().Append(event).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(storage.jobs().List({})->jobs.empty());  // reads are not affected
  EXPECT_EQ(*storage.events().LastSeq(), 0);
  auto job = storage.jobs().Create(testing::SampleSpec("a"), 1);  // the third write succeeds
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->job.id, 1);
}

}  // namespace
}  // namespace inac::storage
