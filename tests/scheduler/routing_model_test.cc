// k-shortest paths (Yen) and the flow-level evaluator against hand-computed cases.
#include <set>

#include <gtest/gtest.h>

#include "core/generators.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/paths.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

core::Switch Sw(const std::string& id, double gbps = 0) {
  core::Switch s;
  s.id = id;
  if (gbps > 0) {
    s.ina.capable = true;
    s.ina.processing_gbps = gbps;
    s.ina.aggregators = 20000;
  }
  return s;
}

core::Link L(const std::string& a, const std::string& b, double gbps,
             std::optional<double> latency = std::nullopt) {
  core::Link l;
  l.id = core::DefaultLinkId(a, b);
  l.a = a;
  l.b = b;
  l.gbps = gbps;
  l.latency_us = latency;
  return l;
}

std::vector<std::string> Names(const core::Graph& g, const Path& p) {
  std::vector<std::string> out;
  for (int v : p.nodes) out.push_back(g.name(v));
  return out;
}

void ExpectWellFormed(const core::Graph& g, const Path& p, int src, int dst) {
  ASSERT_EQ(p.nodes.size(), p.arcs.size() + 1);
  EXPECT_EQ(p.nodes.front(), src);
  EXPECT_EQ(p.nodes.back(), dst);
  std::set<int> seen(p.nodes.begin(), p.nodes.end());
  EXPECT_EQ(seen.size(), p.nodes.size()) << "loop";
  for (size_t i = 0; i < p.arcs.size(); ++i) {
    EXPECT_EQ(g.arc(p.arcs[i]).from, p.nodes[i]);
    EXPECT_EQ(g.arc(p.arcs[i]).to, p.nodes[i + 1]);
    if (i > 0) {
      EXPECT_TRUE(g.is_switch(p.nodes[i])) << "transits a host";
    }
  }
}

