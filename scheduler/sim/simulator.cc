#include "scheduler/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/memory/contention.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBytesPerGbit = 1e9 / 8;

using Coefficients = std::vector<std::pair<int, double>>;

// One aggregating switch of a running job.
struct JobSwitch {
  int node = -1;
  std::string id;
  int aggregator_bytes = 0;
  double hold_s = 0;  // per the policy
  double hold_us = 0;
  double preemption_loss = 0.5;  // AggregationTiming::remaining_at_preemption
  double stream_share = 0;       // fraction of the job rate whose chunks need an aggregator here
  double inflow = 0;             // worker streams (per unit rate) aggregated here
  JobUsage fallback;             // usage with this switch's aggregation falling back to the PS
  int64_t granted = 0;           // planner-form aggregators
  double psi = 0;                // unaggregated fraction
  double occupancy = 0;
  double preemptions_per_s = 0;
};

struct RunningJob {
  size_t trace_index = 0;
  core::JobId id = 0;
  Placement placement;
  double done = 0;  // iterations at the current batch
  // Batch-size adjustment (SimOptions::adaptive_batch): current per-worker batch, compute time per
  // iteration at it, and the iterations to the target at it (S(n b); the trace's iterations at
  // the submitted batch).
  int batch = 0;
  double compute_ms = 0;
  double target = 0;
  double next_milestone = 0;
  double milestone_step = 0;
  core::JobPlan plan;  // routed; aggregators and priority of the last memory planning
  JobUsage usage;
  std::vector<JobSwitch> switches;
  double cap_gbps = kInf;  // switchml pool cap
  double up_gbps = 0;
  double down_gbps = 0;
  double iteration_ms = kInf;
  // Fraction of time the job communicates: comm / iteration (on/off traffic), 1 (continuous).
  double active_fraction = 1;
  bool routed = false;  // usages computed for `plan`
};

class Simulation {
 public:
  Simulation(const core::Topology& topology, const std::vector<TraceJob>& trace,
             const SimOptions& options)
      : trace_(trace), options_(options) {
    input_.topology = topology;
    input_.seed = options.seed;
    input_.options = options.planning;
    // The memory model follows the data plane, which aggregates at one level (no ATP
    // re-aggregation at the PS's ToR; PlanningOptions::reaggregation).
    input_.options.reaggregation = false;
  }

  absl::StatusOr<SimResult> Run(const SimProgress& progress);

 private:
  absl::Status Validate() const;
  void Advance(double dt);
  absl::Status Reroute();
  // InGo: the joint batch choice of the running jobs under their routing (scheduler/batch/);
  // a job whose batch changes keeps its fraction of the target.
  absl::Status ChooseBatches(const std::vector<RoutedJob>& routed);
  // Memory (grants only when the running set changed) and rates.
  absl::Status Replan(bool running_set_changed);
  void ComputeRates();
  void Contention();
  void Record(const std::string& event, const std::string& job);
  double InUse() const;

  const std::vector<TraceJob>& trace_;
  const SimOptions& options_;
  PlanningInput input_;
  std::unique_ptr<Network> network_;
  std::unique_ptr<FlowEvaluator> evaluator_;
  std::unique_ptr<HostPlacer> placer_;
  const ShortestRemainingWorkWithAging default_priority_;
  std::vector<size_t> order_;  // trace indices by arrival
  std::vector<RunningJob> running_;
  std::deque<size_t> waiting_;  // positions in order_
  std::vector<SimJobResult> results_;
  core::Plan memory_plan_;  // last memory planning (switchml pools persist through it)
  std::vector<double> occupancy_integral_;  // per node
  std::vector<double> peak_;                // per node
  double now_ = 0;
  double first_arrival_ = 0;
  SimSummary summary_;
  std::vector<TimelineRow> timeline_;
  std::vector<OnOffJob> on_off_jobs_;  // reused by ComputeRates
  std::vector<double> scratch_;
  std::vector<int> touched_;
  std::vector<char> mark_;
};

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

absl::Status Simulation::Reroute() {
  ++summary_.routings;
  input_.jobs.clear();
  for (const RunningJob& r : running_) {
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
    input_.jobs.push_back(std::move(in));
  }
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
      r.switches.push_back(std::move(s));
    }
  }
  return absl::OkStatus();
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

