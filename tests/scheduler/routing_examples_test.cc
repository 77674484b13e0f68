// The worked examples of the papers as fixed expectations (examples/README.md).
#include <gtest/gtest.h>

#include "scheduler/model/flow_model.h"
#include "scheduler/routing/inart.h"
#include "scheduler/routing/lp_routing.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/scheduler/routing_fixtures.h"

namespace inac::scheduler {
namespace {

using testing::LoadExample;

double Rate(const std::string& algorithm, const PlanningInput& input) {
  auto planned = PlanRouting(algorithm, input);
  EXPECT_TRUE(planned.ok()) << planned.status();
  if (!planned.ok()) return -1;
  FlowEvaluator evaluator(**Network::Create(input));
  auto net = Network::Create(input);
  FlowEvaluator ev(**net);
  EXPECT_TRUE(ev.CapacityViolations(planned->evaluation).empty());
  return planned->plan.jobs[0].rate_gbps;
}

TEST(GridExampleTest, NoInaIsOneGbps) {
  EXPECT_NEAR(Rate("no_ina", LoadExample("grid-example")), 1.0, 1e-9);
}

TEST(GridExampleTest, AtpSpillsOverToTwoPointFourThreeSevenFive) {
  PlanningInput input = LoadExample("grid-example");
  auto planned = PlanRouting("atp", input);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_NEAR(planned->plan.jobs[0].rate_gbps, 2.4375, 1e-6);
  // W1 is split: 2.25/2.4375 aggregated at S1, the rest at S3 (the PS's ToR).
  double at_s1 = 0, at_s3 = 0;
  for (const core::FlowPlan& f : planned->plan.jobs[0].flows) {
    if (f.worker != "W1") continue;
    if (f.aggregation_node == "S1") at_s1 += f.fraction;
    if (f.aggregation_node == "S3") at_s3 += f.fraction;
  }
  EXPECT_NEAR(at_s1, 2.25 / 2.4375, 1e-6);
  EXPECT_NEAR(at_s3, 0.1875 / 2.4375, 1e-6);
}

TEST(GridExampleTest, SwitchMlAggregatesAtNearestSwitchOnly) {
  EXPECT_NEAR(Rate("switchml", LoadExample("grid-example")), 2.25, 1e-9);
}

TEST(GridExampleTest, GridReachesThreeGbpsAndItsLpBound) {
  PlanningInput input = LoadExample("grid-example");
  auto planned = PlanRouting("grid", input);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_NEAR(jp.rate_gbps, 3.0, 1e-9);
  ASSERT_TRUE(jp.lp_bound_gbps.has_value());
  EXPECT_NEAR(*jp.lp_bound_gbps, 3.0, 1e-6);
  // Every worker unsplit, one aggregation node each.
  EXPECT_EQ(jp.flows.size(), 8u);
  for (const core::FlowPlan& f : jp.flows) EXPECT_EQ(f.fraction, 1.0);
}

TEST(GridExampleTest, OptimalAgrees) {
  EXPECT_NEAR(Rate("optimal", LoadExample("grid-example")), 3.0, 1e-9);
}

TEST(InArtExampleTest, NoInaIsFourThirds) {
  EXPECT_NEAR(Rate("no_ina", LoadExample("inart-two-ps")), 4.0 / 3.0, 1e-9);
}

TEST(InArtExampleTest, AtpWithOnePsIsTwo) {
  EXPECT_NEAR(Rate("atp", LoadExample("inart-two-ps")), 2.0, 1e-6);
}

TEST(InArtExampleTest, InArtBeatsThePapersTwoPointFive) {
  // The paper reports 2.5; on our reconstruction the KKT split (0.75, 0.25) reaches 8/3, which the
  // MIP confirms optimal (examples/README.md).
  PlanningInput input = LoadExample("inart-two-ps");
  auto planned = PlanRouting("inart", input);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_NEAR(jp.rate_gbps, 8.0 / 3.0, 1e-6);
  EXPECT_NEAR(jp.ps_shares.at("PS1"), 0.75, 1e-9);
  EXPECT_NEAR(jp.ps_shares.at("PS2"), 0.25, 1e-9);
  EXPECT_GE(jp.rate_gbps, 2.5);
  EXPECT_NEAR(Rate("optimal", input), 8.0 / 3.0, 1e-6);
}

TEST(InArtExampleTest, PhaseTwoWithThePapersSplitGivesTwoPointFive) {
  PlanningInput input = LoadExample("inart-two-ps");
  auto net = Network::Create(input);
  ASSERT_TRUE(net.ok());
  LpRoutingConfig config;
  config.shares = [](const Network&, PathCache&, const std::vector<double>&,
                     int) -> std::optional<std::vector<double>> {
    return std::vector<double>{0.8, 0.2};
  };
  auto routed = RouteWithLp(**net, config);
  ASSERT_TRUE(routed.ok()) << routed.status();
  FlowEvaluator evaluator(**net);
  Evaluation ev = evaluator.Evaluate(routed->jobs);
  EXPECT_NEAR(ev.jobs[0].rate_gbps, 2.5, 1e-6);
}

TEST(InArtExampleTest, KktSharesFavourTheAggregatedPs) {
  PlanningInput input = LoadExample("inart-two-ps");
  auto net = Network::Create(input);
  ASSERT_TRUE(net.ok());
  PathCache paths((*net)->graph(), 4);
  ShareSplit split = InArtShares(**net, paths, (*net)->residuals(), 0);
  EXPECT_NEAR(split.lambda_estimate, 8.0 / 3.0, 1e-9);
  EXPECT_TRUE(split.aggregated[0]);
  EXPECT_FALSE(split.aggregated[1]);
}

}  // namespace
}  // namespace inac::scheduler