TEST(KShortestPathsTest, DiamondInLengthOrder) {
  core::Topology t;
  for (const char* s : {"a", "b", "c", "d", "e"}) t.switches.push_back(Sw(s));
  t.links = {L("a", "b", 1), L("b", "d", 1), L("a", "c", 1), L("c", "d", 1),
             L("a", "d", 1), L("b", "e", 1), L("e", "d", 1)};
  core::Graph g(t);
  std::vector<Path> paths = KShortestPaths(g, g.index("a"), g.index("d"), 10);
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(Names(g, paths[0]), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(Names(g, paths[1]), (std::vector<std::string>{"a", "b", "d"}));
  EXPECT_EQ(Names(g, paths[2]), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(Names(g, paths[3]), (std::vector<std::string>{"a", "b", "e", "d"}));
  for (const Path& p : paths) ExpectWellFormed(g, p, g.index("a"), g.index("d"));
  EXPECT_EQ(KShortestPaths(g, g.index("a"), g.index("d"), 2).size(), 2u);
  EXPECT_TRUE(KShortestPaths(g, g.index("a"), g.index("d"), 0).empty());
  ASSERT_EQ(KShortestPaths(g, g.index("a"), g.index("a"), 3).size(), 1u);
}

TEST(KShortestPathsTest, NeverTransitsAHost) {
  core::Topology t;
  t.switches = {Sw("s1"), Sw("s2"), Sw("s3")};
  core::Host h;
  h.id = "h";
  t.hosts = {h};
  t.links = {L("s1", "h", 1), L("h", "s2", 1), L("s1", "s3", 1), L("s3", "s2", 1)};
  core::Graph g(t);
  std::vector<Path> paths = KShortestPaths(g, g.index("s1"), g.index("s2"), 5);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(Names(g, paths[0]), (std::vector<std::string>{"s1", "s3", "s2"}));
}

TEST(KShortestPathsTest, FatTreeInterPodPathsAndCacheAgree) {
  core::GeneratorOptions o;
  auto t = core::GenerateFatTree(4, o);
  ASSERT_TRUE(t.ok());
  core::Graph g(*t);
  int src = g.index("h0_0_0"), dst = g.index("h3_1_1");
  std::vector<Path> paths = KShortestPaths(g, src, dst, 6);
  ASSERT_EQ(paths.size(), 6u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(paths[i].hops(), 6) << i;  // (k/2)^2 shortest
  for (int i = 4; i < 6; ++i) EXPECT_GT(paths[i].hops(), 6) << i;
  for (const Path& p : paths) ExpectWellFormed(g, p, src, dst);
  PathCache cache(g, 6);
  const std::vector<Path>& cached = cache.Get(src, dst);
  ASSERT_EQ(cached.size(), paths.size());
  for (size_t i = 0; i < paths.size(); ++i) EXPECT_EQ(cached[i].hops(), paths[i].hops());
  for (const Path& p : cached) ExpectWellFormed(g, p, src, dst);
  EXPECT_EQ(&cache.Get(src, dst), &cached);  // memoised
}

// Two workers under one INA switch S, PS behind it.
PlanningInput Star(double link_gbps, double processing, double latency_us) {
  PlanningInput in;
  in.topology.switches = {Sw("S", processing)};
  for (const char* h : {"W1", "W2", "PS"}) {
    core::Host host;
    host.id = h;
    in.topology.hosts.push_back(host);
  }
  in.topology.links = {L("W1", "S", link_gbps, latency_us), L("W2", "S", link_gbps, latency_us),
                       L("S", "PS", link_gbps, latency_us)};
  in.jobs.push_back(JobInput{7, fixtures::PsJobSpec("j", {"W1", "W2"}, {"PS"})});
  return in;
}

core::JobPlan StarPlan(bool aggregate) {
  core::JobPlan p;
  p.job_id = 7;
  p.ps_shares = {{"PS", 1.0}};
  for (const char* w : {"W1", "W2"}) {
    core::FlowPlan f;
    f.worker = w;
    f.ps = "PS";
    f.aggregation_node = aggregate ? "S" : "PS";
    f.path = aggregate ? std::vector<std::string>{w, "S"} : std::vector<std::string>{w, "S", "PS"};
    p.flows.push_back(f);
  }
  if (aggregate) p.aggregator_paths.push_back(core::AggregatorPlan{"S", "PS", {"S", "PS"}});
  return p;
}

TEST(FlowEvaluatorTest, AggregationCountsTheSwitchStreamOnce) {
  PlanningInput in = Star(10, 8, 1);
  core::Plan plan;
  plan.jobs = {StarPlan(true)};
  auto ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  // Switch input 2λ <= 8; the stream S->PS carries λ once.
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 4.0, 1e-12);
  EXPECT_EQ(ev->jobs[0].bottleneck, "switch S");
  // Down: one stream per tree arc, 10 Gbps.
  EXPECT_NEAR(ev->jobs[0].down_gbps, 10.0, 1e-12);
  // 1e8 bytes at 4 Gbps = 200 ms (> 80 ms down), plus 100 ms compute.
  EXPECT_NEAR(ev->jobs[0].comm_ms, 200.0, 1e-9);
  EXPECT_NEAR(ev->jobs[0].iteration_ms, 300.0, 1e-9);
  EXPECT_NEAR(ev->jobs[0].jct_ms, 3000.0, 1e-6);
  EXPECT_NEAR(ev->jobs[0].rtt_us, 4.0, 1e-12);  // 2 x (1 + 1) us
}

TEST(FlowEvaluatorTest, WithoutAggregationThePsLinkCarriesEveryWorker) {
  PlanningInput in = Star(10, 8, 1);
  core::Plan plan;
  plan.jobs = {StarPlan(false)};
  auto ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 5.0, 1e-12);
}

TEST(FlowEvaluatorTest, MemoryCapLimitsTheRate) {
  PlanningInput in = Star(100, 400, 5);
  core::Plan plan;
  plan.jobs = {StarPlan(true)};
  plan.jobs[0].aggregators = {{"S", 100}};
  auto ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  // RTT 2 x 10 us; 100 x 248 B x 8 / 20 us = 9.92 Gbps.
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 9.92, 1e-9);
  EXPECT_EQ(ev->jobs[0].bottleneck, "memory S");
  plan.jobs[0].aggregators.clear();  // no allocation: uncapped
  ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok());
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 100.0, 1e-9);
}

TEST(FlowEvaluatorTest, BackgroundLoadReducesCapacity) {
  PlanningInput in = Star(10, 8, 1);
  in.background.arcs.push_back({"S", "PS", 7});
  core::Plan plan;
  plan.jobs = {StarPlan(true)};
  auto ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok());
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 3.0, 1e-12);
  in.background.arcs.push_back({"S", "nowhere", 1});
  EXPECT_FALSE(EvaluatePlan(in, plan).ok());
}

