// Memory planning, contention and rates of the simulator's running jobs
// (scheduler/sim/simulation.h): grants and priorities, the policies' unaggregated fractions psi
// (ATP/ESA by a contention fixed point), and the fair rates of the blended usages.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "scheduler/memory/contention.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/sim/simulation.h"

namespace inac::scheduler::sim_internal {

Coefficients Simulation::Blend(const RunningJob& r, bool up, bool both) {
  touched_.clear();
  auto add = [&](const Coefficients& c, double w) {
    for (const auto& [res, v] : c) {
      if (!mark_[res]) {
        mark_[res] = 1;
        touched_.push_back(res);
      }
      scratch_[res] += w * v;
    }
  };
  for (int d = 0; d < (both ? 2 : 1); ++d) {
    const bool u = both ? d == 0 : up;
    add(u ? r.usage.up : r.usage.down, 1.0);
    for (const JobSwitch& s : r.switches) {
      if (s.psi <= 0) continue;
      add(u ? r.usage.up : r.usage.down, -s.psi);
      add(u ? s.fallback.up : s.fallback.down, s.psi);
    }
  }
  std::sort(touched_.begin(), touched_.end());
  Coefficients out;
  for (int res : touched_) {
    if (scratch_[res] > 1e-12) out.emplace_back(res, scratch_[res]);
    scratch_[res] = 0;
    mark_[res] = 0;
  }
  return out;
}

// Up/down coefficients of every running job blended with its fallbacks, then max-min fair rates.
void Simulation::ComputeRates() {
  std::vector<VirtualFlow> flows;
  flows.reserve(2 * running_.size());
  scratch_.resize(network_->num_resources(), 0.0);
  mark_.resize(network_->num_resources(), 0);
  if (options_.traffic == TrafficModel::kOnOff) {
    // One unit per job: both directions at λ (the iteration waits for the slower one anyway).
    std::vector<OnOffJob>& jobs = on_off_jobs_;
    jobs.resize(running_.size());
    for (size_t i = 0; i < running_.size(); ++i) {
      const RunningJob& r = running_[i];
      const TraceJob& t = trace_[r.trace_index];
      jobs[i].flow.coefficients = Blend(r, true, /*both=*/true);
      jobs[i].flow.limit = r.cap_gbps;
      jobs[i].gradient_gbit = static_cast<double>(t.gradient_bytes) * 8 / 1e9;
      jobs[i].compute_s = r.compute_ms / 1000.0;
    }
    const OnOffShare share = OnOffFairRates(network_->residuals(), jobs);
    for (size_t i = 0; i < running_.size(); ++i) {
      running_[i].up_gbps = share.rates[i];
      running_[i].down_gbps = share.rates[i];
    }
  } else {
    for (const RunningJob& r : running_) {
      flows.push_back(VirtualFlow{Blend(r, true), r.cap_gbps});
      flows.push_back(VirtualFlow{Blend(r, false), kUnbounded});
    }
    const FairShare share = MaxMinFairRates(network_->residuals(), flows);
    for (size_t i = 0; i < running_.size(); ++i) {
      running_[i].up_gbps = share.rates[2 * i];
      running_[i].down_gbps = share.rates[2 * i + 1];
    }
  }
  for (RunningJob& r : running_) {
    const double g_bits = static_cast<double>(trace_[r.trace_index].gradient_bytes) * 8;
    const double up_ms = r.up_gbps > 0 ? g_bits / (r.up_gbps * 1e6) : kInf;
    const double down_ms = r.down_gbps > 0 ? g_bits / (r.down_gbps * 1e6) : kInf;
    const double comm_ms = std::max(up_ms, down_ms);
    r.iteration_ms = r.compute_ms + comm_ms;
    r.active_fraction = 1;
    if (options_.traffic == TrafficModel::kOnOff && std::isfinite(r.iteration_ms) &&
        r.iteration_ms > 0) {
      r.active_fraction = comm_ms / r.iteration_ms;
    }
  }
}

MemoryJobState Simulation::StateOf(const RunningJob& r) const {
  const TraceJob& t = trace_[r.trace_index];
  return MemoryJobState{.id = r.id,
                        .user_priority = t.priority,
                        .workers = r.placement.workers,
                        .remaining_comm_bytes = std::max(0.0, r.target - r.done) * t.gradient_bytes,
                        .age_s = now_ - t.arrival_s,
                        .admission = static_cast<int64_t>(r.id)};
}

absl::Status Simulation::Replan(bool running_set_changed) {
  if (running_.empty()) return absl::OkStatus();
  const ShortestRemainingWorkWithAging default_priority;
  const PriorityFunction& priority_fn =
      options_.priority != nullptr ? *options_.priority : default_priority;
  if (running_set_changed) {
    if (absl::Status st = GrantMemory(); !st.ok()) return st;
  }
  // Priorities change with progress and age at every event (the same function the memory
  // planner applies).
  for (RunningJob& r : running_) {
    const MemoryJobState st = StateOf(r);
    r.plan.priority = priority_fn.Priority({.user_priority = st.user_priority,
                                            .remaining_comm_bytes = st.remaining_comm_bytes,
                                            .age_s = st.age_s});
  }
  ApplyStaticPolicies();
  if (options_.policy == MemoryPolicy::kAtp || options_.policy == MemoryPolicy::kEsa) {
    ContentionFixedPoint();
  } else {
    ComputeRates();
  }
  std::map<int, double> in_use;
  for (const RunningJob& r : running_) {
    for (const JobSwitch& s : r.switches) in_use[s.node] += s.occupancy;
  }
  for (const auto& [node, v] : in_use) peak_[node] = std::max(peak_[node], v);
  return absl::OkStatus();
}

// Memory planning (planner form) with the routed plans: priorities and grants; SwitchML pools
// persist through `previous`.
absl::Status Simulation::GrantMemory() {
  const core::Graph& g = network_->graph();
  std::vector<MemoryJobState> states;
  core::Plan plan;
  for (const RunningJob& r : running_) {
    states.push_back(StateOf(r));
    plan.jobs.push_back(r.plan);
    plan.jobs.back().aggregators.clear();
    for (const JobSwitch& s : r.switches) {
      if (s.granted > 0) plan.jobs.back().aggregators[s.id] = s.granted;
    }
  }
  const core::Plan previous = plan;
  MemoryPlannerOptions mopt{.policy = options_.policy,
                            .timing = options_.timing,
                            .priority = options_.priority,
                            .fall_back_without_memory = false};
  if (absl::Status st = AssignAggregators(g, states, &previous, mopt, &plan); !st.ok()) {
    return st;
  }
  for (size_t i = 0; i < running_.size(); ++i) {
    RunningJob& r = running_[i];
    r.plan.aggregators = plan.jobs[i].aggregators;
    for (JobSwitch& s : r.switches) {
      auto it = plan.jobs[i].aggregators.find(s.id);
      s.granted = it != plan.jobs[i].aggregators.end() ? it->second : 0;
    }
  }
  return absl::OkStatus();
}

void Simulation::ApplyStaticPolicies() {
  for (RunningJob& r : running_) {
    r.cap_gbps = kInf;
    for (JobSwitch& s : r.switches) {
      if (options_.policy == MemoryPolicy::kNoIna) {
        s.psi = 1;
        s.occupancy = 0;
        s.preemptions_per_s = 0;
      } else if (options_.policy == MemoryPolicy::kSwitchMl) {
        s.psi = s.granted > 0 ? 0 : 1;
        s.occupancy = static_cast<double>(s.granted);
        s.preemptions_per_s = 0;
        if (s.granted > 0 && s.stream_share > 0) {
          r.cap_gbps =
              std::min(r.cap_gbps, MemoryRateCapGbps(s.granted, s.hold_us, s.aggregator_bytes) /
                                       s.stream_share);
        }
      }
    }
  }
}

// Warm-started from the previous psi. Full steps while the residual shrinks; the step halves
// (down to 1/64) whenever it does not (oscillation).
void Simulation::ContentionFixedPoint() {
  double step = 1;
  double previous_delta = kInf;
  for (int it = 0; it < options_.max_fixed_point_iterations; ++it) {
    ++summary_.fixed_point_iterations;
    ComputeRates();
    std::vector<double> before;
    for (const RunningJob& r : running_) {
      for (const JobSwitch& s : r.switches) before.push_back(s.psi);
    }
    Contention();
    double delta = 0;
    for (size_t n = 0, j = 0; j < running_.size(); ++j) {
      for (const JobSwitch& s : running_[j].switches) {
        delta = std::max(delta, std::abs(s.psi - before[n++]));
      }
    }
    if (delta >= previous_delta) step = std::max(step / 2, 1.0 / 64);
    previous_delta = delta;
    for (size_t n = 0, j = 0; j < running_.size(); ++j) {
      for (JobSwitch& s : running_[j].switches) {
        s.psi = before[n] + step * (s.psi - before[n]);
        ++n;
      }
    }
    if (delta < options_.fixed_point_tolerance) break;
  }
  ComputeRates();
  // Occupancy and preemptions at the final rates (psi kept: it is the fixed point).
  std::vector<double> psi;
  for (const RunningJob& r : running_) {
    for (const JobSwitch& s : r.switches) psi.push_back(s.psi);
  }
  Contention();
  size_t n = 0;
  for (RunningJob& r : running_) {
    for (JobSwitch& s : r.switches) s.psi = psi[n++];
  }
}

// Contention at every switch for the current rates: writes psi (as `next`), occupancy, preemptions.
void Simulation::Contention() {
  std::map<int, std::vector<std::pair<size_t, size_t>>> at;  // node -> (job, switch slot)
  for (size_t i = 0; i < running_.size(); ++i) {
    for (size_t k = 0; k < running_[i].switches.size(); ++k) {
      at[running_[i].switches[k].node].emplace_back(i, k);
    }
  }
  const core::Graph& g = network_->graph();
  for (const auto& [node, members] : at) {
    std::vector<ChunkLoad> loads;
    for (const auto& [i, k] : members) {
      const RunningJob& r = running_[i];
      const JobSwitch& s = r.switches[k];
      const double rate = std::isfinite(r.up_gbps) ? r.up_gbps : 0.0;
      loads.push_back(ChunkLoad{
          .chunks_per_s = rate * s.stream_share * kBytesPerGbit / ChunkBytes(s.aggregator_bytes),
          .hold_s = s.hold_s,
          .priority = r.plan.priority,
          .active_fraction = r.active_fraction,
          .preemption_loss = s.preemption_loss});
    }
    const SwitchContention c = HashedContention(options_.policy, g.aggregators(node), loads);
    for (size_t m = 0; m < members.size(); ++m) {
      JobSwitch& s = running_[members[m].first].switches[members[m].second];
      s.occupancy = c.jobs[m].occupancy;
      s.preemptions_per_s = c.jobs[m].preemptions_per_s;
      s.psi = c.jobs[m].unaggregated;  // caller damps
    }
  }
}

}  // namespace inac::scheduler::sim_internal
