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
  EXPECT_DOUBLE_EQ(s.age_s, 0);  // the same 10 s tick of the clock
  EXPECT_EQ(s.admission, 1000);
  EXPECT_DOUBLE_EQ(MemoryJobStateFromJob(job, 6000, 0).age_s, 5);  // exact age
  // Ages count global ticks: created at 9.999 s and 1 s, both are one tick old at 10 s and 19 s.
  EXPECT_DOUBLE_EQ(MemoryJobStateFromJob(job, 10'000).age_s, 10);
  EXPECT_DOUBLE_EQ(MemoryJobStateFromJob(job, 19'999).age_s, 10);
  job.created_ms = 9'999;
  EXPECT_DOUBLE_EQ(MemoryJobStateFromJob(job, 10'000).age_s, 10);
  EXPECT_DOUBLE_EQ(MemoryJobStateFromJob(job, 5'000).age_s, 0);  // clock behind: never negative
}

}  // namespace
}  // namespace inac::scheduler

namespace inac::scheduler {
namespace {

TEST(RefreshPrioritiesTest, ReRanksOnProgressButNotOnAUniformShift) {
  core::Plan plan;
  for (core::JobId id : {1, 2}) {
    core::JobPlan jp;
    jp.job_id = id;
    plan.jobs.push_back(jp);
  }
  core::JobPlan ring;
  ring.job_id = 3;
  ring.ring = {"h1", "h2"};
  ring.priority = 7;
  plan.jobs.push_back(ring);
  const double gib = 1024.0 * 1024 * 1024;
  std::vector<MemoryJobState> states = {{.id = 1, .remaining_comm_bytes = 100 * gib, .age_s = 0},
                                        {.id = 2, .remaining_comm_bytes = 100 * gib, .age_s = 0},
                                        {.id = 3, .remaining_comm_bytes = 1, .age_s = 0}};
  // From all-zero priorities to a tie: no change in order (both tie, as before).
  EXPECT_FALSE(RefreshPriorities(states, nullptr, &plan));
  EXPECT_EQ(plan.jobs[0].priority, plan.jobs[1].priority);
  EXPECT_GT(plan.jobs[0].priority, 0);
  EXPECT_EQ(plan.jobs[2].priority, 7);  // rings hold no switch state: untouched
  // Job 2 is nearly done: it now outranks job 1.
  states[1].remaining_comm_bytes = 1 * gib;
  EXPECT_TRUE(RefreshPriorities(states, nullptr, &plan));
  EXPECT_GT(plan.jobs[1].priority, plan.jobs[0].priority);
  // Both age by one step (10 s): values change, the order does not.
  const int before = plan.jobs[0].priority;
  states[0].age_s = states[1].age_s = 10;
  EXPECT_FALSE(RefreshPriorities(states, nullptr, &plan));
  EXPECT_EQ(plan.jobs[0].priority, before + 1);
  // Jobs without a state keep their priority.
  states.erase(states.begin());
  plan.jobs[0].priority = 1'000'000'000;
  EXPECT_FALSE(RefreshPriorities(states, nullptr, &plan));  // job 1 stays first
  EXPECT_EQ(plan.jobs[0].priority, 1'000'000'000);
}

}  // namespace
}  // namespace inac::scheduler
