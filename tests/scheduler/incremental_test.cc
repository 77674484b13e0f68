// Incremental planning (scheduler/incremental.h) and the planner's move threshold
// (PlannerOptions::replan_move_threshold): admission keeps every other job verbatim and routes the
// new job around them; removal drops a job and keeps the others; a full re-plan with `previous`
// moves a running job only when its gain passes the threshold.
#include "scheduler/incremental.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/generators.h"
#include "scheduler/planner.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

core::Job RunningJob(core::JobId id, std::vector<std::string> workers, std::string ps) {
  core::Job job;
  job.id = id;
  job.spec = fixtures::PsJobSpec("job", std::move(workers), {std::move(ps)}, {.iterations = 100});
  job.state = core::JobState::kRunning;
  job.created_ms = 1000 + id;
  return job;
}

// Leaf-spine: lf0, lf1 (INA), sp0, sp1, 4 hosts per leaf; 10 Gbps links.
core::Topology SmallFabric() {
  core::GeneratorOptions o;
  o.link_gbps = 10;
  o.processing_gbps_lo = o.processing_gbps_hi = 400;
  auto t = core::GenerateLeafSpine(2, 2, 4, o);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The switch a job's stream from lf0 crosses toward its PS (the spine), or "".
std::string SpineOf(const core::JobPlan& jp, const std::string& from) {
  for (const core::AggregatorPlan& a : jp.aggregator_paths) {
    if (a.switch_id == from && a.path.size() >= 2) return a.path[1];
  }
  for (const core::FlowPlan& f : jp.flows) {
    if (f.path.size() >= 3 && f.path[1] == from) return f.path[2];
  }
  return "";
}

bool SameRoutesAndGrants(const core::JobPlan& a, const core::JobPlan& b) {
  return a.job_id == b.job_id && a.ps_shares == b.ps_shares && a.flows == b.flows &&
         a.aggregator_paths == b.aggregator_paths && a.aggregators == b.aggregators &&
         a.priority == b.priority;
}

TEST(IncrementalAdmissionTest, FirstPlanIsTheFullPlan) {
  const core::Topology t = SmallFabric();
  PlanRequest req;
  req.topology = &t;
  req.jobs = {RunningJob(1, {"h0_0", "h0_1"}, "h1_0")};
  const core::Plan empty;
  req.previous = &empty;
  auto admitted = AdmitJobs(req);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_TRUE(admitted->full);
  req.previous = nullptr;
  auto full = ComputePlan(req);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(admitted->output.plan, full->plan);
}

// The fixed small example: job 1 (h0_0, h0_1 -> h1_0) is aggregated at lf0 and its stream takes
// one spine. Job 2 (h0_2, h0_3 -> h1_1) is admitted around it: job 1 is copied verbatim, job 2 is
// aggregated at lf0 too and its stream takes the OTHER spine (the first one carries job 1's
// 10 Gbps, a full link), so both run at the line rate 10 Gbps.
TEST(IncrementalAdmissionTest, NewJobRoutedAroundTheRunningOne) {
  const core::Topology t = SmallFabric();
  PlanRequest first;
  first.topology = &t;
  first.jobs = {RunningJob(1, {"h0_0", "h0_1"}, "h1_0")};
  auto base = ComputePlan(first);
  ASSERT_TRUE(base.ok()) << base.status();
  const core::JobPlan* one = base->plan.FindJob(1);
  ASSERT_NE(one, nullptr);
  const std::string spine1 = SpineOf(*one, "lf0");
  ASSERT_FALSE(spine1.empty());

  PlanRequest req = first;
  req.jobs.push_back(RunningJob(2, {"h0_2", "h0_3"}, "h1_1"));
  req.jobs.back().state = core::JobState::kPending;
  req.previous = &base->plan;
  auto admitted = AdmitJobs(req);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_FALSE(admitted->full);
  EXPECT_EQ(admitted->kept, std::vector<core::JobId>{1});
  EXPECT_EQ(admitted->admitted, std::vector<core::JobId>{2});
  const core::Plan& plan = admitted->output.plan;
  ASSERT_EQ(plan.jobs.size(), 2u);
  EXPECT_TRUE(SameRoutesAndGrants(*plan.FindJob(1), *one));
  const core::JobPlan* two = plan.FindJob(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->flows.size(), 2u);
  for (const core::FlowPlan& f : two->flows) EXPECT_EQ(f.aggregation_node, "lf0");
  const std::string spine2 = SpineOf(*two, "lf0");
  EXPECT_FALSE(spine2.empty());
  EXPECT_NE(spine2, spine1);
  EXPECT_NEAR(plan.FindJob(1)->rate_gbps, 10, 1e-6);
  EXPECT_NEAR(two->rate_gbps, 10, 1e-6);
  EXPECT_FALSE(two->aggregators.empty());  // memory granted from what job 1 leaves
  EXPECT_FALSE(admitted->output.intents.empty());
  EXPECT_EQ(CountMovedFlows(base->plan, plan).flows_moved, 0);
}

TEST(IncrementalAdmissionTest, RemovalDropsTheJobAndKeepsTheOthers) {
  const core::Topology t = SmallFabric();
  PlanRequest req;
  req.topology = &t;
  req.jobs = {RunningJob(1, {"h0_0", "h0_1"}, "h1_0"), RunningJob(2, {"h0_2", "h0_3"}, "h1_1"),
              RunningJob(3, {"h1_2", "h1_3"}, "h0_0")};
  auto base = ComputePlan(req);
  ASSERT_TRUE(base.ok()) << base.status();
  PlanRequest after = req;
  after.jobs.erase(after.jobs.begin() + 1);  // job 2 cancelled
  after.previous = &base->plan;
  auto out = AdmitJobs(after);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->removed, std::vector<core::JobId>{2});
  EXPECT_TRUE(out->admitted.empty());
  const core::Plan& plan = out->output.plan;
  ASSERT_EQ(plan.jobs.size(), 2u);
  EXPECT_EQ(plan.FindJob(2), nullptr);
  EXPECT_TRUE(SameRoutesAndGrants(*plan.FindJob(1), *base->plan.FindJob(1)));
  EXPECT_TRUE(SameRoutesAndGrants(*plan.FindJob(3), *base->plan.FindJob(3)));
  for (const core::SwitchIntent& intent : out->output.intents) {
    for (const auto& j : intent.jobs) EXPECT_NE(j.job_id, 2);
  }
}

