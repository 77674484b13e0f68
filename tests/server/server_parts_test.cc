// The parts of server/ that have no HTTP in them: the worker pool the switch fleet visits on, the
// metrics registry and its exposition, and the job configuration builder's edge cases.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "northbound/rest_json.h"
#include "server/job_config.h"
#include "server/metrics.h"
#include "server/worker_pool.h"

namespace inac::server {
namespace {

TEST(WorkerPoolTest, EveryTaskRunsExactlyOncePerBatch) {
  WorkerPool pool(4);
  for (size_t n : {0u, 1u, 3u, 64u, 1000u}) {
    std::vector<std::atomic<int>> runs(n);
    pool.RunAll(n, [&](size_t i) { runs[i]++; });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << "batch " << n << " task " << i;
  }
}

TEST(WorkerPoolTest, TasksRunConcurrentlyOnPersistentThreads) {
  WorkerPool pool(3);
  std::set<std::thread::id> first, second;
  absl::Mutex mu;
  // Four tasks that each wait until all four have started: they can only finish if they run at
  // once (three pool threads plus the caller).
  std::atomic<int> started{0};
  auto batch = [&](std::set<std::thread::id>* ids) {
    started = 0;
    pool.RunAll(4, [&](size_t) {
      {
        absl::MutexLock lock(&mu);
        ids->insert(std::this_thread::get_id());
      }
      started++;
      while (started.load() < 4) std::this_thread::yield();
    });
  };
  batch(&first);
  batch(&second);
  EXPECT_EQ(first.size(), 4u);
  EXPECT_EQ(first, second);  // the same threads: the pool does not spawn per batch
}

TEST(MetricsTest, CountersFollowObservations) {
  Metrics m;
  m.ObservePlan(0.5);
  m.ObservePlan(0.25);
  m.CountPriorityRefresh();
  m.ObserveReconcile(0.002);
  m.CountSouthbound(7, 1);
  m.CountSouthbound(0, 0);
  m.ObservePass(0.01, 1700000000123);
  ControllerMetrics c = m.Counters();
  EXPECT_EQ(c.plans_computed, 2);
  EXPECT_DOUBLE_EQ(c.plan_ms_sum, 750);
  EXPECT_DOUBLE_EQ(c.last_plan_ms, 250);
  EXPECT_EQ(c.priority_refreshes, 1);
  EXPECT_EQ(c.reconcile_runs, 1);
  EXPECT_EQ(c.southbound_writes, 7);
  EXPECT_EQ(c.southbound_errors, 1);
  EXPECT_EQ(c.loop_passes, 1);
  EXPECT_EQ(c.last_pass_ms, 1700000000123);
}

TEST(MetricsTest, RendersHistogramsAndTheStateOfTheSnapshot) {
  Metrics m;
  m.ObservePlan(0.003);
  m.ObserveHttp("GET", "/jobs/{id}", 200, 0.0007);
  m.ObserveHttp("GET", "/jobs/{id}", 200, 0.2);
  m.ObserveHttp("POST", "/jobs", 400, 0.001);
  ControllerMetrics state;
  state.jobs_by_state[core::JobState::kRunning] = 2;
  SwitchStatus sw;
  sw.id = "lf0";
  sw.managed = true;
  sw.connected = true;
  sw.aggregators_used = 25;
  sw.aggregators_total = 100;
  state.switches.push_back(sw);
  const std::string text = m.Render(state);
  // Latency histograms: buckets, sum and count, labelled by method, route and status.
  EXPECT_TRUE(absl::StrContains(text, "# TYPE inac_http_request_duration_seconds histogram"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      "inac_http_request_duration_seconds_count{code=\"200\",method=\"GET\",route=\"/jobs/"
      "{id}\"} 2"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text,
      "inac_http_request_duration_seconds_bucket{code=\"200\",method=\"GET\",route=\"/jobs/"
      "{id}\",le=\"0.001\"} 1"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "inac_plan_duration_seconds_count 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "inac_plan_duration_seconds_bucket{le=\"0.005\"} 1")) << text;
  // The state: every job state (zeros too), the switch's gauges.
  EXPECT_TRUE(absl::StrContains(text, "inac_jobs{state=\"running\"} 2")) << text;
  EXPECT_TRUE(absl::StrContains(text, "inac_jobs{state=\"failed\"} 0")) << text;
  EXPECT_TRUE(absl::StrContains(text, "inac_switch_connected{switch=\"lf0\"} 1")) << text;
  EXPECT_TRUE(absl::StrContains(text, "inac_switch_aggregator_utilisation{switch=\"lf0\"} 0.25"))
      << text;
  // A switch that left is not reported: the state is the snapshot's only.
  EXPECT_FALSE(absl::StrContains(m.Render(ControllerMetrics{}), "switch=\"lf0\""));
}

TEST(JobConfigBuilderTest, AJobOutsideThePlanGetsItsOwnFieldsAndNoTags) {
  core::Job job;
  job.id = 7;
  job.spec.batch_size = 64;
  job.spec.priority = 3;
  JobConfig c = BuildJobConfig(job, nullptr, {}, nullptr);
  EXPECT_EQ(c.job.id, 7);
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.priority, 3);
  EXPECT_EQ(c.dataplane_priority, 0);  // not planned: no data-plane priority yet
  EXPECT_EQ(c.plan_version, 0);
  EXPECT_TRUE(c.tags.empty());
  EXPECT_TRUE(c.shards.empty());
  core::Plan other;
  other.version = 4;  // a plan without this job
  c = BuildJobConfig(job, &other, {}, nullptr);
  EXPECT_EQ(c.plan_version, 0);
  EXPECT_TRUE(c.tags.empty());
}

// A Rina plan (docs/formats.md "Ring jobs"): the INA rack of l0 (agent h1, rack worker h2) and the
// plain members h3, h4. GET /jobs/{id}/config names each worker's role, ring neighbours with
// addresses and the rack's tag (job 9 * 64 + rack 0, generation 1 in bits 30-31).
TEST(JobConfigBuilderTest, RingJobGetsRolesNeighboursAndTheRackTag) {
  core::Topology t;
  for (const char* id : {"l0", "l1"}) t.switches.push_back(core::Switch{id, {}, {}});
  for (const char* id : {"h1", "h2", "h3", "h4"}) t.hosts.push_back(core::Host{id, {}, {}});
  core::Job job;
  job.id = 9;
  job.spec.workers = {"h1", "h2", "h3", "h4"};
  job.spec.allreduce = core::AllReduce::kRing;
  core::Plan plan;
  plan.version = 3;
  core::JobPlan jp;
  jp.job_id = 9;
  jp.generation = 1;
  jp.ring = {"h1", "h3", "h4"};
  jp.aggregator_paths = {{"l0", "h1", {"l0", "h1"}}};
  jp.flows = {{"h2", "h1", "l0", {"h2", "l0"}, 1}, {"l0", "h3", "h3", {"l0", "l1", "h3"}, 1}};
  plan.jobs.push_back(jp);
  const JobConfig c = BuildJobConfig(job, &plan, {}, &t);
  ASSERT_EQ(c.ring_roles.size(), 4u);
  const core::Json j = northbound::rest::ConfigJson(c);
  ASSERT_TRUE(j.contains("ring_roles")) << j.dump();
  const core::Json& roles = j["ring_roles"];
  EXPECT_EQ(roles[0]["role"], "agent");
  EXPECT_EQ(roles[0]["prev"]["id"], "h4");
  EXPECT_EQ(roles[0]["next"]["id"], "h3");
  EXPECT_EQ(roles[0]["next"]["address"], core::FormatIpv4(core::NodeAddress(t, "h3")));
  EXPECT_EQ(roles[0]["tor"], "l0");
  EXPECT_EQ(roles[0]["rack_tag"], (1u << 30) + 9 * 64);
  EXPECT_EQ(roles[1]["role"], "rack-worker");
  EXPECT_EQ(roles[1]["agent"], "h1");
  EXPECT_FALSE(roles[1].contains("next"));
  EXPECT_EQ(roles[2]["role"], "member");
  EXPECT_EQ(roles[2]["prev"]["id"], "h1");
  EXPECT_EQ(roles[2]["next"]["id"], "h4");
  EXPECT_FALSE(roles[2].contains("rack_tag"));
  EXPECT_EQ(roles[3]["next"]["id"], "h1");
  EXPECT_EQ(j["ring"], (std::vector<std::string>{"h1", "h3", "h4"}));
  // The rack's tag for the agents (docs/rina.md "Data plane"): the agent is its PS, the rack's
  // other workers its members, aggregated at the ToR; plain members have no tag.
  ASSERT_EQ(c.tags.size(), 1u);
  EXPECT_EQ(c.tags[0].tag, (1u << 30) + 9 * 64);
  EXPECT_EQ(c.tags[0].ps, "h1");
  EXPECT_EQ(c.tags[0].ps_address, core::NodeAddress(t, "h1"));
  EXPECT_EQ(c.tags[0].share, 1.0);
  ASSERT_EQ(c.tags[0].members.size(), 1u);
  EXPECT_EQ(c.tags[0].members[0].worker, "h2");
  EXPECT_EQ(c.tags[0].members[0].aggregation_node, "l0");
}

}  // namespace
}  // namespace inac::server
