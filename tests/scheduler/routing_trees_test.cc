// `trees` (scheduler/routing/trees.h), the planner's default: the worked examples, GRID's setting
// against the valid bounds (scheduler/routing/bounds.h), what it deploys (fan-in, ranges, chains)
// and determinism.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/generators.h"
#include "core/intent_evaluation.h"
#include "core/plan.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/planner.h"
#include "scheduler/routing/bounds.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/scheduler/routing_fixtures.h"

namespace inac::scheduler {
namespace {

using testing::GridSetting;

double RateOf(const std::string& algorithm, const PlanningInput& in) {
  auto planned = PlanRouting(algorithm, in);
  EXPECT_TRUE(planned.ok()) << planned.status();
  return planned.ok() ? planned->plan.jobs[0].rate_gbps : -1;
}

TEST(TreesTest, IsRegisteredAndThePlannersDefault) {
  EXPECT_TRUE(MakeRoutingAlgorithm("trees").ok());
  const std::vector<std::string> names = RoutingAlgorithmNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "trees"), names.end());
  EXPECT_EQ(PlannerOptions{}.algorithm, "trees");
}

// GRID's motivating example: 3 Gbps is both the integral optimum (grid = optimal) and the valid
// bound of every deployable plan (W1's only link is 3 Gbps).
TEST(TreesTest, GridExampleReachesTheBound) {
  const PlanningInput in = testing::LoadExample("grid-example");
  EXPECT_NEAR(RateOf("trees", in), 3.0, 1e-6);
}

// InArt's two-PS example: at least InArt's own plan (8/3 with its KKT split).
TEST(TreesTest, InArtExampleAtLeastInArt) {
  const PlanningInput in = testing::LoadExample("inart-two-ps");
  EXPECT_GE(RateOf("trees", in), RateOf("inart", in) - 1e-6);
}

// GRID's setting (a), 100 workers: more than 64 workers on one PS cap every single-level plan at
// half the PS's ingress (SingleLevelBound: 50 Gbps); chains lift it towards the chained bound.
// The plan deploys as scored: every (tag, switch) sums at most 64 inputs, at most 64 ranges,
// and the intents sustain the printed rate.
TEST(TreesTest, ChainsPassTheSingleLevelOptimumOnGridsSetting) {
  PlanningInput in = GridSetting(1, 100, "tor");
  auto planned = PlanRouting("trees", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_EQ(planned->diagnostics[0].source, "trees:chains");
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  auto single = SingleLevelBound(**net, 0);
  auto chained = ChainedBound(**net, 0);
  ASSERT_TRUE(single.ok() && chained.ok());
  EXPECT_NEAR(single->gbps, 50, 1e-6);
  EXPECT_GE(jp.rate_gbps, 1.4 * single->gbps);  // the target: >= 70 Gbps
  EXPECT_LE(jp.rate_gbps, chained->gbps * (1 + 1e-6));
  // Chains: some aggregator path ends at another switch.
  bool chain = false;
  for (const core::AggregatorPlan& a : jp.aggregator_paths) {
    chain |= a.path.back() != a.ps;
  }
  EXPECT_TRUE(chain);
  EXPECT_LE(core::ChunkRangesOf(jp, jp.ps_shares.begin()->first).size(), 64u);
  core::Plan plan;
  plan.memory_policy = "esa";
  plan.jobs.push_back(jp);
  plan.jobs[0].aggregators.clear();  // uncapped: the routing's own rate
  const std::vector<core::SwitchIntent> intents = core::DeriveSwitchIntents(in.topology, plan);
  for (const core::SwitchIntent& si : intents) {
    for (const core::JobAggregationIntent& j : si.jobs) EXPECT_LE(j.fan_in, 64u) << si.switch_id;
  }
}

// GRID's setting (b), 70 workers: the single-level family reaches the single-level optimum.
TEST(TreesTest, ReachesTheFanInOptimumOnSettingB) {
  PlanningInput in = GridSetting(2, 70, "random:0.2");
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  auto single = SingleLevelBound(**net, 0);
  ASSERT_TRUE(single.ok());
  EXPECT_GE(RateOf("trees", in), 0.99 * single->gbps);
}

TEST(TreesTest, SameInputSamePlan) {
  PlanningInput in = GridSetting(3, 70, "tor");
  auto a = PlanRouting("trees", in);
  auto b = PlanRouting("trees", in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->plan, b->plan);
}

// Scarce aggregators (150 per switch) under ATP's hold: the LP charges each switch's memory, so
// through the whole planner (routing, grants, re-scoring, intents) the grants fit every switch
// and the printed rates hold on the intents.
TEST(TreesTest, MemoryRowsKeepSeveralJobsWithinTheAggregators) {
  core::GeneratorOptions o;
  o.seed = 1;
  o.link_gbps = 100;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  o.aggregators = 150;
  auto t = core::GenerateFatTree(4, o, 3);
  ASSERT_TRUE(t.ok());
  std::vector<std::string> hosts;
  for (const auto& h : t->hosts) hosts.push_back(h.id);
  PlanRequest req;
  req.topology = &*t;
  req.options.memory_policy = "atp";
  for (int j = 0; j < 3; ++j) {
    core::Job job;
    job.id = j + 1;
    std::vector<std::string> w(hosts.begin() + 8 * j, hosts.begin() + 8 * j + 7);
    job.spec = fixtures::PsJobSpec("m", w, {hosts[8 * j + 7]});
    req.jobs.push_back(job);
  }
  auto out = ComputePlan(req);
  ASSERT_TRUE(out.ok()) << out.status();
  std::map<std::string, int64_t> used;
  for (const core::JobPlan& jp : out->plan.jobs) {
    EXPECT_GT(jp.rate_gbps, 0);
    for (const auto& [sw, n] : jp.aggregators) used[sw] += n;
  }
  for (const auto& [sw, n] : used) EXPECT_LE(n, 150) << sw;
  auto sustained = core::EvaluateIntents(*t, out->plan, out->intents);
  ASSERT_TRUE(sustained.ok()) << sustained.status();
  for (size_t j = 0; j < out->plan.jobs.size(); ++j) {
    EXPECT_LE(out->plan.jobs[j].rate_gbps, (*sustained)[j].rate_gbps * (1 + 1e-6) + 1e-9)
        << "job " << out->plan.jobs[j].job_id << " " << (*sustained)[j].bottleneck;
  }
}

}  // namespace
}  // namespace inac::scheduler