// A job whose route crosses a link that went down is re-admitted (not kept).
TEST(IncrementalAdmissionTest, JobOnADownLinkIsRerouted) {
  core::Topology t = SmallFabric();
  PlanRequest req;
  req.topology = &t;
  req.jobs = {RunningJob(1, {"h0_0", "h0_1"}, "h1_0")};
  auto base = ComputePlan(req);
  ASSERT_TRUE(base.ok());
  const std::string spine = SpineOf(*base->plan.FindJob(1), "lf0");
  for (core::Link& l : t.links) {
    if ((l.a == "lf0" && l.b == spine) || (l.b == "lf0" && l.a == spine)) {
      l.status = core::LinkStatus::kDown;
    }
  }
  req.previous = &base->plan;
  auto out = AdmitJobs(req);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->full);  // nothing left to keep
  EXPECT_NE(SpineOf(*out->output.plan.FindJob(1), "lf0"), spine);
}

// 20 running jobs of 8..32 workers on a k=8 fat-tree, one more added.
struct Fleet {
  core::Topology topology;
  std::vector<core::Job> jobs;
};

Fleet TwentyJobs() {
  Fleet f;
  core::GeneratorOptions o;
  f.topology = *core::GenerateFatTree(8, o);
  std::mt19937_64 rng(42);
  std::vector<std::string> hosts;
  for (const auto& h : f.topology.hosts) hosts.push_back(h.id);
  for (int i = 1; i <= 21; ++i) {
    std::shuffle(hosts.begin(), hosts.end(), rng);
    const int w = std::uniform_int_distribution<int>(8, 32)(rng);
    f.jobs.push_back(
        RunningJob(i, std::vector<std::string>(hosts.begin(), hosts.begin() + w), hosts[w]));
  }
  return f;
}

