// The rate the planner prints for a job (JobPlan::rate_gbps, from the flow model) must never
// exceed what the switches, as programmed by the plan's intents (core::DeriveSwitchIntents), can
// carry: core::EvaluateIntents, which knows nothing of the model, evaluates the intents hop by
// hop (per-tag windows, hold times to the PS, fan-in, routes) and the printed rate must hold on
// them. Seeded random instances (fat-trees and leaf-spines, INA placements, processing ranges,
// aggregator counts, link latencies, job mixes) are planned by scheduler::ComputePlan with every
// routing algorithm but `optimal` and every memory policy.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/generators.h"
#include "core/intent_evaluation.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

struct TruthInstance {
  uint64_t seed = 0;
  std::string fabric;  // what was generated, for the failure messages
  core::Topology topology;
  std::vector<core::Job> jobs;
};

TruthInstance MakeInstance(uint64_t seed) {
  TruthInstance inst;
  inst.seed = seed;
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  core::GeneratorOptions o;
  o.seed = seed;
  o.link_gbps = 100;
  const bool tor = rng() % 2 == 0;
  o.ina.kind = tor ? core::InaPlacement::Kind::kTor : core::InaPlacement::Kind::kRandom;
  o.ina.fraction = tor ? 0 : 0.3 + 0.1 * pick(0, 7);
  const bool fast = rng() % 2 == 0;
  o.processing_gbps_lo = fast ? 100 : 20;
  o.processing_gbps_hi = fast ? 3200 : 400;
  const int64_t aggregators[] = {20, 60, 150, 20000};
  o.aggregators = aggregators[rng() % 4];
  const std::string ina = tor ? std::string("tor") : absl::StrCat("random:", o.ina.fraction);
  if (rng() % 2 == 0) {
    const int hosts = pick(2, 3);
    inst.topology = *core::GenerateFatTree(4, o, hosts);
    inst.fabric = absl::StrCat("fat-tree k=4 hosts/edge=", hosts);
  } else {
    const int leaves = pick(2, 4), hosts = pick(3, 5);
    inst.topology = *core::GenerateLeafSpine(leaves, 2, hosts, o);
    inst.fabric = absl::StrCat("leaf-spine ", leaves, "x2 hosts/leaf=", hosts);
  }
  // Some links get a latency of their own (0.5 .. 8 µs).
  int with_latency = 0;
  for (core::Link& l : inst.topology.links) {
    if (rng() % 3 == 0) {
      l.latency_us = 0.5 * pick(1, 16);
      ++with_latency;
    }
  }
  absl::StrAppend(&inst.fabric, " ina=", ina, " processing=", o.processing_gbps_lo, ":",
                  o.processing_gbps_hi, " aggregators=", o.aggregators,
                  " latencies=", with_latency);
  std::vector<std::string> hosts;
  for (const core::Host& h : inst.topology.hosts) hosts.push_back(h.id);
  const int jobs = pick(1, 6);
  for (int j = 0; j < jobs; ++j) {
    std::shuffle(hosts.begin(), hosts.end(), rng);
    const int pss = pick(1, 2);
    const int workers = std::min(pick(2, 16), static_cast<int>(hosts.size()) - pss);
    std::vector<std::string> w(hosts.begin(), hosts.begin() + workers);
    std::vector<std::string> p(hosts.begin() + workers, hosts.begin() + workers + pss);
    core::Job job;
    job.id = j + 1;
    job.state = core::JobState::kPending;
    job.spec = fixtures::PsJobSpec(absl::StrCat("j", j + 1), w, p);
    job.spec.priority = pick(0, 2);
    inst.jobs.push_back(job);
    absl::StrAppend(&inst.fabric, "\n  job ", job.id, ": workers ", absl::StrJoin(w, ","), " ps ",
                    absl::StrJoin(p, ","), " priority ", job.spec.priority);
  }
  return inst;
}

// How the plan aggregates `jp` (for the failure messages).
std::string Describe(const core::JobPlan& jp, const std::vector<core::SwitchIntent>& intents) {
  std::string out;
  for (const auto& [ps, x] : jp.ps_shares) absl::StrAppend(&out, " ps ", ps, "=", x);
  for (const core::FlowPlan& f : jp.flows) {
    absl::StrAppend(&out, "\n    flow ", f.worker, "->", f.ps, " at ", f.aggregation_node,
                    " fraction ", f.fraction, " path ", absl::StrJoin(f.path, ","));
  }
  for (const core::AggregatorPlan& ap : jp.aggregator_paths) {
    absl::StrAppend(&out, "\n    stream ", ap.switch_id, "->", ap.ps, " path ",
                    absl::StrJoin(ap.path, ","));
  }
  for (const auto& [sw, n] : jp.aggregators) absl::StrAppend(&out, "\n    grant ", sw, " ", n);
  for (const core::SwitchIntent& si : intents) {
    for (const core::JobAggregationIntent& ji : si.jobs) {
      if (ji.job_id != jp.job_id) continue;
      absl::StrAppend(&out, "\n    ina_job ", si.switch_id, " tag ", ji.tag, " fan_in ", ji.fan_in,
                      " region ", ji.aggregator_base, "+", ji.aggregator_count, " window ",
                      ji.slot_offset, "+", ji.window);
    }
  }
  return out;
}

class PlanTruthTest : public ::testing::TestWithParam<int> {};

TEST_P(PlanTruthTest, PrintedRatesHoldOnTheIntents) {
  const TruthInstance inst = MakeInstance(0x7275746800ULL + GetParam());
  int checked = 0;
  for (const std::string& algorithm : RoutingAlgorithmNames()) {
    if (algorithm == "optimal") continue;  // a MIP: too slow for a property test
    for (const std::string policy : {"esa", "atp", "switchml"}) {
      const std::string where = absl::StrCat("seed ", inst.seed, " ", inst.fabric, "\n  algorithm ",
                                             algorithm, " policy ", policy);
      PlanRequest request;
      request.topology = &inst.topology;
      request.jobs = inst.jobs;
      request.options.algorithm = algorithm;
      request.options.memory_policy = policy;
      auto out = ComputePlan(request);
      ASSERT_TRUE(out.ok()) << where << "\n  " << out.status();
      auto truth = core::EvaluateIntents(inst.topology, out->plan, out->intents);
      ASSERT_TRUE(truth.ok()) << where << "\n  " << truth.status();
      for (const core::IntentJobRate& t : *truth) {
        const core::JobPlan* jp = out->plan.FindJob(t.job_id);
        ASSERT_NE(jp, nullptr);
        ++checked;
        const auto report = out->reports.find(t.job_id);
        const std::string model_bottleneck =
            report == out->reports.end() ? "" : report->second.evaluation.bottleneck;
        EXPECT_TRUE(t.problems.empty())
            << where << "\n  job " << t.job_id << " printed " << jp->rate_gbps
            << " Gbps, the intents do not carry it:\n    " << absl::StrJoin(t.problems, "\n    ")
            << Describe(*jp, out->intents);
        EXPECT_LE(jp->rate_gbps, t.rate_gbps * (1 + 1e-6) + 1e-9)
            << where << "\n  job " << t.job_id << " printed " << jp->rate_gbps
            << " Gbps (model bottleneck: " << model_bottleneck << "), the intents sustain "
            << t.rate_gbps << " Gbps (bottleneck: " << t.bottleneck << ")"
            << Describe(*jp, out->intents);
      }
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, PlanTruthTest, ::testing::Range(0, 8));

}  // namespace
}  // namespace inac::scheduler
