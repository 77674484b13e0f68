// The simulator's internal state (scheduler/sim/simulator.h describes the model): the running
// jobs, their aggregating switches and the Simulation class that Simulate runs. Internal to
// scheduler/sim/: the event loop is in simulator.cc, the routing of the running jobs in
// simulation_routing.cc, memory planning, contention and rates in simulation_rates.cc.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/sim/simulator.h"

namespace inac::scheduler::sim_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kBytesPerGbit = 1e9 / 8;

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
             const SimOptions& options);

  absl::StatusOr<SimResult> Run(const SimProgress& progress);

 private:
  // --- The event loop (simulator.cc). ---
  absl::Status Validate() const;
  // Arrival order and the results' fixed fields.
  void InitResults();
  // The time of the next event: an arrival or a running job's next milestone (completion
  // included); an error when nothing can happen.
  absl::StatusOr<double> NextEvent(size_t next_arrival) const;
  // Completions and milestones at now_; true when a job completed.
  bool CompleteAndMark(size_t* completed);
  // Starts waiting jobs in arrival order; true when one started.
  bool StartWaiting();
  SimResult Finish();
  void Advance(double dt);
  void Record(const std::string& event, const std::string& job);
  double InUse() const;

  // --- Routing of the running jobs (simulation_routing.cc). ---
  absl::Status Reroute();
  // The planning input of a running job.
  JobInput InputOf(const RunningJob& r) const;
  // Switch `id` of `r`'s routed plan, with its fallback usage; keeps its grant from
  // `granted_before`.
  absl::StatusOr<JobSwitch> SwitchOf(const RunningJob& r, const std::string& id,
                                     const std::map<std::string, int64_t>& granted_before) const;
  // InGo: the joint batch choice of the running jobs under their routing (scheduler/batch/);
  // a job whose batch changes keeps its fraction of the target.
  absl::Status ChooseBatches(const std::vector<RoutedJob>& routed);

  // --- Memory and rates (simulation_rates.cc). ---
  // Memory (grants only when the running set changed) and rates.
  absl::Status Replan(bool running_set_changed);
  MemoryJobState StateOf(const RunningJob& r) const;
  absl::Status GrantMemory();
  // psi, occupancy and caps of the policies without contention (no_ina, switchml).
  void ApplyStaticPolicies();
  // ATP/ESA: the contention fixed point psi = F(rates(psi)).
  void ContentionFixedPoint();
  void ComputeRates();
  // Coefficients of one direction (or, with `both`, of both directions summed) of `r`, blended
  // with its fallbacks.
  Coefficients Blend(const RunningJob& r, bool up, bool both = false);
  void Contention();

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

}  // namespace inac::scheduler::sim_internal