TEST(ReplanStabilityTest, AddingOneJobMovesOnlyJobsPastTheThreshold) {
  Fleet f = TwentyJobs();
  PlanRequest base;
  base.topology = &f.topology;
  base.jobs.assign(f.jobs.begin(), f.jobs.begin() + 20);
  base.options.algorithm = "grid";  // grid-split's extra LP per job takes minutes here
  // The joint LP (the audit's case: 196 of 384 flows moved): the sequential mode plans the new,
  // last job around the others and moves nobody by construction.
  base.options.joint_lp_max_columns = 20000;
  auto running = ComputePlan(base);
  ASSERT_TRUE(running.ok()) << running.status();

  PlanRequest req = base;
  req.jobs.push_back(f.jobs[20]);
  req.jobs.back().state = core::JobState::kScheduled;
  req.previous = &running->plan;
  req.options.replan_move_threshold = 0.10;
  auto stable = ComputePlan(req);
  ASSERT_TRUE(stable.ok()) << stable.status();
  req.options.replan_move_threshold = -1;
  auto free = ComputePlan(req);
  ASSERT_TRUE(free.ok()) << free.status();

  const FlowMoves with = CountMovedFlows(running->plan, stable->plan);
  const FlowMoves without = CountMovedFlows(running->plan, free->plan);
  EXPECT_EQ(with.jobs_compared, 20);
  EXPECT_GT(without.flows_moved, 0);  // the unconstrained re-plan does move running jobs
  EXPECT_LT(with.flows_moved, without.flows_moved);
  // Every running job is accounted for; those kept have exactly their previous routes.
  EXPECT_EQ(stable->kept_by_threshold.size() + stable->moved_by_threshold.size(), 20u);
  for (core::JobId id : stable->kept_by_threshold) {
    const core::JobPlan* before = running->plan.FindJob(id);
    const core::JobPlan* after = stable->plan.FindJob(id);
    ASSERT_TRUE(before && after);
    EXPECT_EQ(before->flows, after->flows) << "job " << id;
    EXPECT_EQ(before->aggregator_paths, after->aggregator_paths) << "job " << id;
  }
  // Only the moved ones may have moved flows.
  std::set<core::JobId> moved(stable->moved_by_threshold.begin(), stable->moved_by_threshold.end());
  for (const core::JobPlan& jp : running->plan.jobs) {
    if (moved.count(jp.job_id)) continue;
    core::Plan one_before, one_after;
    one_before.jobs = {jp};
    one_after.jobs = {*stable->plan.FindJob(jp.job_id)};
    EXPECT_EQ(CountMovedFlows(one_before, one_after).flows_moved, 0) << "job " << jp.job_id;
  }
  // Admission moves nobody at all.
  req.options.replan_move_threshold = 0.10;
  auto admitted = AdmitJobs(req);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(CountMovedFlows(running->plan, admitted->output.plan).flows_moved, 0);
  EXPECT_EQ(admitted->admitted, std::vector<core::JobId>{21});
}

TEST(CountMovedFlowsTest, CountsStreamsWhoseRoutesDiffer) {
  core::Plan a, b;
  core::JobPlan jp;
  jp.job_id = 1;
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}, 1}, {"w2", "ps", "s1", {"w2", "s1"}, 1}};
  a.jobs = {jp};
  jp.flows[1].aggregation_node = "ps";
  jp.flows[1].path = {"w2", "s1", "ps"};
  b.jobs = {jp};
  FlowMoves m = CountMovedFlows(a, b);
  EXPECT_EQ(m.jobs_compared, 1);
  EXPECT_EQ(m.flows_compared, 2);
  EXPECT_EQ(m.flows_moved, 1);
  EXPECT_EQ(m.jobs_moved, 1);
  EXPECT_EQ(CountMovedFlows(a, a).flows_moved, 0);
}

}  // namespace
}  // namespace inac::scheduler