TEST(FlowEvaluatorTest, RejectsMalformedPlans) {
  PlanningInput in = Star(10, 8, 1);
  core::Plan plan;
  plan.jobs = {StarPlan(true)};
  plan.jobs[0].aggregator_paths.clear();
  EXPECT_FALSE(EvaluatePlan(in, plan).ok());  // S aggregates without a path to the PS
  plan.jobs = {StarPlan(false)};
  plan.jobs[0].flows[0].path = {"W1", "PS"};  // no such link
  EXPECT_FALSE(EvaluatePlan(in, plan).ok());
  plan.jobs = {StarPlan(false)};
  plan.jobs[0].job_id = 99;
  EXPECT_FALSE(EvaluatePlan(in, plan).ok());
  plan.jobs = {StarPlan(false)};
  plan.jobs[0].ps_shares["PS"] = 0.5;
  EXPECT_FALSE(EvaluatePlan(in, plan).ok());
}

TEST(FlowEvaluatorTest, JobPlanRoundTrip) {
  PlanningInput in = Star(10, 8, 1);
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  FlowEvaluator evaluator(**net);
  core::JobPlan plan = StarPlan(true);
  auto routed = evaluator.FromJobPlan(plan);
  ASSERT_TRUE(routed.ok()) << routed.status();
  core::JobPlan back = evaluator.ToJobPlan(*routed);
  EXPECT_EQ(back.flows, plan.flows);
  EXPECT_EQ(back.aggregator_paths, plan.aggregator_paths);
  EXPECT_EQ(back.ps_shares, plan.ps_shares);
}

TEST(MaxMinFairRatesTest, SharedBottleneckSplitsEvenly) {
  FairShare f = MaxMinFairRates({10}, {VirtualFlow{{{0, 1.0}}}, VirtualFlow{{{0, 1.0}}}});
  EXPECT_NEAR(f.rates[0], 5, 1e-12);
  EXPECT_NEAR(f.rates[1], 5, 1e-12);
  EXPECT_EQ(f.bottleneck[0], 0);
}

TEST(MaxMinFairRatesTest, FrozenFlowLeavesTheRestToOthers) {
  // Flow 1 also crosses a 2 Gbps resource; flow 0 takes what flow 1 cannot use.
  FairShare f =
      MaxMinFairRates({10, 2}, {VirtualFlow{{{0, 1.0}}}, VirtualFlow{{{0, 1.0}, {1, 1.0}}}});
  EXPECT_NEAR(f.rates[0], 8, 1e-12);
  EXPECT_NEAR(f.rates[1], 2, 1e-12);
  EXPECT_EQ(f.bottleneck[1], 1);
  EXPECT_EQ(f.bottleneck[0], 0);
}

TEST(MaxMinFairRatesTest, CoefficientsAndPrivateLimits) {
  // Flow 0 uses 3 units per unit rate, flow 1 is capped at 1 by its private limit.
  FairShare f = MaxMinFairRates({12}, {VirtualFlow{{{0, 3.0}}}, VirtualFlow{{{0, 1.0}}, 1.0}});
  EXPECT_NEAR(f.rates[1], 1, 1e-12);
  EXPECT_NEAR(f.rates[0], 11.0 / 3.0, 1e-12);
  FairShare none = MaxMinFairRates({1}, {VirtualFlow{}});
  EXPECT_TRUE(std::isinf(none.rates[0]));
}

TEST(OnOffFairRatesTest, WithoutComputeItIsMaxMinFair) {
  const std::vector<double> cap = {10, 2};
  const std::vector<VirtualFlow> flows = {VirtualFlow{{{0, 1.0}}},
                                          VirtualFlow{{{0, 1.0}, {1, 1.0}}}};
  const FairShare mm = MaxMinFairRates(cap, flows);
  const OnOffShare oo =
      OnOffFairRates(cap, {OnOffJob{flows[0], 1.0, 0.0}, OnOffJob{flows[1], 1.0, 0.0}});
  for (int j = 0; j < 2; ++j) {
    EXPECT_NEAR(oo.rates[j], mm.rates[j], 1e-6);
    EXPECT_NEAR(oo.active_fraction[j], 1.0, 1e-12);
    EXPECT_EQ(oo.bottleneck[j], mm.bottleneck[j]);
  }
}

