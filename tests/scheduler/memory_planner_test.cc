#include "scheduler/memory/memory_planner.h"

#include <gtest/gtest.h>

#include "tests/scheduler/sim_fixtures.h"

namespace inac::scheduler {
namespace {

// Job `id` with workers a, b aggregated at s1 and PS ps.
core::JobPlan AggregatedAtS1(core::JobId id, const std::string& a, const std::string& b,
                             const std::string& ps) {
  core::JobPlan jp;
  jp.job_id = id;
  jp.ps_shares[ps] = 1;
  jp.flows.push_back({.worker = a, .ps = ps, .aggregation_node = "s1", .path = {a, "s1"}});
  jp.flows.push_back({.worker = b, .ps = ps, .aggregation_node = "s1", .path = {b, "s1"}});
  jp.aggregator_paths.push_back({.switch_id = "s1", .ps = ps, .path = {"s1", ps}});
  return jp;
}

struct Fixture {
  explicit Fixture(int64_t aggregators)
      : topology(testing::SingleSwitch(aggregators, 6)), graph(topology) {
    plan.jobs = {AggregatedAtS1(1, "h1", "h2", "h3"), AggregatedAtS1(2, "h4", "h5", "h6")};
    // Job 1 has far more work left than job 2: job 2 is more urgent.
    jobs = {{.id = 1, .workers = {"h1", "h2"}, .remaining_comm_bytes = 1e12, .admission = 0},
            {.id = 2, .workers = {"h4", "h5"}, .remaining_comm_bytes = 1e9, .admission = 1}};
  }
  core::Topology topology;
  core::Graph graph;
  core::Plan plan;
  std::vector<MemoryJobState> jobs;
};

TEST(MemoryPlannerTest, TimingFromPlanPaths) {
  Fixture f(1000);
  const AggregationTiming t = TimingAt(f.graph, f.plan.jobs[0], "s1", {});
  EXPECT_DOUBLE_EQ(t.spread_us, 2);
  EXPECT_DOUBLE_EQ(t.ps_rtt_us, 4);  // 2 x 1 us + 2 us turnaround
  EXPECT_DOUBLE_EQ(WorkerLineRateGbps(f.graph, {"h1", "h2"}), 100);
}

TEST(MemoryPlannerTest, EsaGivesTheUrgentJobItsWindowFirst) {
  // ESA window at 100 Gbps: ceil(100 Gbps x 2 us / 248 B) = ceil(100.8) = 101.
  Fixture f(150);
  MemoryPlannerOptions options;
  ASSERT_TRUE(AssignAggregators(f.graph, f.jobs, nullptr, options, &f.plan).ok());
  EXPECT_EQ(f.plan.jobs[1].aggregators.at("s1"), 101);
  EXPECT_EQ(f.plan.jobs[0].aggregators.at("s1"), 49);
  EXPECT_GT(f.plan.jobs[1].priority, f.plan.jobs[0].priority);
}

TEST(MemoryPlannerTest, JobWithoutMemoryFallsBackToItsPs) {
  Fixture f(101);
  ASSERT_TRUE(AssignAggregators(f.graph, f.jobs, nullptr, {}, &f.plan).ok());
  const core::JobPlan& loser = f.plan.jobs[0];
  EXPECT_TRUE(loser.aggregators.empty());
  EXPECT_TRUE(loser.aggregator_paths.empty());
  ASSERT_EQ(loser.flows.size(), 2u);
  EXPECT_EQ(loser.flows[0].aggregation_node, "h3");
  EXPECT_EQ(loser.flows[0].path, (std::vector<std::string>{"h1", "s1", "h3"}));
  EXPECT_EQ(f.plan.jobs[1].aggregators.at("s1"), 101);
}

TEST(MemoryPlannerTest, SwitchMlKeepsTheIncumbentsPool) {
  // ATP/SwitchML window: hold 2 + 4 = 6 us -> ceil(302.4) = 303 aggregators.
  Fixture f(303);
  MemoryPlannerOptions options{.policy = MemoryPolicy::kSwitchMl};
  core::Plan previous;
  previous.jobs = {f.plan.jobs[0]};
  previous.jobs[0].aggregators["s1"] = 303;
  ASSERT_TRUE(AssignAggregators(f.graph, f.jobs, &previous, options, &f.plan).ok());
  EXPECT_EQ(f.plan.jobs[0].aggregators.at("s1"), 303);
  EXPECT_TRUE(f.plan.jobs[1].aggregators.empty());
  EXPECT_EQ(f.plan.jobs[1].flows[0].aggregation_node, "h6");
}

TEST(MemoryPlannerTest, AtpSharesProportionally) {
  Fixture f(303);
  MemoryPlannerOptions options{.policy = MemoryPolicy::kAtp};
  ASSERT_TRUE(AssignAggregators(f.graph, f.jobs, nullptr, options, &f.plan).ok());
  EXPECT_EQ(f.plan.jobs[0].aggregators.at("s1"), 151);
  EXPECT_EQ(f.plan.jobs[1].aggregators.at("s1"), 151);
}

TEST(MemoryPlannerTest, NoInaFallsEveryoneBack) {
  Fixture f(1000);
  MemoryPlannerOptions options{.policy = MemoryPolicy::kNoIna};
  ASSERT_TRUE(AssignAggregators(f.graph, f.jobs, nullptr, options, &f.plan).ok());
  for (const core::JobPlan& jp : f.plan.jobs) {
    EXPECT_TRUE(jp.aggregators.empty());
    for (const core::FlowPlan& flow : jp.flows) EXPECT_EQ(flow.aggregation_node, flow.ps);
  }
}

TEST(MemoryPlannerTest, MissingJobStateIsInvalidArgumentAndLeavesPlan) {
  Fixture f(1000);
  f.jobs.pop_back();
  const core::Plan before = f.plan;
  EXPECT_EQ(AssignAggregators(f.graph, f.jobs, nullptr, {}, &f.plan).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.plan, before);
}

TEST(MemoryPlannerTest, JobStateFromControllerRecord) {
  core::Job job;
  job.id = 4;
  job.spec.priority = 2;
  job.spec.workers = {"h1"};
  job.spec.iterations = 10;
  job.spec.gradient_bytes = 100;
  job.iterations_done = 4;
  job.created_ms = 1000;
  const MemoryJobState s = MemoryJobStateFromJob(job, 6000);
  EXPECT_EQ(s.id, 4);
  EXPECT_EQ(s.user_priority, 2);
  EXPECT_DOUBLE_EQ(s.remaining_comm_bytes, 600);
  EXPECT_DOUBLE_EQ(s.age_s, 5);
  EXPECT_EQ(s.admission, 1000);
}

}  // namespace
}  // namespace inac::scheduler
