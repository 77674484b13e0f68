// The baselines as their papers define them (docs/routing.md section 3): load-balanced path choice,
// two-level ATP, ATP sharded over the job's PSs; and honest LP bounds when a solve stops on its
// time limit.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "core/generators.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/planner.h"
#include "scheduler/routing/baselines.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/routing/routing_lp.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/scheduler/routing_fixtures.h"

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

core::Host Host(const std::string& id) {
  core::Host h;
  h.id = id;
  return h;
}

core::Link L(const std::string& a, const std::string& b, double gbps) {
  core::Link l;
  l.id = core::DefaultLinkId(a, b);
  l.a = a;
  l.b = b;
  l.gbps = gbps;
  return l;
}

// GRID's setting (bench/routing_bench.cc): fat-tree k=8 with 6 hosts per edge switch, 100 Gbps
// links, PS ingress 100 Gbps, switch capacity uniform in [100, 3200] Gbps, one PS, k = 8 paths;
// `workers` random hosts and the next host as the PS (the bench's seeded shuffle).
PlanningInput GridSetting(uint64_t seed, const std::string& ina, int workers) {
  core::GeneratorOptions o;
  o.seed = seed;
  o.ina = *core::ParseInaPlacement(ina);
  o.link_gbps = 100;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  PlanningInput in;
  in.topology = *core::GenerateFatTree(8, o, 6);
  in.seed = seed;
  in.options.paths = 8;
  std::mt19937_64 rng(seed * 7919 + workers);
  std::vector<std::string> hosts;
  for (const core::Host& h : in.topology.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  core::JobSpec s =
      fixtures::PsJobSpec("grid", std::vector<std::string>(hosts.begin(), hosts.begin() + workers),
                          {hosts[workers]}, {.iterations = 100});
  for (core::Host& h : in.topology.hosts) {
    if (h.id == hosts[workers]) h.ingress_gbps = 100;
  }
  in.jobs.push_back(JobInput{1, s});
  return in;
}

// Three racks under one spine SP (not INA): W1-W3 on T1, W4-W5 on T2, W6 and the PS on T3; every
// link 10 Gbps (so the PS's ingress is 10); T1 and T2 aggregate 100 Gbps, T3 `t3_gbps`.
PlanningInput ThreeRacks(double t3_gbps) {
  PlanningInput in;
  core::Topology& t = in.topology;
  t.switches = {Sw("T1", 100), Sw("T2", 100), Sw("T3", t3_gbps), Sw("SP")};
  for (const char* h : {"W1", "W2", "W3", "W4", "W5", "W6", "PS"}) t.hosts.push_back(Host(h));
  t.links = {L("T1", "SP", 10), L("T2", "SP", 10), L("T3", "SP", 10), L("W1", "T1", 10),
             L("W2", "T1", 10), L("W3", "T1", 10), L("W4", "T2", 10), L("W5", "T2", 10),
             L("W6", "T3", 10), L("PS", "T3", 10)};
  in.jobs.push_back(
      JobInput{1, fixtures::PsJobSpec("racks", {"W1", "W2", "W3", "W4", "W5", "W6"}, {"PS"})});
  return in;
}

const core::AggregatorPlan* StreamOf(const core::JobPlan& jp, const std::string& sw) {
  for (const core::AggregatorPlan& a : jp.aggregator_paths) {
    if (a.switch_id == sw) return &a;
  }
  return nullptr;
}

// The plan decodes back, and the evaluator scores the decoded plan exactly as the routed one.
void ExpectRoundTrip(const PlanningInput& in, const PlannedRouting& planned) {
  auto evaluation = EvaluatePlan(in, planned.plan);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  for (size_t j = 0; j < planned.plan.jobs.size(); ++j) {
    EXPECT_NEAR(evaluation->jobs[j].rate_gbps, planned.plan.jobs[j].rate_gbps, 1e-9);
  }
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  EXPECT_EQ(FlowEvaluator(**net).CapacityViolations(planned.evaluation),
            std::vector<std::string>{});
}

// --- Load-balanced path choice. ---

// Two equal paths A -> B1|B2 -> C -> PS share the PS's access arc, the most loaded one: comparing
// only the largest utilisation ties them and always picked the first (the audit's finding); the
// sorted comparison sends the second flow over B2.
TEST(BalancedPathTest, ASharedBottleneckArcDoesNotHideTheOtherArcs) {
  PlanningInput in;
  core::Topology& t = in.topology;
  t.switches = {Sw("A"), Sw("B1"), Sw("B2"), Sw("C")};
  for (const char* h : {"W1", "W2", "PS"}) t.hosts.push_back(Host(h));
  t.links = {L("W1", "A", 10), L("W2", "A", 10), L("A", "B1", 10), L("A", "B2", 10),
             L("B1", "C", 10), L("B2", "C", 10), L("PS", "C", 10)};
  in.jobs.push_back(JobInput{1, fixtures::PsJobSpec("two", {"W1", "W2"}, {"PS"})});
  auto planned = PlanRouting("no_ina", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  std::set<std::string> middles;
  for (const core::FlowPlan& f : planned->plan.jobs[0].flows) {
    ASSERT_EQ(f.path.size(), 5u);  // W, A, B?, C, PS
    middles.insert(f.path[2]);
  }
  EXPECT_EQ(middles, (std::set<std::string>{"B1", "B2"}));
  EXPECT_NEAR(planned->plan.jobs[0].rate_gbps, 5.0, 1e-9);  // the PS link: 2 flows into 10
}

// The audit: no_ina sent all 87 cross-pod flows of GRID's setting through one core switch. Fixed
// instance: seed 1, 100 workers, edge INA. With balanced choice over the equal-cost paths every
// core switch carries at most one flow more than an even spread.
TEST(BalancedPathTest, NoInaSpreadsCrossPodFlowsOverTheCoreSwitches) {
  PlanningInput in = GridSetting(1, "tor", 100);
  auto planned = PlanRouting("no_ina", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  std::map<std::string, int> per_core;
  int cross_pod = 0;
  for (const core::FlowPlan& f : planned->plan.jobs[0].flows) {
    bool crosses = false;
    for (const std::string& node : f.path) {
      if (node[0] == 'c') {  // core switches are c<i>
        ++per_core[node];
        crosses = true;
      }
    }
    cross_pod += crosses;
  }
  ASSERT_GT(cross_pod, 80);
  EXPECT_EQ(per_core.size(), 16u) << "k=8: 16 core switches";
  const int even = (cross_pod + 15) / 16;
  for (const auto& [core_switch, n] : per_core) EXPECT_LE(n, even + 1) << core_switch;
}

// --- Two-level ATP. ---

// ThreeRacks with ample switch capacity, by hand: ATP aggregates W1-W3 at T1 and W4-W5 at T2;
// T3 re-aggregates both ToR streams with W6, so one stream reaches the PS (λ <= 10). SP -> T3
// carries the two ToR streams: 2λ <= 10, λ = 5 (T3 processes 3λ = 15 <= 100). Single-level
// (the data plane's form) sends three streams into the PS's 10 Gbps: λ = 10/3.
TEST(AtpTwoLevelTest, PsTorReaggregatesTheTorStreams) {
  PlanningInput in = ThreeRacks(100);
  auto planned = PlanRouting("atp", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_NEAR(jp.rate_gbps, 5.0, 1e-6);
  for (const char* tor : {"T1", "T2"}) {
    const core::AggregatorPlan* a = StreamOf(jp, tor);
    ASSERT_NE(a, nullptr) << tor;
    EXPECT_EQ(a->path, (std::vector<std::string>{tor, "SP", "T3"})) << "ends at T3: re-aggregated";
  }
  ASSERT_NE(StreamOf(jp, "T3"), nullptr);
  EXPECT_EQ(StreamOf(jp, "T3")->path, (std::vector<std::string>{"T3", "PS"}));
  ExpectRoundTrip(in, *planned);

  in.options.reaggregation = false;
  auto single = PlanRouting("atp", in);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_NEAR(single->plan.jobs[0].rate_gbps, 10.0 / 3.0, 1e-6);
  for (const core::AggregatorPlan& a : single->plan.jobs[0].aggregator_paths) {
    EXPECT_EQ(a.path.back(), "PS") << a.switch_id;
  }
}

// ThreeRacks with T3 at 7 Gbps, by hand: at rate λ, T3 first aggregates W6 (λ), then whole ToR
// streams in ToR order while they fit. λ = 5 would need 3λ = 15 > 7. With one ToR stream (T1's)
// re-aggregated: T3 2λ <= 7, PS 2 streams 2λ <= 10, SP -> T3 2λ <= 10: λ <= 3.5. Above 3.5 no
// ToR stream fits, three streams reach the PS and λ <= 10/3 < 3.5. So λ = 3.5, T1 via T3, T2 to
// the PS.
TEST(AtpTwoLevelTest, PsTorCapacityLimitsTheReaggregatedStreams) {
  PlanningInput in = ThreeRacks(7);
  auto planned = PlanRouting("atp", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_NEAR(jp.rate_gbps, 3.5, 1e-6);
  ASSERT_NE(StreamOf(jp, "T1"), nullptr);
  ASSERT_NE(StreamOf(jp, "T2"), nullptr);
  EXPECT_EQ(StreamOf(jp, "T1")->path.back(), "T3");
  EXPECT_EQ(StreamOf(jp, "T2")->path.back(), "PS");
  ExpectRoundTrip(in, *planned);
}

// The audit: two-level ATP on balanced paths gives 12.5 Gbps on every seed of GRID's setting
// (a) with 100 workers: 31 ToR streams reach the PS's ToR over its 4 down links, at most 8 on one
// (100 / 8 = 12.5); the PS then receives one stream. Before: 3.1-3.2 (one stream per ToR into the
// PS) or 11.1 on unbalanced paths.
TEST(AtpTwoLevelTest, GridSettingAReachesTwelvePointFive) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(seed);
    PlanningInput in = GridSetting(seed, "tor", 100);
    auto planned = PlanRouting("atp", in);
    ASSERT_TRUE(planned.ok()) << planned.status();
    EXPECT_NEAR(planned->plan.jobs[0].rate_gbps, 12.5, 1e-6);
    ExpectRoundTrip(in, *planned);
  }
}

// What deploys plans (the planner of the controller and `inac plan`) plans two-level ATP since
// the data plane's intents program chains (core::DeriveSwitchIntents): the
// ToRs' streams end at the PS's ToR, which takes each as one input.
TEST(AtpTwoLevelTest, ThePlannerDeploysTwoLevelAtp) {
  PlanningInput in = ThreeRacks(100);
  PlanRequest request;
  request.topology = &in.topology;
  core::Job job;
  job.id = 1;
  job.spec = in.jobs[0].spec;
  request.jobs = {job};
  request.options.algorithm = "atp";
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->plan.jobs.size(), 1u);
  std::set<std::string> parents;
  for (const core::AggregatorPlan& a : out->plan.jobs[0].aggregator_paths) {
    if (a.path.back() != "PS") parents.insert(a.path.back());
  }
  EXPECT_FALSE(parents.empty()) << "two-level: some stream re-aggregated";
  // The parent takes the child's aggregate as an input (an ina_worker entry for a switch).
  int switch_inputs = 0;
  for (const core::SwitchIntent& si : out->intents) {
    for (const auto& input : si.inputs) {
      for (const core::Switch& sw : in.topology.switches) {
        switch_inputs += input.source_address == core::NodeAddress(in.topology, sw.id);
      }
    }
  }
  EXPECT_GT(switch_inputs, 0);
  // Above single-level ATP's 10/3, at most two-level ATP's 5 (memory caps may lower it).
  EXPECT_GT(out->plan.jobs[0].rate_gbps, 10.0 / 3.0 + 1e-6);
  EXPECT_LE(out->plan.jobs[0].rate_gbps, 5.0 + 1e-6);
}

TEST(AtpTwoLevelTest, ReaggregationChainsMustReachThePs) {
  PlanningInput in = ThreeRacks(100);
  auto planned = PlanRouting("atp", in);
  ASSERT_TRUE(planned.ok());
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  FlowEvaluator evaluator(**net);
  core::JobPlan jp = planned->plan.jobs[0];
  // T3's own stream re-pointed into T1, whose stream ends at T3: a cycle.
  for (core::AggregatorPlan& a : jp.aggregator_paths) {
    if (a.switch_id == "T3") a.path = {"T3", "SP", "T1"};
  }
  auto bad = evaluator.FromJobPlan(jp);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  // A stream that ends at a switch aggregating nothing for the PS.
  jp = planned->plan.jobs[0];
  for (core::AggregatorPlan& a : jp.aggregator_paths) {
    if (a.switch_id == "T1") a.path = {"T1", "SP"};
  }
  EXPECT_EQ(evaluator.FromJobPlan(jp).status().code(), absl::StatusCode::kInvalidArgument);
}

// A switch that loses its memory falls back to the PS; the streams it re-aggregated continue on
// its path to the PS, and the plan still decodes.
TEST(AtpTwoLevelTest, FallBackOfTheReaggregatingSwitchKeepsItsChildren) {
  PlanningInput in = ThreeRacks(100);
  auto planned = PlanRouting("atp", in);
  ASSERT_TRUE(planned.ok());
  core::JobPlan jp = planned->plan.jobs[0];
  core::Graph graph(in.topology);
  FallBackToPs(graph, "T3", &jp);
  EXPECT_EQ(StreamOf(jp, "T3"), nullptr);
  ASSERT_NE(StreamOf(jp, "T1"), nullptr);
  EXPECT_EQ(StreamOf(jp, "T1")->path, (std::vector<std::string>{"T1", "SP", "T3", "PS"}));
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  auto routed = FlowEvaluator(**net).FromJobPlan(jp);
  ASSERT_TRUE(routed.ok()) << routed.status();
  // Three streams (T1, T2) plus W6 raw into the PS's 10 Gbps.
  EXPECT_NEAR(SingleJobRate(ComputeUsage(**net, *routed), (*net)->residuals()), 10.0 / 3.0, 1e-9);
}

// --- ATP sharded over the job's PSs. ---

// InArt's two-PS example (examples/inart-two-ps), by hand, shares 1/2 each. Level 1: each ToR's 3
// workers need 3λ <= 6 of it; above λ = 2 they spill f1 = 2/λ. T1 (PS1's ToR) has nothing left
// for T2's stream toward PS1 (and conversely), so each PS receives both ToRs' streams plus the
// spilled chunks unaggregated: PS1 ingress 1/2 · (2·f1 + 6·(1 - f1)) · λ = 3λ - 4 <= 4, λ = 8/3
// -- InArt's rate on this topology, where single-PS ATP gets 2.
TEST(AtpShardedTest, InArtExampleByHand) {
  PlanningInput in = testing::LoadExample("inart-two-ps");
  auto planned = PlanRouting("atp_sharded", in);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const core::JobPlan& jp = planned->plan.jobs[0];
  EXPECT_NEAR(jp.rate_gbps, 8.0 / 3.0, 1e-6);
  EXPECT_EQ(jp.ps_shares, (std::map<std::string, double>{{"PS1", 0.5}, {"PS2", 0.5}}));
  ExpectRoundTrip(in, *planned);
}

// InArt's setting (fat-tree k=6, 4 PSs, links and PS ingress 20, switch capacity 9): the sharded
// ATP uses the same PSs as inart, single-PS ATP one of them, and sharding is faster.
TEST(AtpShardedTest, SameParameterServersAsInArt) {
  core::GeneratorOptions o;
  o.seed = 2;
  o.link_gbps = 20;
  o.processing_gbps_lo = 9;
  o.processing_gbps_hi = 9;
  PlanningInput in;
  in.topology = *core::GenerateFatTree(6, o);
  std::mt19937_64 rng(2 * 7919 + 20);
  std::vector<std::string> hosts;
  for (const core::Host& h : in.topology.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  std::vector<std::string> ps(hosts.begin() + 20, hosts.begin() + 24);
  for (core::Host& h : in.topology.hosts) {
    if (std::find(ps.begin(), ps.end(), h.id) != ps.end()) h.ingress_gbps = 20;
  }
  in.jobs.push_back(
      JobInput{1, fixtures::PsJobSpec(
                      "inart", std::vector<std::string>(hosts.begin(), hosts.begin() + 20), ps)});
  auto sharded = PlanRouting("atp_sharded", in);
  auto single = PlanRouting("atp", in);
  auto inart = PlanRouting("inart", in);
  ASSERT_TRUE(sharded.ok() && single.ok() && inart.ok());
  std::set<std::string> job_ps(ps.begin(), ps.end()), sharded_ps, inart_ps;
  for (const auto& [id, x] : sharded->plan.jobs[0].ps_shares) {
    sharded_ps.insert(id);
    EXPECT_NEAR(x, 0.25, 1e-12) << id;
  }
  for (const auto& [id, x] : inart->plan.jobs[0].ps_shares) inart_ps.insert(id);
  EXPECT_EQ(sharded_ps, job_ps);
  EXPECT_TRUE(std::includes(job_ps.begin(), job_ps.end(), inart_ps.begin(), inart_ps.end()));
  ASSERT_EQ(single->plan.jobs[0].ps_shares.size(), 1u);
  EXPECT_TRUE(job_ps.count(single->plan.jobs[0].ps_shares.begin()->first));
  EXPECT_GT(sharded->plan.jobs[0].rate_gbps, single->plan.jobs[0].rate_gbps);
  ExpectRoundTrip(in, *sharded);
}

// --- Honest LP bounds. ---

// max x + y  s.t.  x + 2y <= 4,  3x + y <= 6,  x, y >= 0: optimum 2.8 at (1.6, 1.2), duals
// (0.4, 0.2). Weak duality: every multiplier vector bounds the optimum from above; the optimal
// duals give it exactly.
TEST(LagrangianBoundTest, AnyMultipliersBoundTheOptimumFromAbove) {
  lp::LinearProgram p;
  p.SetMaximize(true);
  int x = p.AddColumn(0, lp::kInfinity, 1);
  int y = p.AddColumn(0, lp::kInfinity, 1);
  p.AddRow(-lp::kInfinity, 4, {x, y}, {1, 2});
  p.AddRow(-lp::kInfinity, 6, {x, y}, {3, 1});
  auto solved = lp::SolveLp(p, 0);
  ASSERT_TRUE(solved.ok());
  ASSERT_EQ(solved->status, lp::SolveStatus::kOptimal);
  EXPECT_NEAR(solved->objective, 2.8, 1e-9);
  auto exact = lp::LagrangianBound(p, {0.4, 0.2});
  ASSERT_TRUE(exact.has_value());
  EXPECT_NEAR(*exact, 2.8, 1e-6);
  EXPECT_GE(*exact, 2.8);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int i = 0; i < 200; ++i) {
    auto b = lp::LagrangianBound(p, {u(rng), u(rng)});
    // The rows imply x <= 2 and y <= 2, so no multiplier leaves the bound infinite.
    ASSERT_TRUE(b.has_value());
    EXPECT_GE(*b, 2.8 - 1e-12);
  }
}

// The primal simplex (grid-split's LPs) reaches the optimum value CLP's automatic choice
// does, on random max-min programs shaped like the routing LP (λ <= each group's sum, capacity
// rows over shared columns), and the second stage keeps it.
TEST(SimplexChoiceTest, PrimalAndAutomaticAgreeOnTheOptimum) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  for (int trial = 0; trial < 20; ++trial) {
    lp::LinearProgram p;
    p.SetMaximize(true);
    const int lambda = p.AddColumn(0, lp::kInfinity, 1);
    const int groups = 6, per = 5, rows = 8;
    std::vector<int> cols;
    for (int g = 0; g < groups; ++g) {
      std::vector<int> members = {lambda};
      std::vector<double> coef = {1};
      for (int k = 0; k < per; ++k) {
        cols.push_back(p.AddColumn(0, lp::kInfinity, 0));
        members.push_back(cols.back());
        coef.push_back(-1);
      }
      p.AddRow(-lp::kInfinity, 0, members, coef);  // λ <= Σ the group's columns
    }
    std::vector<double> cost(cols.size() + 1, 0.0);
    for (int r = 0; r < rows; ++r) {
      std::vector<int> members;
      std::vector<double> coef;
      for (int c : cols) {
        if (u(rng) < 0.4) {
          members.push_back(c);
          coef.push_back(u(rng));
          cost[static_cast<size_t>(c)] += 1;
        }
      }
      if (!members.empty()) p.AddRow(-lp::kInfinity, 1 + 3 * u(rng), members, coef);
    }
    auto automatic = lp::SolveLpThenMinimize(p, cost, 1e-7, 0, {}, lp::Simplex::kAutomatic);
    auto primal = lp::SolveLpThenMinimize(p, cost, 1e-7, 0, {}, lp::Simplex::kPrimal);
    ASSERT_TRUE(automatic.ok() && primal.ok());
    ASSERT_EQ(automatic->first.status, lp::SolveStatus::kOptimal);
    ASSERT_EQ(primal->first.status, lp::SolveStatus::kOptimal);
    EXPECT_NEAR(primal->first.objective, automatic->first.objective,
                1e-7 * std::max(1.0, automatic->first.objective))
        << "trial " << trial;
    ASSERT_FALSE(primal->second_values.empty());
    EXPECT_GE(primal->second_values[static_cast<size_t>(lambda)],
              automatic->first.objective * (1 - 1e-6));
  }
}

// max x  s.t.  x - y <= 1, x, y >= 0 is unbounded: no multiplier may produce a finite bound.
TEST(LagrangianBoundTest, NoBoundForAnUnboundedProgram) {
  lp::LinearProgram p;
  p.SetMaximize(true);
  int x = p.AddColumn(0, lp::kInfinity, 1);
  int y = p.AddColumn(0, lp::kInfinity, 0);
  p.AddRow(-lp::kInfinity, 1, {x, y}, {1, -1});
  for (double v : {0.0, 0.5, 1.0, 2.0}) EXPECT_FALSE(lp::LagrangianBound(p, {v}).has_value());
}

// min 2a + 3b  s.t.  a + b >= 4, a <= 3: optimum 9 at (3, 1); a lower bound from any multipliers.
TEST(LagrangianBoundTest, MinimisationGivesLowerBounds) {
  lp::LinearProgram p;
  p.SetMaximize(false);
  int a = p.AddColumn(0, 3, 2);
  int b = p.AddColumn(0, lp::kInfinity, 3);
  p.AddRow(4, lp::kInfinity, {a, b}, {1, 1});
  auto exact = lp::LagrangianBound(p, {3});
  ASSERT_TRUE(exact.has_value());
  EXPECT_NEAR(*exact, 9, 1e-6);
  EXPECT_LE(*exact, 9);
  for (double v : {0.0, 1.0, 2.0, 5.0}) {
    auto lb = lp::LagrangianBound(p, {v});
    if (lb) {
      EXPECT_LE(*lb, 9 + 1e-12);
    }
  }
}

// A mid-size routing LP (GRID's setting (a), 100 workers: ~7,000 columns, ~0.3 s to solve) with a
// 1 ms limit: the solver stops early, with a primal point far below the optimum (what used to be
// printed as the bound). The reported bound must be absent or above the optimum.
TEST(HonestBoundTest, TimeLimitedLpReportsADualBoundOrNone) {
  PlanningInput in = GridSetting(1, "tor", 100);
  in.options.rounds = 2;
  in.options.lp_time_limit_s = 0;  // no limit
  auto full = PlanRouting("grid", in);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->diagnostics[0].lp_status, "optimal");
  ASSERT_EQ(full->diagnostics[0].lp_bound_source, "lp_optimum");
  const double optimum = *full->plan.jobs[0].lp_bound_gbps;

  // The LP layer itself.
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  PathCache cache((*net)->graph(), in.options.paths);
  std::vector<JobCandidates> one{
      BuildCandidates(**net, cache, 0, PsNodes(**net, 0), {1.0}, in.options.extra_candidates)};
  RoutingLp lp = BuildRoutingLp(**net, (*net)->residuals(), one, true);
  auto stopped = SolveRoutingLp(lp, one, true, 1e-3);
  ASSERT_TRUE(stopped.ok());
  if (stopped->solution.status == lp::SolveStatus::kOptimal) {
    GTEST_SKIP() << "the LP solved within 1 ms: nothing stopped early on this machine";
  }
  if (stopped->bound) {
    EXPECT_GE(*stopped->bound, optimum * (1 - 1e-9));
  }
  if (stopped->solution.best_bound) {
    EXPECT_GE(*stopped->solution.best_bound, optimum * (1 - 1e-9));
  }

  // And what `inac plan` reports.
  in.options.lp_time_limit_s = 1e-3;
  auto limited = PlanRouting("grid", in);
  ASSERT_TRUE(limited.ok()) << limited.status();
  const JobDiagnostics& d = limited->diagnostics[0];
  if (d.lp_status == "optimal") GTEST_SKIP() << "solved within 1 ms";
  const std::optional<double>& bound = limited->plan.jobs[0].lp_bound_gbps;
  if (bound) {
    EXPECT_TRUE(d.lp_bound_source == "dual_bound" || d.lp_bound_source == "egress_bound")
        << d.lp_bound_source;
    EXPECT_GE(*bound, optimum * (1 - 1e-9));
    EXPECT_LE(limited->plan.jobs[0].rate_gbps, *bound);
  } else {
    EXPECT_EQ(d.lp_bound_source, "none");
  }
}

}  // namespace
}  // namespace inac::scheduler
