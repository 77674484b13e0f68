// Invariants of the simulator on random traces (docs/memory.md section 5): aggregators in use never
// exceed A_v, every job completes, results are deterministic for a seed, and no_ina never beats esa
// on mean JCT by more than 1 %.
#include <gtest/gtest.h>

#include "core/generators.h"
#include "scheduler/sim/simulator.h"
#include "tests/scheduler/sim_fixtures.h"

namespace inac::scheduler {
namespace {

struct Case {
  core::Topology topology;
  std::vector<TraceJob> trace;
};

Case RandomCase(uint64_t seed) {
  SplitMix64 rng(seed);
  Case c;
  const int64_t aggregators = 200 + static_cast<int64_t>(rng.Below(3000));
  if (seed % 2 == 0) {
    c.topology = testing::SingleSwitch(aggregators, 16);
  } else {
    core::GeneratorOptions g;
    g.aggregators = aggregators;
    g.processing_gbps_lo = g.processing_gbps_hi = 3200;
    c.topology = *core::GenerateLeafSpine(3, 2, 6, g);
  }
  TraceGeneratorOptions t{
      .arrivals = {.kind = ArrivalProcess::Kind::kPoisson, .rate_per_s = 0.5 + rng.Uniform() * 4},
      .jobs = 6 + static_cast<int>(rng.Below(10)),
      .seed = seed,
      .iterations = 20 + static_cast<int64_t>(rng.Below(60))};
  c.trace = *GenerateTrace(t);
  for (TraceJob& j : c.trace) j.priority = static_cast<int>(rng.Below(2));
  return c;
}

SimResult Simulated(const Case& c, MemoryPolicy policy, PlacementRule placement, uint64_t seed) {
  static const testing::TorAggregationRouting routing;
  SimOptions options;
  options.policy = policy;
  options.routing = &routing;
  options.placement = placement;
  options.seed = seed;
  absl::StatusOr<SimResult> r = Simulate(c.topology, c.trace, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(SimInvariantTest, RandomTraces) {
  const PlacementRule rules[] = {PlacementRule::kShared, PlacementRule::kPack,
                                 PlacementRule::kSpread, PlacementRule::kRandom};
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const Case c = RandomCase(seed);
    const PlacementRule rule = rules[seed % 4];
    std::map<MemoryPolicy, double> mean;
    for (MemoryPolicy p :
         {MemoryPolicy::kNoIna, MemoryPolicy::kSwitchMl, MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
      const SimResult r = Simulated(c, p, rule, seed);
      ASSERT_EQ(r.jobs.size(), c.trace.size());
      for (const SimJobResult& j : r.jobs) {
        EXPECT_GT(j.finish_s, j.arrival_s) << "seed " << seed << " " << j.name;
        EXPECT_GE(j.start_s, j.arrival_s);
        EXPECT_TRUE(std::isfinite(j.jct_s));
      }
      for (const auto& [id, s] : r.summary.switches) {
        EXPECT_LE(s.peak_in_use, static_cast<double>(s.aggregators) * (1 + 1e-9))
            << "seed " << seed << " " << MemoryPolicyName(p) << " " << id;
        EXPECT_LE(s.mean_utilisation, 1 + 1e-9);
      }
      if (p != MemoryPolicy::kEsa) {
        EXPECT_DOUBLE_EQ(r.summary.preemptions, 0);
      }
      mean[p] = r.summary.mean_jct_s;
    }
    EXPECT_GE(mean[MemoryPolicy::kNoIna], 0.99 * mean[MemoryPolicy::kEsa]) << "seed " << seed;
  }
}

TEST(SimInvariantTest, DeterministicForASeed) {
  const Case c = RandomCase(5);
  for (MemoryPolicy p : {MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
    const SimResult a = Simulated(c, p, PlacementRule::kRandom, 3);
    const SimResult b = Simulated(c, p, PlacementRule::kRandom, 3);
    ASSERT_EQ(a.jobs.size(), b.jobs.size());
    for (size_t i = 0; i < a.jobs.size(); ++i) {
      EXPECT_EQ(a.jobs[i].finish_s, b.jobs[i].finish_s);
      EXPECT_EQ(a.jobs[i].hosts, b.jobs[i].hosts);
    }
    EXPECT_EQ(a.summary.mean_jct_s, b.summary.mean_jct_s);
  }
}

TEST(SimInvariantTest, FreeHostRulesMakeJobsWait) {
  // 7 hosts, three 2-worker jobs at t = 0 needing 3 hosts each: the third waits for the first.
  Case c;
  c.topology = testing::SingleSwitch(1000, 7);
  c.trace =
      *GenerateTrace({.jobs = 3, .models = {"GoogLeNet"}, .worker_counts = {2}, .iterations = 10});
  const SimResult r = Simulated(c, MemoryPolicy::kEsa, PlacementRule::kPack, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].start_s, 0);
  EXPECT_DOUBLE_EQ(r.jobs[1].start_s, 0);
  EXPECT_GT(r.jobs[2].start_s, 0);
  EXPECT_DOUBLE_EQ(r.jobs[2].start_s, std::min(r.jobs[0].finish_s, r.jobs[1].finish_s));
  const SimResult shared = Simulated(c, MemoryPolicy::kEsa, PlacementRule::kShared, 1);
  EXPECT_DOUBLE_EQ(shared.jobs[2].start_s, 0);
}

}  // namespace
}  // namespace inac::scheduler
