// The routing of the simulator's running jobs (scheduler/sim/simulation.h): their planning
// input, the routing call, each job's aggregating switches with their fallback usages, and the
// adaptive batch choice.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/batch/batch_size.h"
#include "scheduler/sim/simulation.h"

namespace inac::scheduler::sim_internal {

JobInput Simulation::InputOf(const RunningJob& r) const {
  const TraceJob& t = trace_[r.trace_index];
  JobInput in;
  in.id = r.id;
  in.spec.name = t.name;
  in.spec.priority = t.priority;
  in.spec.workers = r.placement.workers;
  in.spec.parameter_servers = r.placement.parameter_servers;
  in.spec.allreduce = core::AllReduce::kPs;
  in.spec.gradient_bytes = t.gradient_bytes;
  in.spec.compute_ms = t.compute_ms;
  in.spec.iterations = t.iterations;
  in.spec.batch_size = t.batch_size > 0 ? t.batch_size : 1;
  if (options_.adaptive_batch && t.batch_size > 0) in.spec.batch_sizes = t.batch_sizes;
  if (t.noise_scale >= 0) in.spec.noise_scale = t.noise_scale;
  if (!t.model.empty()) in.spec.model = t.model;
  return in;
}

absl::Status Simulation::Reroute() {
  ++summary_.routings;
  input_.jobs.clear();
  for (const RunningJob& r : running_) input_.jobs.push_back(InputOf(r));
  if (running_.empty()) return absl::OkStatus();
  absl::StatusOr<RoutingResult> routed = options_.routing->Route(*network_);
  if (!routed.ok()) return routed.status();
  if (routed->jobs.size() != running_.size()) {
    return absl::InternalError("routing returned a different number of jobs");
  }
  if (options_.adaptive_batch) {
    if (absl::Status s = ChooseBatches(routed->jobs); !s.ok()) return s;
  }
  const core::Graph& g = network_->graph();
  for (size_t i = 0; i < running_.size(); ++i) {
    RunningJob& r = running_[i];
    RoutedJob rj = routed->jobs[i];
    rj.aggregators.clear();  // memory is modelled here, not by the evaluator's cap
    core::JobPlan routed_plan = evaluator_->ToJobPlan(rj);
    routed_plan.job_id = r.id;
    routed_plan.priority = r.plan.priority;
    routed_plan.aggregators = r.plan.aggregators;
    if (r.routed && routed_plan == r.plan) continue;  // same routes: usages still valid
    r.routed = true;
    r.plan = std::move(routed_plan);
    r.usage = ComputeUsage(*network_, rj);
    std::map<std::string, int64_t> granted_before;
    for (const JobSwitch& s : r.switches) granted_before[s.id] = s.granted;
    r.switches.clear();
    for (const std::string& id : AggregatingSwitches(g, r.plan)) {
      absl::StatusOr<JobSwitch> s = SwitchOf(r, id, granted_before);
      if (!s.ok()) return s.status();
      r.switches.push_back(*std::move(s));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<JobSwitch> Simulation::SwitchOf(
    const RunningJob& r, const std::string& id,
    const std::map<std::string, int64_t>& granted_before) const {
  const core::Graph& g = network_->graph();
  JobSwitch s;
  s.id = id;
  s.node = g.index(id);
  s.aggregator_bytes = input_.topology.switches[s.node].ina.aggregator_bytes;
  const AggregationTiming timing = TimingAt(g, r.plan, id, options_.timing);
  s.hold_us = HoldTimeUs(options_.policy, timing);
  s.preemption_loss = timing.remaining_at_preemption;
  s.hold_s = s.hold_us * 1e-6;
  // Chunks needing an aggregator here, per unit of job rate: for each PS the largest
  // fraction aggregated here (aligned chunk ranges), weighted by the PS's share.
  std::map<std::string, double> largest;
  for (const core::FlowPlan& f : r.plan.flows) {
    if (f.aggregation_node != id) continue;
    const double share = r.plan.ps_shares.contains(f.ps) ? r.plan.ps_shares.at(f.ps) : 1.0;
    largest[f.ps] = std::max(largest[f.ps], f.fraction);
    s.inflow += share * f.fraction;
  }
  for (const auto& [ps, frac] : largest) {
    s.stream_share += (r.plan.ps_shares.contains(ps) ? r.plan.ps_shares.at(ps) : 1.0) * frac;
  }
  core::JobPlan fallback = r.plan;
  FallBackToPs(g, id, &fallback);
  absl::StatusOr<RoutedJob> frj = evaluator_->FromJobPlan(fallback);
  if (!frj.ok()) return frj.status();
  s.fallback = ComputeUsage(*network_, *frj);
  auto it = granted_before.find(id);
  if (it != granted_before.end()) s.granted = it->second;
  return s;
}

absl::Status Simulation::ChooseBatches(const std::vector<RoutedJob>& routed) {
  std::vector<double> remaining;
  bool any = false;
  for (const RunningJob& r : running_) {
    remaining.push_back(r.target > 0 ? std::clamp(1 - r.done / r.target, 1e-9, 1.0) : 1.0);
    any = any || trace_[r.trace_index].batch_sizes.size() > 0;
  }
  if (!any) return absl::OkStatus();
  BatchBuildOptions build;
  build.shared_memory =
      options_.policy == MemoryPolicy::kAtp || options_.policy == MemoryPolicy::kEsa;
  auto problem = BuildBatchProblem(*network_, routed, remaining, build);
  if (!problem.ok()) return problem.status();
  const BatchChoice choice = ChooseBatchSizes(*problem, options_.batch);
  for (size_t i = 0; i < running_.size(); ++i) {
    RunningJob& r = running_[i];
    const int b = choice.jobs[i].batch;
    if (b == r.batch) continue;
    const JobBatchModel& m = problem->jobs[i].model;
    const double target = m.convergence.Steps(static_cast<double>(m.workers) * b);
    const double scale = r.target > 0 ? target / r.target : 1.0;
    r.done *= scale;
    r.next_milestone *= scale;
    r.milestone_step *= scale;
    r.target = target;
    r.batch = b;
    r.compute_ms = m.compute.Ms(b);
    SimJobResult& res = results_[r.trace_index];
    res.batch_size = b;
    ++res.batch_changes;
  }
  return absl::OkStatus();
}

}  // namespace inac::scheduler::sim_internal
