// Hand-computed two-job scenarios on one switch whose memory holds exactly one window of the
// policy (docs/memory.md "Worked example").
//
// Timing: links 1 us, host turnaround 1.968 us, spread 1.984 us, so at 100 Gbps with 248 B
// aggregators the ESA hold (1.984 us) needs exactly 100 aggregators and the ATP/SwitchML hold
// (1.984 + 2 + 1.968 = 5.952 us) exactly 300. G = 12.5 MB: 1 ms at 100 Gbps, 2 ms at 50 Gbps;
// compute 1 ms. Long job L (h1, h2 -> PS h3, 2000 iterations) arrives at 0; short job S (h4, h5 ->
// PS h6, 300 iterations) at 1 s. With INA a job runs at 100 Gbps (2 ms per iteration); falling
// back to its PS it runs at 50 Gbps (its PS link carries both workers: 3 ms per iteration).
#include <cmath>

#include <gtest/gtest.h>

#include "scheduler/sim/simulator.h"
#include "tests/scheduler/sim_fixtures.h"

namespace inac::scheduler {
namespace {

constexpr double kTol = 1e-6;

std::vector<TraceJob> TwoJobs() {
  TraceJob l{.name = "L",
             .arrival_s = 0,
             .gradient_bytes = 12'500'000,
             .compute_ms = 1,
             .workers = 2,
             .hosts = {"h1", "h2"},
             .parameter_servers = {"h3"},
             .iterations = 2000};
  TraceJob s{.name = "S",
             .arrival_s = 1,
             .gradient_bytes = 12'500'000,
             .compute_ms = 1,
             .workers = 2,
             .hosts = {"h4", "h5"},
             .parameter_servers = {"h6"},
             .iterations = 300};
  return {l, s};
}

// The scenarios below were computed for continuous traffic (every running job always sends);
// the on/off ones (OnOff*) for the default traffic model.
SimResult Simulated(MemoryPolicy policy, int64_t aggregators,
                    TrafficModel traffic = TrafficModel::kContinuous) {
  static const testing::TorAggregationRouting routing;
  SimOptions options;
  options.policy = policy;
  options.traffic = traffic;
  options.routing = &routing;
  options.timing = {
      .default_link_latency_us = 1, .host_turnaround_us = 1.968, .arrival_spread_us = 1.984};
  options.record_timeline = true;
  absl::StatusOr<SimResult> r = Simulate(testing::SingleSwitch(aggregators, 6), TwoJobs(), options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

TEST(SimScenarioTest, NoInaBothJobsAtHalfRate) {
  const SimResult r = Simulated(MemoryPolicy::kNoIna, 300);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_NEAR(r.jobs[0].jct_s, 2000 * 3e-3, kTol);  // 6 s
  EXPECT_NEAR(r.jobs[1].jct_s, 300 * 3e-3, kTol);   // 0.9 s
  EXPECT_DOUBLE_EQ(r.summary.fallback_bytes, 0);
}

TEST(SimScenarioTest, SwitchMlSerialisesInaUse) {
  // L holds the only pool; S runs without INA for its whole life (it ends before L).
  const SimResult r = Simulated(MemoryPolicy::kSwitchMl, 300);
  EXPECT_NEAR(r.jobs[0].jct_s, 4.0, kTol);
  EXPECT_NEAR(r.jobs[1].jct_s, 0.9, kTol);
  EXPECT_NEAR(r.summary.mean_jct_s, 2.45, kTol);
  // S's two worker streams at 50 Gbps for 0.9 s all reach its PS unaggregated.
  EXPECT_NEAR(r.jobs[1].fallback_bytes, 0.9 * 2 * 50e9 / 8, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].fallback_bytes, 0);
  EXPECT_DOUBLE_EQ(r.summary.preemptions, 0);
  EXPECT_DOUBLE_EQ(r.summary.switches.at("s1").peak_in_use, 300);
}

TEST(SimScenarioTest, EsaLetsTheShortJobPreempt) {
  // S outranks L (less remaining work): it takes the whole window and runs at 100 Gbps
  // (0.6 s); every chunk of L collides with S's occupancy meanwhile (50 Gbps, 200 iterations),
  // then L finishes its remaining 1300 iterations alone: 1.6 + 2.6 = 4.2 s.
  const SimResult r = Simulated(MemoryPolicy::kEsa, 100);
  EXPECT_NEAR(r.jobs[1].jct_s, 0.6, kTol);
  EXPECT_NEAR(r.jobs[0].jct_s, 4.2, kTol);
  EXPECT_NEAR(r.summary.mean_jct_s, 2.4, kTol);
  EXPECT_NEAR(r.jobs[0].fallback_bytes, 0.6 * 2 * 50e9 / 8, 1e3);
  EXPECT_NEAR(r.summary.switches.at("s1").mean_utilisation, 1.0, 1e-9);
  EXPECT_LE(r.summary.switches.at("s1").peak_in_use, 100 + 1e-9);
}

TEST(SimScenarioTest, AtpCollides) {
  // Both jobs hash into the same 300 aggregators: with x = rate / 100 Gbps each occupies
  // 300 x (1 - p) and collides with p = x (1 - p); the PS link carries (1 - p) + 2p of the rate,
  // so x = 1 / (1 + p): p^2 + 2p - 1 = 0, p = sqrt(2) - 1, rate = 100 / sqrt(2) Gbps and
  // 1 + sqrt(2) ms per iteration while both run.
  const SimResult r = Simulated(MemoryPolicy::kAtp, 300);
  const double t_shared = 300 * (1 + std::sqrt(2.0)) * 1e-3;  // S's JCT
  const double l_finish = 1 + t_shared + (2000 - 500 - 300) * 2e-3;
  EXPECT_NEAR(r.jobs[1].jct_s, t_shared, kTol);
  EXPECT_NEAR(r.jobs[0].jct_s, l_finish, kTol);
  const double p = std::sqrt(2.0) - 1;
  EXPECT_NEAR(r.jobs[1].fallback_bytes, p * 2 * (100 / std::sqrt(2.0)) * 1e9 / 8 * t_shared, 1e3);
  EXPECT_DOUBLE_EQ(r.summary.preemptions, 0);
}

// On/off traffic: each iteration a job computes 1 ms, then sends G at λ. The two jobs share no
// link, so λ is each job's own bottleneck; the memory is shared through the time-average
// occupancy f_j occ_j of the other job, f_j = comm / iteration.
TEST(SimScenarioTest, OnOffNoInaAndSwitchMlAreUnchangedAndCountExactBytes) {
  const SimResult none = Simulated(MemoryPolicy::kNoIna, 300, TrafficModel::kOnOff);
  EXPECT_NEAR(none.jobs[0].jct_s, 6.0, kTol);
  EXPECT_NEAR(none.jobs[1].jct_s, 0.9, kTol);
  const SimResult sml = Simulated(MemoryPolicy::kSwitchMl, 300, TrafficModel::kOnOff);
  EXPECT_NEAR(sml.jobs[0].jct_s, 4.0, kTol);
  EXPECT_NEAR(sml.jobs[1].jct_s, 0.9, kTol);
  // S sends exactly G per worker per iteration, all of it to its PS: 2 x 12.5 MB x 300
  // (continuous traffic charges 1.5x that: 50 Gbps for the whole 3 ms iteration).
  EXPECT_NEAR(sml.jobs[1].fallback_bytes, 2 * 12.5e6 * 300, 1e-3);
  EXPECT_DOUBLE_EQ(sml.summary.switches.at("s1").peak_in_use, 300);  // a pool is held while off
}

TEST(SimScenarioTest, OnOffAtpCollidesWithTheOtherJobsMeanOccupancy) {
  // While both run, symmetric: rate x = 1 / (1 + p) of 100 Gbps (PS link carries 1 + p), comm
  // (1 + p) ms, f = (1 + p) / (2 + p); a chunk meets the other job's mean occupancy
  // f * 300 x (1 - p) of 300, so p = f x (1 - p) = (1 - p) / (2 + p): p^2 + 3p - 1 = 0.
  const double p = (std::sqrt(13.0) - 3) / 2;
  const SimResult r = Simulated(MemoryPolicy::kAtp, 300, TrafficModel::kOnOff);
  const double t_shared = 300 * (2 + p) * 1e-3;  // S's JCT
  EXPECT_NEAR(r.jobs[1].jct_s, t_shared, kTol);
  EXPECT_NEAR(r.jobs[0].jct_s, 1 + t_shared + (2000 - 500 - 300) * 2e-3, kTol);
  // A fraction p of S's chunks reach the PS as 2 fragments each: p x 2 x G per iteration.
  EXPECT_NEAR(r.jobs[1].fallback_bytes, p * 2 * 12.5e6 * 300, 1e-2);
  // Mean occupancy while both run: each f x 300 x (1 - p) = 300 (1 - p) / (2 + p).
  EXPECT_LT(r.summary.switches.at("s1").peak_in_use, 300);
}

TEST(SimScenarioTest, OnOffEsaShortJobKeepsItsWindowWhileOn) {
  // S outranks L. S never collides (100 Gbps, f_S = 1/2, mean occupancy 50 of 100). L's chunks
  // meet S's mean occupancy: p_L = 1/2; a placed chunk of L is preempted with
  // q_L = 1 - exp(-h f_S c_S / A) = 1 - exp(-1/2) and counts half lost:
  // psi_L = 1/2 + (1/2)(q_L / 2). L's PS link carries 1 + psi_L: iteration 2 + psi_L ms.
  const double q = 1 - std::exp(-0.5);
  const double psi = 0.5 + 0.5 * q / 2;
  const SimResult r = Simulated(MemoryPolicy::kEsa, 100, TrafficModel::kOnOff);
  EXPECT_NEAR(r.jobs[1].jct_s, 0.6, kTol);
  const double l_during = 600 / (2 + psi);  // L's iterations while S runs
  EXPECT_NEAR(r.jobs[0].jct_s, 1.6 + (1500 - l_during) * 2e-3, kTol);
  EXPECT_NEAR(r.jobs[0].fallback_bytes, psi * 2 * 12.5e6 * l_during, 1e-1);
  EXPECT_DOUBLE_EQ(r.jobs[1].fallback_bytes, 0);
  EXPECT_GT(r.jobs[0].preemptions, 0);
  // On/off: both policies beat their continuous-traffic JCTs, and ESA still beats ATP.
  const SimResult atp = Simulated(MemoryPolicy::kAtp, 300, TrafficModel::kOnOff);
  EXPECT_LT(r.summary.mean_jct_s, atp.summary.mean_jct_s);
}

TEST(SimScenarioTest, OrderOfPoliciesOnMeanJct) {
  const double esa = Simulated(MemoryPolicy::kEsa, 100).summary.mean_jct_s;
  const double atp = Simulated(MemoryPolicy::kAtp, 300).summary.mean_jct_s;
  const double switchml = Simulated(MemoryPolicy::kSwitchMl, 300).summary.mean_jct_s;
  const double no_ina = Simulated(MemoryPolicy::kNoIna, 300).summary.mean_jct_s;
  EXPECT_LT(esa, atp);
  EXPECT_LT(atp, switchml);
  EXPECT_LT(switchml, no_ina);
}

TEST(SimScenarioTest, EsaWithRoomToSpareCountsPreemptions) {
  // Two windows of memory: S (higher priority) preempts aggregators L holds at a rate
  // c_L (1 - p_L) q_L with p_L = 1/2 and q_L = 1 - exp(-h c_S / A) = 1 - exp(-1/2).
  const SimResult r = Simulated(MemoryPolicy::kEsa, 200);
  EXPECT_GT(r.summary.preemptions, 0);
  EXPECT_GT(r.jobs[0].preemptions, 0);
  EXPECT_DOUBLE_EQ(r.jobs[1].preemptions, 0);  // nobody outranks S
  EXPECT_LE(r.summary.switches.at("s1").peak_in_use, 200 + 1e-9);
  EXPECT_LT(r.jobs[0].jct_s, 4.2);  // more memory, less fallback for L
}

TEST(SimScenarioTest, TimelineRecordsEveryEvent) {
  const SimResult r = Simulated(MemoryPolicy::kEsa, 100);
  int arrivals = 0, starts = 0, completions = 0, milestones = 0;
  for (const TimelineRow& row : r.timeline) {
    arrivals += row.event == "arrival";
    starts += row.event == "start";
    completions += row.event == "completion";
    milestones += row.event == "milestone";
  }
  EXPECT_EQ(arrivals, 2);
  EXPECT_EQ(starts, 2);
  EXPECT_EQ(completions, 2);
  EXPECT_EQ(milestones, 18);  // 9 per job (the 10th is the completion)
  const std::string csv = TimelineToCsv(r.timeline);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "time_s,event,job,running,waiting,aggregators_in_use,fallback_gbps");
}

TEST(SimScenarioTest, RejectsUnknownHostsAndMissingRouting) {
  SimOptions options;
  EXPECT_EQ(Simulate(testing::SingleSwitch(100, 6), TwoJobs(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  const testing::TorAggregationRouting routing;
  options.routing = &routing;
  std::vector<TraceJob> trace = TwoJobs();
  trace[0].hosts[0] = "nowhere";
  EXPECT_EQ(Simulate(testing::SingleSwitch(100, 6), trace, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  trace = TwoJobs();
  trace[0].hosts.clear();
  trace[0].workers = 9;
  EXPECT_EQ(Simulate(testing::SingleSwitch(100, 6), trace, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::scheduler
