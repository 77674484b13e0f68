// The warm standby of EtcdStorage (storage/etcd/etcd_plans.cc, docs/ha.md "Warm standby"): the
// snapshot served from the mirror with read-your-writes, and the replicated plan -- imported by
// another node with its fingerprint and the same intents, written incrementally (only changed job
// keys), not imported when half written, versions monotonic across nodes. Against a one-member
// etcd started by the test (tests/ha/etcd_cluster.h); skipped when no etcd binary is installed.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "scheduler/planner.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_storage.h"
#include "storage/etcd/leader_election.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/storage/etcd_fixture.h"
#include "tests/storage/test_util.h"

namespace inac::storage::etcd {
namespace {

class EtcdWarmStandbyTest : public OneMemberEtcdTest {
 protected:
  std::unique_ptr<EtcdStorage> Open(std::function<std::optional<int64_t>()> token = nullptr) {
    auto local = SqliteStorage::Open(":memory:");
    EXPECT_TRUE(local.ok());
    EtcdStorageOptions options;
    options.leader_token = std::move(token);
    return std::make_unique<EtcdStorage>(client_.get(), std::move(*local), options);
  }
  // key -> mod revision of every key with `prefix`.
  std::map<std::string, int64_t> ModRevisions(const std::string& prefix) {
    etcdserverpb::RangeRequest r;
    r.set_key(prefix);
    r.set_range_end(PrefixEnd(prefix));
    r.set_keys_only(true);
    auto response = client_->Range(r);
    EXPECT_TRUE(response.ok()) << response.status();
    std::map<std::string, int64_t> out;
    if (response.ok()) {
      for (const auto& kv : response->kvs()) out[kv.key()] = kv.mod_revision();
    }
    return out;
  }
  void Put(const std::string& key, const std::string& value) {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    ASSERT_TRUE(client_->Txn(txn).ok());
  }
  // A plan of the real planner for `jobs` on `topology` (every field the intents depend on).
  static core::Plan Planned(const core::Topology& topology, const std::vector<core::Job>& jobs,
                            const std::string& fingerprint) {
    scheduler::PlanRequest request;
    request.topology = &topology;
    request.jobs = jobs;
    request.now_ms = 1000;
    auto out = scheduler::ComputePlan(request);
    EXPECT_TRUE(out.ok()) << out.status();
    core::Plan plan = out.ok() ? out->plan : core::Plan{};
    plan.fingerprint = fingerprint;
    return plan;
  }
  // A synthetic plan of `n` jobs (ids first..first+n-1) on test_util's SampleTopology.
  static core::Plan Synthetic(core::JobId first, int n, double rate = 42.5) {
    core::Plan plan = testing::SamplePlan(first);
    core::JobPlan job = plan.jobs[0];
    plan.jobs.clear();
    for (int i = 0; i < n; ++i) {
      job.job_id = first + i;
      job.rate_gbps = rate;
      plan.jobs.push_back(job);
    }
    plan.fingerprint = "synthetic";
    return plan;
  }
  // Latest of `s` once it holds version `version` (the mirror follows etcd asynchronously).
  static std::optional<core::PlanRecord> LatestOnce(EtcdStorage& s, int64_t version) {
    for (int i = 0; i < 100; ++i) {
      auto latest = s.plans().Latest();
      EXPECT_TRUE(latest.ok()) << latest.status();
      if (latest.ok() && *latest && (*latest)->plan.version >= version) return *latest;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }
};

TEST_F(EtcdWarmStandbyTest, AnotherNodeImportsTheLeadersPlanWithItsFingerprintAndIntents) {
  std::atomic<int64_t> elected{0};
  LeaderElectionOptions election_options;
  election_options.value = R"({"node_id":"a","url":"http://a"})";
  election_options.ttl_s = 5;
  election_options.on_elected = [&](int64_t token) { elected = token; };
  LeaderElection election(client_.get(), election_options);
  election.Start();
  for (int i = 0; i < 100 && elected == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(elected.load(), 0);
  auto a = Open([&] { return election.LeaderToken(); });
  auto b = Open([] { return std::optional<int64_t>(); });  // a follower

  const core::Topology topology = fixtures::SmallLeafSpine();
  ASSERT_TRUE(a->topology().Put(topology, 1).ok());
  std::vector<core::Job> jobs;
  jobs.push_back(a->jobs().Create(fixtures::PsJobSpec("j1", {"h0_0", "h0_1"}, {"h1_0"}), 2)->job);
  jobs.push_back(a->jobs().Create(fixtures::PsJobSpec("j2", {"h1_0", "h1_1"}, {"h0_0"}), 3)->job);
  jobs.push_back(
      a->jobs().Create(fixtures::PsJobSpec("j3", {"h0_0", "h1_1"}, {"h0_1", "h1_0"}), 4)->job);
  core::Plan plan = Planned(topology, jobs, "fingerprint-of-the-inputs");
  ASSERT_EQ(plan.jobs.size(), 3u);
  auto intents = core::DeriveSwitchIntents(topology, plan);
  auto version = a->plans().Save(plan, intents, 1234);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);

  // The follower cannot save (the fence), and saves nothing locally either.
  EXPECT_EQ(b->plans().Save(plan, intents, 1).status().code(), absl::StatusCode::kUnavailable);

  auto from_a = a->plans().Latest();
  ASSERT_TRUE(from_a.ok() && *from_a);
  std::optional<core::PlanRecord> from_b = LatestOnce(*b, *version);
  ASSERT_TRUE(from_b);
  EXPECT_EQ(from_b->plan.fingerprint, "fingerprint-of-the-inputs");
  EXPECT_EQ(from_b->plan.jobs, (*from_a)->plan.jobs);
  EXPECT_EQ(*from_b, **from_a);  // the whole record: version, every field, created_ms
  auto intents_a = a->plans().Intents(*version);
  auto intents_b = b->plans().Intents(*version);
  ASSERT_TRUE(intents_a.ok() && intents_b.ok());
  EXPECT_EQ(*intents_b, *intents_a);
  EXPECT_FALSE(intents_b->empty());

  // The follower's snapshot holds that plan too, as a new leader's first pass would read it.
  auto snap = b->ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_TRUE(snap->plan);
  EXPECT_EQ(snap->plan->plan, (*from_a)->plan);
  EXPECT_EQ(snap->intents, *intents_a);
  EXPECT_EQ(snap->jobs.size(), 3u);
  election.Stop();
}

TEST_F(EtcdWarmStandbyTest, TheJsonRoundTripKeepsEveryFieldOfAPlannedPlan) {
  const core::Topology topology = fixtures::SmallLeafSpine();
  std::vector<core::Job> jobs;
  for (int i = 0; i < 4; ++i) {
    core::Job job;
    job.id = i + 1;
    job.spec = fixtures::PsJobSpec(absl::StrCat("j", i), {"h0_0", "h1_1", "h0_1"}, {"h1_0"});
    jobs.push_back(job);
  }
  core::Plan plan = Planned(topology, jobs, "fp");
  plan.version = 7;
  auto back = core::PlanFromJson(core::Json::parse(core::PlanToJson(plan).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(core::DeriveSwitchIntents(topology, *back), core::DeriveSwitchIntents(topology, plan));
}

TEST_F(EtcdWarmStandbyTest, AnIncrementalChangeWritesOnlyTheChangedJobKeys) {
  auto a = Open();
  ASSERT_TRUE(a->topology().Put(testing::SampleTopology(), 1).ok());
  core::Plan plan = Synthetic(1, 250);  // three transactions of at most 100 operations
  ASSERT_TRUE(
      a->plans().Save(plan, core::DeriveSwitchIntents(testing::SampleTopology(), plan), 5).ok());
  auto before = ModRevisions("/inac/plan/");
  ASSERT_EQ(before.size(), 251u);  // 250 job keys and meta

  // Job 3 changes, job 4 leaves, job 300 arrives; the other 248 keys are not written.
  plan.jobs[2].rate_gbps = 7;
  plan.jobs.erase(plan.jobs.begin() + 3);
  core::JobPlan added = plan.jobs[0];
  added.job_id = 300;
  plan.jobs.push_back(added);
  auto version =
      a->plans().Save(plan, core::DeriveSwitchIntents(testing::SampleTopology(), plan), 6);
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 2);
  auto after = ModRevisions("/inac/plan/");
  EXPECT_EQ(after.size(), 251u);
  int rewritten = 0;
  for (const auto& [key, mod] : after) {
    auto it = before.find(key);
    if (it == before.end() || it->second != mod) ++rewritten;
  }
  EXPECT_EQ(rewritten, 3);  // job 3, job 300, meta
  EXPECT_EQ(after.count("/inac/plan/jobs/00000000000000000004"), 0u);
  EXPECT_NE(after.at("/inac/plan/jobs/00000000000000000003"),
            before.at("/inac/plan/jobs/00000000000000000003"));
  EXPECT_EQ(after.at("/inac/plan/jobs/00000000000000000005"),
            before.at("/inac/plan/jobs/00000000000000000005"));

  auto b = Open();
  std::optional<core::PlanRecord> imported = LatestOnce(*b, 2);
  ASSERT_TRUE(imported);
  plan.version = 2;
  EXPECT_EQ(imported->plan, plan);
  EXPECT_EQ(imported->created_ms, 6);

  // Monotonic versions across nodes: b's next plan follows the replicated one.
  auto next = b->plans().Save(Synthetic(1, 3), {}, 7);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 3);
  auto c = Open();  // empty local store: still max(0, replicated 3) + 1
  auto after_c = c->plans().Save(Synthetic(1, 3, 1.0), {}, 8);
  ASSERT_TRUE(after_c.ok()) << after_c.status();
  EXPECT_EQ(*after_c, 4);
}

TEST_F(EtcdWarmStandbyTest, AHalfWrittenReplicatedPlanIsNotImported) {
  auto a = Open();
  ASSERT_TRUE(a->topology().Put(testing::SampleTopology(), 1).ok());
  core::Plan plan = Synthetic(1, 5);
  ASSERT_TRUE(a->plans().Save(plan, {}, 5).ok());

  // A leader that crashed after rewriting job 2's key, before meta: meta is stale.
  core::JobPlan changed = plan.jobs[1];
  changed.rate_gbps = 1;
  Put("/inac/plan/jobs/00000000000000000002", core::JobPlanToJson(changed).dump());
  auto b = Open();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the mirror has listed
  auto latest = b->plans().Latest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_FALSE(*latest);
  auto snap = b->ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_FALSE(snap->plan);

  // A meta listing a job whose key was never written (deleted by a crashed write) either.
  auto c = Open();
  ASSERT_TRUE(c->plans().Save(Synthetic(1, 5), {}, 6).ok());  // consistent again (version 2)
  etcdserverpb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(
      "/inac/plan/jobs/00000000000000000005");
  ASSERT_TRUE(client_->Txn(del).ok());
  auto d = Open();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  latest = d->plans().Latest();
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_FALSE(*latest);

  // The next complete write is imported.
  ASSERT_TRUE(c->plans().Save(Synthetic(1, 5, 3.0), {}, 7).ok());
  std::optional<core::PlanRecord> imported = LatestOnce(*d, 3);
  ASSERT_TRUE(imported);
  EXPECT_EQ(imported->plan.jobs.size(), 5u);
  EXPECT_EQ(imported->plan.jobs[4].rate_gbps, 3.0);
}

TEST_F(EtcdWarmStandbyTest, ReadSnapshotSeesThisNodesOwnWrites) {
  auto a = Open();
  ASSERT_TRUE(a->topology().Put(testing::SampleTopology(), 1).ok());
  for (int i = 0; i < 30; ++i) {
    auto created = a->jobs().Create(testing::SampleSpec(absl::StrCat("j", i)), 10 + i);
    ASSERT_TRUE(created.ok()) << created.status();
    auto snap = a->ReadSnapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    ASSERT_EQ(snap->jobs.size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(snap->jobs.back(), created->job);
    if (i % 3 == 0) {
      auto updated = a->jobs().Update(created->job.id, {.state = core::JobState::kScheduled}, 100);
      ASSERT_TRUE(updated.ok()) << updated.status();
      snap = a->ReadSnapshot();
      ASSERT_TRUE(snap.ok());
      EXPECT_EQ(snap->jobs.back(), *updated);
    }
  }
  // A job that ends leaves the snapshot (the decoded-job cache follows it).
  auto first = a->jobs().Update(1, {.state = core::JobState::kCancelled}, 150);
  ASSERT_TRUE(first.ok()) << first.status();
  auto without = a->ReadSnapshot();
  ASSERT_TRUE(without.ok());
  ASSERT_EQ(without->jobs.size(), 29u);
  EXPECT_EQ(without->jobs.front().id, 2);
  // Another node's mirror converges on the same jobs.
  auto b = Open();
  std::vector<core::Job> seen_by_b;
  for (int i = 0; i < 100; ++i) {
    auto snap_b = b->ReadSnapshot();
    ASSERT_TRUE(snap_b.ok()) << snap_b.status();
    seen_by_b = snap_b->jobs;
    if (seen_by_b == without->jobs) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(seen_by_b, without->jobs);
  auto topology = a->topology().Put(testing::SampleTopology(), 200);
  ASSERT_TRUE(topology.ok());
  auto snap = a->ReadSnapshot();
  ASSERT_TRUE(snap.ok() && snap->topology);
  EXPECT_EQ(snap->topology->version, *topology);
  auto seq = a->events().LastSeq();
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(snap->last_event_seq, *seq);
}

// Not a pass/fail figure: the time of ReadSnapshot with 1,000 jobs served from the mirror against
// the direct read of every job (ListJobs walks the same keys and decodes every job).
TEST_F(EtcdWarmStandbyTest, ReadSnapshotWithAThousandJobs) {
  auto a = Open();
  ASSERT_TRUE(a->topology().Put(testing::SampleTopology(), 1).ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(a->jobs().Create(testing::SampleSpec(absl::StrCat("j", i)), i).ok());
  }
  auto time = [](const std::function<void()>& f) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           10;
  };
  ASSERT_TRUE(a->ReadSnapshot().ok());  // fills the decoded-job cache
  double mirror_ms = time([&] { ASSERT_EQ(a->ReadSnapshot()->jobs.size(), 1000u); });
  double direct_ms = time([&] { ASSERT_EQ(a->jobs().List({.limit = 1000})->jobs.size(), 1000u); });
  std::printf("ReadSnapshot, 1000 jobs: %.2f ms from the mirror; %.2f ms reading every job\n",
              mirror_ms, direct_ms);
  EXPECT_LT(mirror_ms, direct_ms);
}

}  // namespace
}  // namespace inac::storage::etcd
