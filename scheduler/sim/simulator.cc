// The simulator's event loop (scheduler/sim/simulator.h): arrivals, starts, milestones and
// completions, the time between events, and the summary. Routing is in simulation_routing.cc,
// memory and rates in simulation_rates.cc; the state they share in simulation.h.
#include "scheduler/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/sim/simulation.h"

namespace inac::scheduler {
namespace sim_internal {

Simulation::Simulation(const core::Topology& topology, const std::vector<TraceJob>& trace,
                       const SimOptions& options)
    : trace_(trace), options_(options) {
  input_.topology = topology;
  input_.seed = options.seed;
  input_.options = options.planning;
  // The memory model follows the data plane, which aggregates at one level (no ATP
  // re-aggregation at the PS's ToR; PlanningOptions::reaggregation).
  input_.options.reaggregation = false;
}

absl::Status Simulation::Validate() const {
  if (options_.routing == nullptr) return absl::InvalidArgumentError("no routing algorithm");
  if (!(options_.milestone_fraction > 0 && options_.milestone_fraction <= 1)) {
    return absl::InvalidArgumentError("milestone_fraction must be in (0, 1]");
  }
  const core::Graph& g = network_->graph();
  const int hosts = g.num_nodes() - g.num_switches();
  std::vector<std::string> problems;
  for (size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& job = trace_[i];
    for (const auto* list : {&job.hosts, &job.parameter_servers}) {
      for (const std::string& h : *list) {
        const int node = g.index(h);
        if (node < 0 || !g.is_host(node)) {
          problems.push_back(absl::StrCat("jobs[", i, "]: \"", h, "\" is not a host"));
        }
      }
    }
    const int needed = HostPlacer::HostsNeeded(job) + static_cast<int>(job.hosts.size()) +
                       static_cast<int>(job.parameter_servers.size());
    if (needed > hosts) {
      problems.push_back(
          absl::StrCat("jobs[", i, "]: needs ", needed, " hosts, the topology has ", hosts));
    }
    if (job.iterations < 1 || job.gradient_bytes <= 0 || job.compute_ms < 0) {
      problems.push_back(absl::StrCat("jobs[", i, "]: iterations, gradient or compute invalid"));
    }
  }
  if (!problems.empty()) return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
  return absl::OkStatus();
}

double Simulation::InUse() const {
  double total = 0;
  for (const RunningJob& r : running_) {
    for (const JobSwitch& s : r.switches) total += s.occupancy;
  }
  return total;
}

void Simulation::Record(const std::string& event, const std::string& job) {
  if (!options_.record_timeline) return;
  TimelineRow row;
  row.time_s = now_;
  row.event = event;
  row.job = job;
  row.running = static_cast<int>(running_.size());
  row.waiting = static_cast<int>(waiting_.size());
  row.aggregators_in_use = InUse();
  for (const RunningJob& r : running_) {
    for (const JobSwitch& s : r.switches) {
      if (options_.policy != MemoryPolicy::kNoIna)
        row.fallback_gbps += s.psi * s.inflow * r.up_gbps * r.active_fraction;
    }
  }
  timeline_.push_back(std::move(row));
}

void Simulation::Advance(double dt) {
  if (dt <= 0) return;
  for (RunningJob& r : running_) {
    if (std::isfinite(r.iteration_ms) && r.iteration_ms > 0) {
      r.done += dt * 1000.0 / r.iteration_ms;
    }
    SimJobResult& res = results_[r.trace_index];
    for (const JobSwitch& s : r.switches) {
      if (options_.policy != MemoryPolicy::kNoIna && std::isfinite(r.up_gbps)) {
        res.fallback_bytes += dt * s.psi * s.inflow * r.up_gbps * r.active_fraction * kBytesPerGbit;
      }
      res.preemptions += dt * s.preemptions_per_s;
      occupancy_integral_[s.node] += dt * s.occupancy;
    }
  }
}

absl::StatusOr<SimResult> Simulation::Run(const SimProgress& progress) {
  absl::StatusOr<std::unique_ptr<Network>> net = Network::Create(input_);
  if (!net.ok()) return net.status();
  network_ = *std::move(net);
  evaluator_ = std::make_unique<FlowEvaluator>(*network_);
  if (absl::Status st = Validate(); !st.ok()) return st;
  const core::Graph& g = network_->graph();
  placer_ = std::make_unique<HostPlacer>(g, options_.placement, options_.seed);
  occupancy_integral_.assign(g.num_nodes(), 0.0);
  peak_.assign(g.num_nodes(), 0.0);
  InitResults();
  first_arrival_ = trace_.empty() ? 0 : trace_[order_.front()].arrival_s;
  now_ = first_arrival_;
  size_t next_arrival = 0;
  size_t completed = 0;
  while (completed < trace_.size()) {
    const absl::StatusOr<double> next = NextEvent(next_arrival);
    if (!next.ok()) return next.status();
    Advance(*next - now_);
    now_ = std::max(now_, *next);
    ++summary_.events;
    bool changed = CompleteAndMark(&completed);
    while (next_arrival < order_.size() && trace_[order_[next_arrival]].arrival_s <= now_) {
      waiting_.push_back(next_arrival);
      Record("arrival", trace_[order_[next_arrival]].name);
      ++next_arrival;
    }
    if (StartWaiting()) changed = true;
    if (changed) {
      // Keep running jobs in id order so routing sees a stable order.
      std::sort(running_.begin(), running_.end(),
                [](const RunningJob& a, const RunningJob& b) { return a.id < b.id; });
      if (absl::Status st = Reroute(); !st.ok()) return st;
    }
    if (absl::Status st = Replan(changed); !st.ok()) return st;
    if (progress) progress(static_cast<double>(completed) / static_cast<double>(trace_.size()));
  }
  return Finish();
}

void Simulation::InitResults() {
  order_.resize(trace_.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return trace_[a].arrival_s < trace_[b].arrival_s; });
  results_.resize(trace_.size());
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const TraceJob& t = trace_[order_[pos]];
    SimJobResult& res = results_[order_[pos]];
    res.id = static_cast<core::JobId>(pos + 1);
    res.name = t.name;
    res.model = t.model;
    res.workers = t.workers;
    res.batch_size = t.batch_size;
    res.arrival_s = t.arrival_s;
  }
}