// Up/down coefficients of every running job blended with its fallbacks, then max-min fair rates.
void Simulation::ComputeRates() {
  std::vector<VirtualFlow> flows;
  flows.reserve(2 * running_.size());
  scratch_.resize(network_->num_resources(), 0.0);
  mark_.resize(network_->num_resources(), 0);
  // Coefficients of one direction (or, with `both`, of both directions summed).
  auto blend = [&](const RunningJob& r, bool up, bool both = false) {
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
  };
  if (options_.traffic == TrafficModel::kOnOff) {
    // One unit per job: both directions at λ (the iteration waits for the slower one anyway).
    std::vector<OnOffJob>& jobs = on_off_jobs_;
    jobs.resize(running_.size());
    for (size_t i = 0; i < running_.size(); ++i) {
      const RunningJob& r = running_[i];
      const TraceJob& t = trace_[r.trace_index];
      jobs[i].flow.coefficients = blend(r, true, /*both=*/true);
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
      flows.push_back(VirtualFlow{blend(r, true), r.cap_gbps});
      flows.push_back(VirtualFlow{blend(r, false), kUnbounded});
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

absl::Status Simulation::Replan(bool running_set_changed) {
  if (running_.empty()) return absl::OkStatus();
  const core::Graph& g = network_->graph();
  const ShortestRemainingWorkWithAging default_priority;
  const PriorityFunction& priority_fn =
      options_.priority != nullptr ? *options_.priority : default_priority;
  auto state_of = [&](const RunningJob& r) {
    const TraceJob& t = trace_[r.trace_index];
    return MemoryJobState{
        .id = r.id,
        .user_priority = t.priority,
        .workers = r.placement.workers,
        .remaining_comm_bytes = std::max(0.0, r.target - r.done) * t.gradient_bytes,
        .age_s = now_ - t.arrival_s,
        .admission = static_cast<int64_t>(r.id)};
  };
  if (running_set_changed) {
    // Memory planning (planner form) with the routed plans: priorities and grants; SwitchML
    // pools persist through `previous`.
    std::vector<MemoryJobState> states;
    core::Plan plan;
    for (const RunningJob& r : running_) {
      states.push_back(state_of(r));
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
  }
  // Priorities change with progress and age at every event (the same function the memory
  // planner applies).
  for (RunningJob& r : running_) {
    const MemoryJobState st = state_of(r);
    r.plan.priority = priority_fn.Priority({.user_priority = st.user_priority,
                                            .remaining_comm_bytes = st.remaining_comm_bytes,
                                            .age_s = st.age_s});
  }
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
  if (options_.policy == MemoryPolicy::kAtp || options_.policy == MemoryPolicy::kEsa) {
    // Fixed point psi = F(rates(psi)), warm-started from the previous psi. Full steps while the
    // residual shrinks; the step halves (down to 1/64) whenever it does not (oscillation).
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
  first_arrival_ = trace_.empty() ? 0 : trace_[order_.front()].arrival_s;
  now_ = first_arrival_;
  size_t next_arrival = 0;
  size_t completed = 0;
  while (completed < trace_.size()) {
    // Next event: an arrival or a running job's next milestone (completion included).
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
    Advance(next - now_);
    now_ = std::max(now_, next);
    ++summary_.events;
    bool changed = false;
    // Completions and milestones.
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
        ++completed;
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
    while (next_arrival < order_.size() && trace_[order_[next_arrival]].arrival_s <= now_) {
      waiting_.push_back(next_arrival);
      Record("arrival", trace_[order_[next_arrival]].name);
      ++next_arrival;
    }
    // Start waiting jobs in arrival order; later ones may start when an earlier one cannot.
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
    if (changed) {
      // Keep running jobs in id order so routing sees a stable order.
      std::sort(running_.begin(), running_.end(),
                [](const RunningJob& a, const RunningJob& b) { return a.id < b.id; });
      if (absl::Status st = Reroute(); !st.ok()) return st;
    }
    if (absl::Status st = Replan(changed); !st.ok()) return st;
    if (progress) progress(static_cast<double>(completed) / static_cast<double>(trace_.size()));
  }

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

}  // namespace

void SummariseJobs(const std::vector<SimJobResult>& jobs, SimSummary* summary) {
  summary->jobs = static_cast<int>(jobs.size());
  if (jobs.empty()) return;
  std::vector<double> jct;
  double first = kInf;
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
  Simulation sim(topology, trace, options);
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
