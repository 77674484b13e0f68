// The routing algorithms of docs/routing.md section 3 behind one interface: given a snapshot
// (PlanningInput) they choose, for every parameter-server job, the PS shares, the aggregation node
// and path of every worker flow and the path of every aggregator's stream. Every result is scored
// by the one flow-level evaluator (scheduler/model/flow_model.h); what a plan reports is always the
// evaluated rate, never a solver's value.
//
// Algorithms (names for MakeRoutingAlgorithm and `inac plan --algorithm`):
//   no_ina      scheduler/routing/baselines.h  load-balanced paths, no aggregation
//   atp         scheduler/routing/baselines.h  ATP (NSDI 2021), one PS: worker's ToR, spill-over,
//                                              re-aggregation at the PS's ToR (two-level)
//   atp_sharded scheduler/routing/baselines.h  ATP over every PS of the job, equal shares
//   switchml    scheduler/routing/baselines.h  SwitchML (NSDI 2021): first INA switch on the path
//   grid        scheduler/routing/grid.h       GRID (IEEE/ACM ToN 31(5), 2023): LP + rounding
//   grid-split  scheduler/routing/grid_split.h INAC: GRID's LP realised by chunk-range splits,
//                                              cross-pod candidates; the better of it and grid
//   inart       scheduler/routing/inart.h      InArt (WWW 2024): KKT shares, then LP + rounding
//   optimal     scheduler/routing/optimal.h    CBC MIP over GRID's candidates (small instances)
//   ingo        GRID's routing; scheduler::ComputePlan then chooses batch sizes (InGo, IWQoS
//               2024; scheduler/batch/batch_planner.h)
//
// Several jobs: the baselines and `optimal` plan one job at a time in priority order (priority
// desc, id asc), each around the evaluated load of the jobs planned before it. `grid` and `inart`
// plan all jobs in one LP when it has at most PlanningOptions::joint_lp_max_columns columns
// (maximising the smallest job rate), otherwise in the same priority order.
//
// All algorithms are pure and deterministic for a given PlanningInput (seed included), except
// that a solver stopped by its time limit may stop at a different point (see lp/linear_program.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/model/planning_input.h"

namespace inac::scheduler {

// How one job's plan was obtained (printed by `inac plan`, not part of core::JobPlan).
struct JobDiagnostics {
  core::JobId job_id = 0;
  // "shortest_paths", "atp", "switchml", "lp_rounding", "atp_floor", "mip", ...
  std::string source;
  std::string lp_status;  // status of the LP/MIP behind the plan, empty if none
  // What RoutingResult::lp_bound_gbps is: "lp_optimum" (the LP solved to optimality),
  // "dual_bound" (the LP stopped on its time limit; the weak-duality bound of its last duals,
  // above the optimum), "egress_bound" (stopped; the workers' egress capacity was the smaller
  // bound), "none" (stopped without a finite bound: none is reported, never a primal value).
  // Empty for algorithms without an LP.
  std::string lp_bound_source;
  int lp_columns = 0;
  int lp_rows = 0;
  bool joint = false;  // planned in a joint multi-job LP
};

// The routed form of a plan, index-based, in PlanningInput::jobs order (PS jobs only).
struct RoutingResult {
  std::vector<RoutedJob> jobs;
  std::vector<std::optional<double>> lp_bound_gbps;  // per job, LP-based algorithms only
  std::vector<JobDiagnostics> diagnostics;
};

class RoutingAlgorithm {
 public:
  virtual ~RoutingAlgorithm() = default;
  virtual std::string_view name() const = 0;
  // Routes every job of network.input(). InvalidArgument for ring all-reduce jobs (planned by
  // Rina, not here) and jobs without workers; Internal when a solver fails.
  virtual absl::StatusOr<RoutingResult> Route(const Network& network) const = 0;
};

// "no_ina", "atp", "atp_sharded", "switchml", "grid", "grid-split", "inart", "optimal" (and the
// names RoutingAlgorithmNames lists); InvalidArgument listing
// the names otherwise.
absl::StatusOr<std::unique_ptr<RoutingAlgorithm>> MakeRoutingAlgorithm(std::string_view name);
std::vector<std::string> RoutingAlgorithmNames();

struct PlannedRouting {
  core::Plan plan;  // algorithm, jobs (rate/comm/iteration/lp bound filled); solve_ms left 0
  Evaluation evaluation;
  std::vector<JobDiagnostics> diagnostics;
};

// Routes and evaluates `input` with `algorithm`. Plan::solve_ms is left 0: the caller measures
// it (the scheduler has no clock). Errors: those of Network::Create and Route.
absl::StatusOr<PlannedRouting> PlanRouting(const RoutingAlgorithm& algorithm,
                                           const PlanningInput& input);
absl::StatusOr<PlannedRouting> PlanRouting(std::string_view algorithm, const PlanningInput& input);

// --- Helpers shared by the algorithms. ---

// Job indices in planning order: priority desc, then id asc.
std::vector<int> PriorityOrder(const PlanningInput& input);
// OK, or InvalidArgument naming the first job that is not a PS job with workers and known hosts.
absl::Status CheckPsJobs(const Network& network);
// Node indices of a job's workers / parameter servers (spec order).
std::vector<int> WorkerNodes(const Network& network, int job);
std::vector<int> PsNodes(const Network& network, int job);

// Compares evaluated rate vectors: max-min fair order (sorted ascending, lexicographic, relative
// tolerance 1e-9). True when `a` is strictly better than `b`.
bool BetterRates(std::vector<double> a, std::vector<double> b);

}  // namespace inac::scheduler