absl::StatusOr<double> Simulation::NextEvent(size_t next_arrival) const {
  double next = next_arrival < order_.size() ? trace_[order_[next_arrival]].arrival_s : kInf;
  for (const RunningJob& r : running_) {
    if (!std::isfinite(r.iteration_ms)) continue;
    next = std::min(next, now_ + (r.next_milestone - r.done) * r.iteration_ms / 1000.0);
  }
  if (!std::isfinite(next)) {
    if (!running_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", trace_[running_.front().trace_index].name, " makes no progress (rate 0)"));
    }
    return absl::InternalError("jobs wait but nothing runs");
  }
  return next;
}

bool Simulation::CompleteAndMark(size_t* completed) {
  bool changed = false;
  for (size_t i = 0; i < running_.size();) {
    RunningJob& r = running_[i];
    const TraceJob& t = trace_[r.trace_index];
    const double eps = 1e-9 * r.target;
    if (r.done >= r.target - eps) {
      SimJobResult& res = results_[r.trace_index];
      res.finish_s = now_;
      res.jct_s = now_ - t.arrival_s;
      placer_->Release(r.placement);
      Record("completion", t.name);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      ++*completed;
      changed = true;
      continue;
    }
    if (r.done >= r.next_milestone - eps) {
      r.done = std::max(r.done, r.next_milestone);
      r.next_milestone = std::min(r.target, r.next_milestone + r.milestone_step);
      Record("milestone", t.name);
    }
    ++i;
  }
  return changed;
}

