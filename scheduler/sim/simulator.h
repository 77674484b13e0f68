// Discrete-event, flow-level simulator of a job trace through the whole scheduler: placement,
// routing (any scheduler/routing algorithm), switch-memory policy (scheduler/memory) and the
// flow evaluator's max-min fair rates (scheduler/model). Reproduces the JCT evaluation of ESA
// (ICNP 2023, section 5) and ATP (NSDI 2021, section 5) in INAC's common model; documented in
// docs/memory.md ("Simulator").
//
// Events: arrival, start (hosts placed), iteration milestones (every milestone_fraction of a
// job's iterations; priorities change as work shrinks), completion. Between events every rate is
// constant. At every event the simulator re-plans memory and recomputes rates; when the set of
// running jobs changed it re-routes them first.
//
// Traffic (SimOptions::traffic): on/off by default — a job communicates only for G/λ of each
// iteration, and links and aggregators carry its mean load (mean-field processor sharing,
// OnOffFairRates); or continuous (every job always sending at λ, max-min fair).
// Rates: job j's per-unit usage is its routed usage u_j blended with the usage of its PS
// fallback at each aggregating switch v: u_j + sum_v psi_jv (u_j^{v->PS} - u_j), where psi_jv is
// the fraction of its chunks not aggregated at v:
//   switchml: 0 with a pool (rate capped by pool * chunk / hold), 1 without;
//   atp, esa: the analytical contention model (scheduler/memory/contention.h) at the rates
//             themselves, a fixed point found by iteration from the previous solution (full
//             steps, halved while the residual does not shrink);
//   no_ina:   1 everywhere.
// Stragglers (SimOptions::timing.stragglers, docs/memory.md "Stragglers"): per chunk each worker's
// arrival offset is drawn from a seeded distribution; its expected range lengthens every policy's
// hold and the fraction of fragments still to come sets what an ESA preemption loses.
// T_iter = compute + max(G / up rate, G / down rate); progress is continuous in iterations.
//
// Pure: no I/O, no clock, no threads; deterministic for (topology, trace, options).
// Cost per event O(I * (J * R + S * J)) with I fixed-point iterations, plus one routing call when
// the running set changes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/topology.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/priority.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/sim/placement.h"
#include "scheduler/sim/trace.h"

namespace inac::scheduler {

// How jobs load links and memory between events.
enum class TrafficModel {
  // Each iteration a job computes, then sends its gradient at λ; links and aggregators see its
  // mean load (OnOffFairRates: mean-field processor sharing; ChunkLoad::active_fraction). Bytes
  // sent per iteration are exactly G per stream. The default.
  kOnOff,
  // Every running job sends at λ all the time (classic max-min fair flow level): conservative,
  // it charges links and memory with a load the job only has while communicating.
  kContinuous,
};

struct SimOptions {
  MemoryPolicy policy = MemoryPolicy::kEsa;
  // Routing of the running jobs. Not owned; required. For kNoIna any algorithm works (every
  // aggregation falls back to the PS); "no_ina" routing gives load-balanced paths as well.
  const RoutingAlgorithm* routing = nullptr;
  AggregatorTimingOptions timing;
  TrafficModel traffic = TrafficModel::kOnOff;
  // Not owned; nullptr: ShortestRemainingWorkWithAging with default options.
  const PriorityFunction* priority = nullptr;
  PlacementRule placement = PlacementRule::kShared;
  uint64_t seed = 1;
  // A milestone every this fraction of a job's iterations (0 < f <= 1).
  double milestone_fraction = 0.1;
  // Contention fixed point: iteration cap per event and tolerance on psi (max norm).
  int max_fixed_point_iterations = 200;
  double fixed_point_tolerance = 1e-10;
  // Record one TimelineRow per event.
  bool record_timeline = false;
  // Passed to the routing algorithm (paths, rounds, solver limits); `reaggregation` is always
  // false here (the simulated data plane aggregates at one level, as the real one).
  PlanningOptions planning;
  // InGo (docs/batch-size.md): when the running set changes, choose the batch sizes of the
  // running jobs whose trace gives batch_sizes jointly under their routing
  // (scheduler/batch/batch_size.h; shared memory pools as a resource for atp and esa); a job
  // whose batch changes keeps its fraction of the target, its iterations to the target become
  // S(n b) and its compute t(b). False: every job at its trace batch (fixed).
  bool adaptive_batch = false;
  BatchOptions batch;
};

struct SimJobResult {
  core::JobId id = 0;  // 1-based position in the arrival-sorted trace
  std::string name;
  std::string model;
  int workers = 0;
  std::vector<std::string> hosts;
  std::vector<std::string> parameter_servers;
  double arrival_s = 0;
  double start_s = 0;  // hosts placed
  double finish_s = 0;
  double jct_s = 0;           // finish - arrival
  double fallback_bytes = 0;  // bytes sent to the PS unaggregated because of memory
  double preemptions = 0;     // expected chunks of this job preempted (esa)
  int batch_size = 0;         // per-worker batch at the finish (adaptive_batch), else the trace's
  int batch_changes = 0;      // adaptive_batch: how often it changed
};

struct SwitchMemoryStats {
  int64_t aggregators = 0;      // A_v
  double mean_utilisation = 0;  // time-average of aggregators in use / A_v over the makespan
  double peak_in_use = 0;       // largest aggregators in use at any event
};

struct SimSummary {
  int jobs = 0;
  double mean_jct_s = 0;
  double p50_jct_s = 0;  // nearest-rank percentiles
  double p99_jct_s = 0;
  double makespan_s = 0;                              // last finish - first arrival
  std::map<std::string, SwitchMemoryStats> switches;  // INA switches
  double preemptions = 0;
  double fallback_bytes = 0;
  int64_t events = 0;
  int64_t routings = 0;
  int64_t fixed_point_iterations = 0;  // contention fixed point, all events
};

// One row per event (SimOptions::record_timeline).
struct TimelineRow {
  double time_s = 0;
  std::string event;  // "arrival", "start", "milestone", "completion"
  std::string job;
  int running = 0;
  int waiting = 0;
  double aggregators_in_use = 0;  // sum over switches
  double fallback_gbps = 0;       // unaggregated input reaching PSs because of memory
};

struct SimResult {
  std::vector<SimJobResult> jobs;  // in trace order (ids are arrival ranks)
  SimSummary summary;
  std::vector<TimelineRow> timeline;
};

// Called after each event with the fraction of jobs completed (for a progress bar).
using SimProgress = std::function<void(double fraction_done)>;

// Simulates `trace` on `topology`. Errors: InvalidArgument when a trace host is not a host of
// the topology, a job needs more hosts than exist, options are out of range or no routing is
// given; FailedPrecondition when running jobs make no progress (a rate of 0: unreachable PS);
// errors of the routing algorithm. Precondition: `topology` is valid (core::ValidateTopology).
absl::StatusOr<SimResult> Simulate(const core::Topology& topology,
                                   const std::vector<TraceJob>& trace, const SimOptions& options,
                                   const SimProgress& progress = nullptr);

// Summary statistics of finished jobs (mean, nearest-rank p50/p99, makespan); used by Simulate.
void SummariseJobs(const std::vector<SimJobResult>& jobs, SimSummary* summary);

// CSV of a timeline: header time_s,event,job,running,waiting,aggregators_in_use,fallback_gbps.
std::string TimelineToCsv(const std::vector<TimelineRow>& rows);

}  // namespace inac::scheduler