TEST(OnOffFairRatesTest, JobsThatMostlyComputeBurstAtLineRate) {
  // Two jobs on a 10 Gbps link, 1 Gbit per iteration and 1 s of compute: at λ = 10 each has a
  // mean rate of 1 / (1 + 0.1) = 0.909 Gbps, together far below 10: both burst at 10 Gbps.
  const OnOffShare s = OnOffFairRates({10}, {OnOffJob{VirtualFlow{{{0, 1.0}}}, 1.0, 1.0},
                                             OnOffJob{VirtualFlow{{{0, 1.0}}}, 1.0, 1.0}});
  EXPECT_NEAR(s.rates[0], 10, 1e-9);
  EXPECT_NEAR(s.rates[1], 10, 1e-9);
  EXPECT_NEAR(s.active_fraction[0], 0.1 / 1.1, 1e-12);
  EXPECT_EQ(s.bottleneck[0], 0);  // its burst cap is the link
}

TEST(OnOffFairRatesTest, MeanLoadSaturatesTheLink) {
  // Ten jobs, 1 Gbit per iteration and 0.1 s compute, on a 10 Gbps link: the mean load
  // 10 / (0.1 + 1/λ) reaches 10 at λ = 1/0.9 Gbps (each job's mean rate is 1 Gbps).
  std::vector<OnOffJob> jobs(10, OnOffJob{VirtualFlow{{{0, 1.0}}}, 1.0, 0.1});
  const OnOffShare s = OnOffFairRates({10}, jobs);
  for (int j = 0; j < 10; ++j) {
    EXPECT_NEAR(s.rates[j], 1 / 0.9, 1e-6);
    EXPECT_NEAR(s.active_fraction[j], 0.9, 1e-6);
  }
  // A job that also crosses a 0.5 Gbps link freezes there; the others share what it leaves.
  jobs[0].flow.coefficients.push_back({1, 1.0});
  const OnOffShare t = OnOffFairRates({10, 0.5}, jobs);
  EXPECT_NEAR(t.rates[0], 0.5, 1e-9);
  EXPECT_EQ(t.bottleneck[0], 1);
  const double mean0 = 1 / (0.1 + 1 / 0.5);
  double load = mean0;
  for (int j = 1; j < 10; ++j) load += 1 / (0.1 + 1 / t.rates[j]);
  EXPECT_NEAR(load, 10, 1e-6);
  EXPECT_GT(t.rates[1], 1 / 0.9);
}

TEST(OnOffFairRatesTest, PrivateLimitsAndUnboundedJobs) {
  const OnOffShare s = OnOffFairRates(
      {100}, {OnOffJob{VirtualFlow{{{0, 2.0}}, 5.0}, 1.0, 0.5}, OnOffJob{VirtualFlow{}, 1.0, 0.5}});
  EXPECT_NEAR(s.rates[0], 5, 1e-12);
  EXPECT_EQ(s.bottleneck[0], -1);
  EXPECT_TRUE(std::isinf(s.rates[1]));
  EXPECT_DOUBLE_EQ(s.active_fraction[1], 0);
}

TEST(FlowEvaluatorTest, TwoJobsShareTheirCommonLinkFairly) {
  PlanningInput in = Star(10, 100, 1);
  in.jobs.push_back(JobInput{8, fixtures::PsJobSpec("k", {"W1"}, {"PS"})});
  core::Plan plan;
  plan.jobs = {StarPlan(false)};
  core::JobPlan other;
  other.job_id = 8;
  other.ps_shares = {{"PS", 1.0}};
  other.flows.push_back(core::FlowPlan{"W1", "PS", "PS", {"W1", "S", "PS"}});
  plan.jobs.push_back(other);
  auto ev = EvaluatePlan(in, plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  // Arc S->PS (10) carries 2 streams of job 7 and 1 of job 8; W1->S carries one of each.
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 10.0 / 3.0, 1e-9);
  EXPECT_NEAR(ev->jobs[1].rate_gbps, 10.0 / 3.0, 1e-9);
  auto net = Network::Create(in);
  EXPECT_TRUE(FlowEvaluator(**net).CapacityViolations(*ev).empty());
}

}  // namespace
}  // namespace inac::scheduler