// Later jobs may start when an earlier one cannot.
bool Simulation::StartWaiting() {
  bool changed = false;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const size_t index = order_[*it];
    const TraceJob& t = trace_[index];
    std::optional<Placement> placement = placer_->Place(t);
    if (!placement.has_value()) {
      ++it;
      continue;
    }
    placer_->Occupy(*placement);
    RunningJob r;
    r.trace_index = index;
    r.id = results_[index].id;
    r.placement = *placement;
    r.batch = t.batch_size;
    r.compute_ms = t.compute_ms;
    r.target = static_cast<double>(t.iterations);
    r.milestone_step = std::max(1e-9, options_.milestone_fraction * r.target);
    r.next_milestone = std::min(r.target, r.milestone_step);
    SimJobResult& res = results_[index];
    res.start_s = now_;
    res.hosts = placement->workers;
    res.parameter_servers = placement->parameter_servers;
    running_.push_back(std::move(r));
    it = waiting_.erase(it);
    Record("start", t.name);
    changed = true;
  }
  return changed;
}

SimResult Simulation::Finish() {
  const core::Graph& g = network_->graph();
  SimResult result;
  result.jobs = results_;
  summary_.jobs = static_cast<int>(trace_.size());
  SummariseJobs(result.jobs, &summary_);
  for (int v = 0; v < g.num_switches(); ++v) {
    if (!g.ina_capable(v)) continue;
    SwitchMemoryStats stats;
    stats.aggregators = g.aggregators(v);
    if (summary_.makespan_s > 0 && stats.aggregators > 0) {
      stats.mean_utilisation = occupancy_integral_[v] / (stats.aggregators * summary_.makespan_s);
    }
    stats.peak_in_use = peak_[v];
    summary_.switches[g.name(v)] = stats;
  }
  for (const SimJobResult& j : result.jobs) {
    summary_.preemptions += j.preemptions;
    summary_.fallback_bytes += j.fallback_bytes;
  }
  result.summary = summary_;
  result.timeline = std::move(timeline_);
  return result;
}

}  // namespace sim_internal

void SummariseJobs(const std::vector<SimJobResult>& jobs, SimSummary* summary) {
  summary->jobs = static_cast<int>(jobs.size());
  if (jobs.empty()) return;
  std::vector<double> jct;
  double first = sim_internal::kInf;
  double last = 0;
  double sum = 0;
  for (const SimJobResult& j : jobs) {
    jct.push_back(j.jct_s);
    sum += j.jct_s;
    first = std::min(first, j.arrival_s);
    last = std::max(last, j.finish_s);
  }
  std::sort(jct.begin(), jct.end());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(jct.size())));
    return jct[std::clamp<size_t>(k, 1, jct.size()) - 1];
  };
  summary->mean_jct_s = sum / static_cast<double>(jct.size());
  summary->p50_jct_s = rank(0.50);
  summary->p99_jct_s = rank(0.99);
  summary->makespan_s = last - first;
}

absl::StatusOr<SimResult> Simulate(const core::Topology& topology,
                                   const std::vector<TraceJob>& trace, const SimOptions& options,
                                   const SimProgress& progress) {
  sim_internal::Simulation sim(topology, trace, options);
  return sim.Run(progress);
}

std::string TimelineToCsv(const std::vector<TimelineRow>& rows) {
  std::string out = "time_s,event,job,running,waiting,aggregators_in_use,fallback_gbps\n";
  for (const TimelineRow& r : rows) {
    absl::StrAppend(
        &out, absl::StrFormat("%.9g,%s,%s,%d,%d,%.6g,%.6g\n", r.time_s, r.event, r.job, r.running,
                              r.waiting, r.aggregators_in_use, r.fallback_gbps));
  }
  return out;
}

}  // namespace inac::scheduler
