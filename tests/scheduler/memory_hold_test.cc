// One hold-time model for the grant and the rate cap (the controller's
// ComputePlan, which `inac plan` also runs), the simulator's straggler model, and ESA against
// ATP and SwitchML under stragglers.
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/contention.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/sim/simulator.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"

namespace inac::scheduler {
namespace {

// Hold by hand. A job aggregating at s1 whose aggregator path s1 -> ps is one link of the
// default latency 1 us: ps_rtt = 2 x 1 + host turnaround 2 = 4 us; skew 2 us. So esa holds
// 2 us, atp and switchml 2 + 4 = 6 us. With exponential stragglers of mean 100 us and 2 workers
// the range |X1 - X2| is exponential with mean 100 us (memoryless), so every policy holds about
// 100 us more, and a preempted chunk always still waits for its one other fragment (loss 1).
TEST(MemoryHoldTest, HoldTimeByHand) {
  core::Topology t = fixtures::SingleSwitch({.switch_id = "s1",
                                             .hosts = 3,
                                             .aggregators = 100,
                                             .processing_gbps = 400,
                                             .link_gbps = 100});
  core::Graph graph(t);
  core::JobPlan job;
  job.job_id = 1;
  job.flows = {core::FlowPlan{.worker = "h1",
                              .ps = "h3",
                              .aggregation_node = "s1",
                              .path = {"h1", "s1"},
                              .fraction = 1},
               core::FlowPlan{.worker = "h2",
                              .ps = "h3",
                              .aggregation_node = "s1",
                              .path = {"h2", "s1"},
                              .fraction = 1}};
  job.aggregator_paths = {
      core::AggregatorPlan{.switch_id = "s1", .ps = "h3", .path = {"s1", "h3"}}};
  MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  MemoryPlannerOptions atp{.policy = MemoryPolicy::kAtp};
  EXPECT_DOUBLE_EQ(GrantHoldUs(graph, job, "s1", esa), 2);
  EXPECT_DOUBLE_EQ(GrantHoldUs(graph, job, "s1", atp), 6);
  // Window at 100 Gbps for 2 us: 100 * 2 * 125 = 25,000 B = 100.8 aggregators of 248 B -> 101;
  // those 101 sustain 101 * 248 / (2 * 125) = 100.19 Gbps >= 100.
  EXPECT_EQ(WindowAggregators(100, 2, 248), 101);
  EXPECT_GE(MemoryRateCapGbps(101, 2, 248), 100);

  esa.timing.stragglers = {.distribution = StragglerDistribution::kExponential, .spread_us = 100};
  const AggregationTiming timing = TimingAt(graph, job, "s1", esa.timing);
  EXPECT_NEAR(timing.spread_us, 102, 5);  // 4096 samples: standard error 100 / 64 us
  EXPECT_DOUBLE_EQ(timing.ps_rtt_us, 4);
  EXPECT_DOUBLE_EQ(timing.remaining_at_preemption, 1);
  EXPECT_DOUBLE_EQ(HoldTimeUs(MemoryPolicy::kAtp, timing), timing.spread_us + 4);
}

TEST(MemoryHoldTest, StragglerSamplesAreSeededAndMatchTheDistribution) {
  const StragglerModel exp8{.distribution = StragglerDistribution::kExponential, .spread_us = 10};
  const ChunkArrivalStats a = SampleChunkArrivals(exp8, 8);
  const ChunkArrivalStats b = SampleChunkArrivals(exp8, 8);
  EXPECT_EQ(a.mean_range_us, b.mean_range_us);  // deterministic
  // Exponential, n = 8: the other 7 offsets above the first are iid exponential (memoryless), so
  // E[range] = 10 x H_7 = 25.93 us and the hold-weighted fraction still to come is
  // E[o - first] / E[range] = 1 / H_7 = 0.386.
  EXPECT_NEAR(a.mean_range_us, 25.93, 0.8);
  EXPECT_NEAR(a.remaining_at_preemption, 0.386, 0.02);
  StragglerModel other_seed = exp8;
  other_seed.seed = 2;
  EXPECT_NE(SampleChunkArrivals(other_seed, 8).mean_range_us, a.mean_range_us);
  // Uniform on [0, 10], n = 3: E[range] = 10 x (n - 1) / (n + 1) = 5 us.
  const ChunkArrivalStats u =
      SampleChunkArrivals({.distribution = StragglerDistribution::kUniform, .spread_us = 10}, 3);
  EXPECT_NEAR(u.mean_range_us, 5, 0.2);
  // No stragglers: nothing added, the even-spread loss of 1/2.
  const ChunkArrivalStats none = SampleChunkArrivals({}, 8);
  EXPECT_EQ(none.mean_range_us, 0);
  EXPECT_EQ(none.remaining_at_preemption, 0.5);
}

core::Job DemoJob(core::JobId id, std::vector<std::string> workers, const std::string& ps) {
  core::Job job;
  job.id = id;
  job.spec = fixtures::PsJobSpec(
      absl::StrCat("j", id), std::move(workers), {ps},
      {.gradient_bytes = 100'000'000, .compute_ms = 100, .iterations = 10, .batch_size = 32});
  return job;
}

// The demo fabric (`inac serve --demo`: fat-tree k = 4, 100 Gbps, 20,000 aggregators, INA on
// the edge switches). One job alone: ESA grants the window sized for the line rate with the
// 2 us hold, and the re-scoring uses that same hold, so the job runs at the line rate (the
// audit found 5-6 Gbps: the cap divided by the route's full round trip), and comm_ms is the
// gradient over that rate. `inac plan` runs this same ComputePlan with the same defaults.
TEST(MemoryHoldTest, DemoFabricRateIsTheLineRateAndCommMsIsGradientOverRate) {
  core::GeneratorOptions gen;
  gen.ina = *core::ParseInaPlacement("tor");
  const core::Topology t = *core::GenerateFatTree(4, gen);
  PlanRequest request;
  request.topology = &t;
  request.jobs = {DemoJob(1, {"h0_0_0", "h0_0_1", "h1_0_0"}, "h2_0_0")};
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  const core::JobPlan& jp = out->plan.jobs.at(0);
  ASSERT_FALSE(jp.aggregators.empty());
  EXPECT_NEAR(jp.rate_gbps, 100, 1e-6) << out->reports.at(1).evaluation.bottleneck;
  // comm = max(up, down) = G / rate: 100 MB x 8 / 100 Gbps = 8 ms.
  EXPECT_NEAR(jp.comm_ms, 100'000'000 * 8.0 / (jp.rate_gbps * 1e6), 1e-6);
  EXPECT_NEAR(jp.comm_ms, 8, 1e-6);
  // The audit's bug, kept visible: the same plan re-scored with the route's round trip as the
  // hold (EvaluatePlan without the memory model) is capped far below the line rate.
  PlanningInput input;
  input.topology = t;
  input.jobs = {JobInput{1, request.jobs[0].spec}};
  auto rtt_scored = EvaluatePlan(input, out->plan);
  ASSERT_TRUE(rtt_scored.ok()) << rtt_scored.status();
  EXPECT_LT(rtt_scored->jobs[0].rate_gbps, 20);
  const core::Graph graph(t);
  for (const auto& [sw, granted] : jp.aggregators) {
    const double hold = GrantHoldUs(graph, jp, sw, MemoryPlannerOptions{});
    EXPECT_DOUBLE_EQ(hold, 2);  // esa: the skew only
    EXPECT_GE(MemoryRateCapGbps(granted, hold, 248), 100) << sw;
  }
}

// Grant and cap agree when memory is scarce: with 20 aggregators per switch an esa/atp job gets 20
// on its aggregating switch, which sustain 20 x 248 / (hold x 125) Gbps -- exactly the rate the
// re-scoring gives (a stream of fraction 1 there), not less.
TEST(MemoryHoldTest, ScarceGrantCapsTheRateAtWhatItSupports) {
  for (const char* policy : {"esa", "atp", "switchml"}) {
    SCOPED_TRACE(policy);
    core::GeneratorOptions gen;
    gen.ina = *core::ParseInaPlacement("tor");
    gen.aggregators = 20;
    const core::Topology t = *core::GenerateFatTree(4, gen);
    PlanRequest request;
    request.topology = &t;
    request.options.memory_policy = policy;
    // One aggregating switch (grid's plan): the arithmetic of one grant. The default, `trees`,
    // charges memory in its LP and spreads the job over more switches when memory is scarce
    // (routing_trees_test.cc).
    request.options.algorithm = "grid";
    request.jobs = {DemoJob(1, {"h0_0_0", "h0_0_1"}, "h1_0_0")};
    auto out = ComputePlan(request);
    ASSERT_TRUE(out.ok()) << out.status();
    const core::JobPlan& jp = out->plan.jobs.at(0);
    if (std::string(policy) == "switchml") {
      // A static pool is the whole window or nothing (SwitchML's admission): 20 < the window,
      // so no pool, the job falls back to its PS and no memory caps it.
      EXPECT_TRUE(jp.aggregators.empty());
      EXPECT_EQ(out->reports.at(1).evaluation.bottleneck.rfind("memory", 0), std::string::npos);
      continue;
    }
    ASSERT_EQ(jp.aggregators.size(), 1u) << policy;
    const auto& [sw, granted] = *jp.aggregators.begin();
    EXPECT_EQ(granted, 20);
    MemoryPlannerOptions mem;
    mem.policy = *ParseMemoryPolicy(policy);
    const double cap = MemoryRateCapGbps(granted, GrantHoldUs(core::Graph(t), jp, sw, mem), 248);
    ASSERT_LT(cap, 100);
    EXPECT_NEAR(jp.rate_gbps, cap, 1e-9 * cap) << policy;
    EXPECT_EQ(out->reports.at(1).evaluation.bottleneck, "memory " + sw) << policy;
  }
}

// A straggler scenario on one ToR: 12 jobs of 8 workers at t = 0 on 2,000 aggregators,
// exponential arrival offsets of mean 100 us per worker and chunk.
std::vector<TraceJob> StragglerTrace() {
  std::vector<TraceJob> jobs;
  for (int k = 0; k < 12; ++k) {
    TraceJob j;
    j.name = absl::StrCat("j", k);
    j.gradient_bytes = (k % 4 + 1) * 50'000'000;
    j.compute_ms = 100;
    j.workers = 8;
    j.iterations = 50;
    jobs.push_back(j);
  }
  return jobs;
}

SimResult RunSim(MemoryPolicy policy, double spread_us, int64_t aggregators) {
  const core::Topology t = fixtures::SingleSwitch({.switch_id = "tor",
                                                   .hosts = 64,
                                                   .aggregators = aggregators,
                                                   .processing_gbps = 6400,
                                                   .link_gbps = 100});
  auto routing = MakeRoutingAlgorithm(policy == MemoryPolicy::kNoIna ? "no_ina" : "atp");
  EXPECT_TRUE(routing.ok());
  SimOptions o;
  o.policy = policy;
  o.routing = routing->get();
  o.timing.stragglers = {.distribution = StragglerDistribution::kExponential,
                         .spread_us = spread_us};
  auto r = Simulate(t, StragglerTrace(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(MemoryHoldTest, StragglerSimulationIsDeterministic) {
  const SimResult a = RunSim(MemoryPolicy::kEsa, 100, 2000);
  const SimResult b = RunSim(MemoryPolicy::kEsa, 100, 2000);
  ASSERT_EQ(a.jobs.size(), 12u);
  EXPECT_EQ(a.summary.mean_jct_s, b.summary.mean_jct_s);
  EXPECT_EQ(a.summary.preemptions, b.summary.preemptions);
  EXPECT_GT(a.summary.preemptions, 0);
  // Stragglers lengthen the hold, so the same jobs take longer than without them.
  EXPECT_GT(a.summary.mean_jct_s, RunSim(MemoryPolicy::kEsa, 0, 2000).summary.mean_jct_s);
}

// Where ESA's paper says it helps (stragglers, scarce memory): ESA at least as good as ATP, and
// INA at all better than none.
TEST(MemoryHoldTest, EsaAtLeastAtpUnderStragglersWithScarceMemory) {
  const double esa = RunSim(MemoryPolicy::kEsa, 100, 2000).summary.mean_jct_s;
  const double atp = RunSim(MemoryPolicy::kAtp, 100, 2000).summary.mean_jct_s;
  const double none = RunSim(MemoryPolicy::kNoIna, 100, 2000).summary.mean_jct_s;
  EXPECT_LE(esa, atp);
  EXPECT_LT(esa, none);
}

// SwitchML as the model says: a static pool has no hash collision and no preemption, so when
// every job's window fits (ample memory, no stragglers) it is at least as good as ESA; when the
// windows do not fit (stragglers make each window larger than the memory) jobs without a pool
// fall back to the PS entirely and ESA's sharing wins.
TEST(MemoryHoldTest, SwitchMlBeatsEsaOnlyWhenPoolsFit) {
  const double sml_fit = RunSim(MemoryPolicy::kSwitchMl, 0, 20000).summary.mean_jct_s;
  const double esa_fit = RunSim(MemoryPolicy::kEsa, 0, 20000).summary.mean_jct_s;
  EXPECT_LE(sml_fit, esa_fit);
  const double sml_scarce = RunSim(MemoryPolicy::kSwitchMl, 100, 2000).summary.mean_jct_s;
  const double esa_scarce = RunSim(MemoryPolicy::kEsa, 100, 2000).summary.mean_jct_s;
  EXPECT_LT(esa_scarce, sml_scarce);
}

// The preemption loss is the straggler model's, and lowers ESA's unaggregated fraction.
TEST(MemoryHoldTest, PreemptionLossFollowsTheArrivals) {
  const std::vector<ChunkLoad> half = {
      {.chunks_per_s = 1e6, .hold_s = 1e-4, .priority = 2},
      {.chunks_per_s = 1e6, .hold_s = 1e-4, .priority = 1, .preemption_loss = 0.5}};
  std::vector<ChunkLoad> tail = half;
  tail[1].preemption_loss = 0.25;
  const SwitchContention h = HashedContention(MemoryPolicy::kEsa, 1000, half);
  const SwitchContention s = HashedContention(MemoryPolicy::kEsa, 1000, tail);
  EXPECT_GT(h.jobs[1].preempted, 0);
  EXPECT_LT(s.jobs[1].unaggregated, h.jobs[1].unaggregated);
}

}  // namespace
}  // namespace inac::scheduler
