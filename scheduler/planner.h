// The one planner: what the controller runs on every re-plan and what `inac plan` prints, from the
// same inputs and the same defaults, so that "what the controller would do" is true.
//
// Contract:
//  - ComputePlan is pure and deterministic for a request: routing of the parameter-server jobs
//    (scheduler::PlanRouting with options.algorithm, seed, rounds, paths and time limits; ATP's
//    two-level re-aggregation allowed -- PlanningOptions::reaggregation true -- since the intents
//    program chains), then
//    stability against `previous` (PlannerOptions::replan_move_threshold: a running job keeps its
//    previous routes unless the new routes raise its rate, or the minimum rate, by more than the
//    threshold -- compared with the plan that moves nobody, the other jobs placed around the kept
//    ones by scheduler::AdmitJobs; rates on the routes alone, before memory; docs/controller.md
//    "Incremental planning"), then aggregator memory
//    (scheduler::AssignAggregators with options.memory_policy, each job's memory state taken at
//    now_ms), then re-scoring with the memory caps (EvaluatePlan), then ring all-reduce jobs (Rina,
//    scheduler::PlanRingJobs: abstract INA racks, ring order and agents chosen on the flow model
//    around the PS jobs' load; docs/rina.md), batch sizes, jobs sorted by id, aggregation
//    generations carried from `previous` (core::CarryAggregationGenerations) and the switch intents
//    (core::DeriveSwitchIntents). Plan::version and Plan::solve_ms are left 0 and Plan::fingerprint
//    empty: the caller numbers plans, owns the clock, and fingerprints what it watches (the
//    controller: every active job, also those it cannot place now).
//  - Errors: InvalidArgument for an unknown algorithm or memory policy and for jobs the
//    algorithms refuse; the routing and memory planners' errors otherwise.
//  - What a plan depends on is fingerprinted outside the planner, by server::PlanFingerprint
//    (server/plan_fingerprint.h): change detection is the controller's, not planning. The options
//    below marked "not part of PlanFingerprint" do not enter it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/planning_input.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

// The planner's options, with the defaults of both the controller (`inac serve`, config file
// "controller") and `inac plan`.
struct PlannerOptions {
  // A RoutingAlgorithmNames() entry. `trees` (scheduler/routing/trees.h: aggregation trees over
  // the whole fabric, single-level and chained, priced by column generation) is the default: on
  // GRID's settings and the multi-job mixes of routing_bench it delivers the best plan of every
  // algorithm, and plans as fast as `grid` (docs/routing.md section 3b). `grid`, `grid-split`
  // and the baselines stay selectable for comparison.
  std::string algorithm = "trees";
  std::string memory_policy = "esa";  // esa | atp | switchml | no_ina
  uint64_t seed = 1;
  int rounds = 8;  // randomised rounding repetitions (GRID/InArt)
  int paths = 4;   // candidate paths per (source, destination)
  // GRID/InArt: spread candidates for a job whose per-worker LP is estimated above this many
  // columns (PlanningOptions::spread_min_columns: 20,000, i.e. jobs of a few hundred workers); 0:
  // every job (better plans for mid-size jobs too, at about twice the LP time); -1: never.
  int64_t spread_min_columns = PlanningOptions{}.spread_min_columns;
  // grid-split: chunk ranges (aggregation tags) per (job, PS) shard at most
  // (PlanningOptions::split_max_ranges); 0: the data plane's maximum (64 with one PS). A switch
  // table budget: fewer ranges, fewer entries, plans as good or up to a few % slower.
  int split_max_ranges = PlanningOptions{}.split_max_ranges;
  double lp_time_limit_s = 60;
  double mip_time_limit_s = 30;
  // Valid bounds (scheduler/routing/bounds.h): each PS job's JobPlan::lp_bound_gbps is
  // ChainedBound -- alone on the network, a bound on every plan the data plane runs -- when its
  // LP has at most this many columns (GRID's k=8 setting: ~19,000, 0.1-0.4 s each); otherwise
  // none is printed. 0 (the controller's default: 20 jobs would add seconds to every re-plan):
  // no bound. `inac plan` asks for them (--bound-max-columns). Not part of PlanFingerprint.
  int64_t bound_max_columns = 0;
  // Stability of re-plans with a `previous` plan: a running job (state kRunning, planned in
  // `previous`, its routes still valid on the topology) keeps its routes unless the new plan
  // raises its evaluated rate -- or the smallest rate of all jobs -- by more than this fraction
  // (0.10: by more than 10 %). Negative: no stability, every job takes the new plan's routes.
  // Not part of PlanFingerprint (it decides how a re-plan moves jobs, not what it depends on).
  double replan_move_threshold = 0.10;
  // The routing algorithm of incremental admission (scheduler/incremental.h); empty: `algorithm`,
  // or "grid" when that is "grid-split" or "optimal". Not part of PlanFingerprint.
  std::string admission_algorithm;
  // GRID/InArt plan all jobs in one joint LP up to this many LP columns, otherwise one job at a
  // time (PlanningOptions::joint_lp_max_columns). 8000 (the routing library's default is 20000):
  // the joint LP of 20 jobs of 8..32 workers on a k=8 fat-tree (14,000 columns) takes 3-5 s of
  // CLP for a minimum rate the sequential mode also reaches in under 1 s (docs/controller.md).
  int64_t joint_lp_max_columns = 8000;
  // Batch-size choice (algorithm "ingo", or a job with several batch sizes): the joint search and
  // the hysteresis of re-choices against `previous` (scheduler/batch/). Not part of
  // PlanFingerprint.
  BatchOptions batch_options;
  BatchSwitchRule batch_rule;
};

struct PlanRequest {
  const core::Topology* topology = nullptr;  // not owned; required
  int64_t topology_version = 0;              // only for the fingerprint
  std::vector<core::Job> jobs;               // ids unique; their state and progress matter
  const core::Plan* previous = nullptr;      // not owned; nullable
  int64_t now_ms = 0;                        // the caller's clock, for memory priorities (age)
  PlannerOptions options;
  // When each job's batch size last changed (the caller's clock); absent: never. For the
  // hysteresis of batch re-choices (PlannerOptions::batch_rule).
  std::map<core::JobId, int64_t> batch_changed_ms;
};

// What a job's routing said about it (parameter-server jobs only).
struct JobReport {
  JobEvaluation evaluation;    // after the memory caps
  JobDiagnostics diagnostics;  // how the routing planned it
  // Batch-size choice (InGo, scheduler/batch/batch_planner.h), when it ran: the prediction at the
  // planned batch, at the submitted batch, and how the joint choice was found.
  std::optional<JobBatchOutcome> batch;
  std::optional<JobBatchOutcome> batch_fixed;
  std::string batch_method;
  // The routing algorithm's own LP optimum over its candidates (grid, grid-split, inart,
  // optimal): an optimum of that candidate family, not a bound on what the data plane runs.
  std::optional<double> candidate_optimum_gbps;
};

struct PlannerOutput {
  core::Plan plan;
  std::vector<core::SwitchIntent> intents;  // DeriveSwitchIntents(topology, plan), version 0
  std::map<core::JobId, JobReport> reports;
  // Running jobs whose previous routes were kept because the new plan's gain for them was within
  // PlannerOptions::replan_move_threshold, and those that moved because it was larger.
  std::vector<core::JobId> kept_by_threshold;
  std::vector<core::JobId> moved_by_threshold;
};

absl::StatusOr<PlannerOutput> ComputePlan(const PlanRequest& request);

// --- Building blocks shared with scheduler/incremental.h (same steps as ComputePlan). ---

// The routing snapshot of `request`: its topology, options and parameter-server jobs (request
// order); ring all-reduce jobs are appended to `rings` (not owned, point into request.jobs).
PlanningInput RoutingInputOf(const PlanRequest& request, std::vector<const core::Job*>* rings);
// The memory planner's options of `options` (InvalidArgument for an unknown policy).
absl::StatusOr<MemoryPlannerOptions> MemoryOptionsOf(const PlannerOptions& options);
// Re-scores every PS JobPlan of `out->plan` on `input` with the memory caps of its grants
// (the hold time each grant was sized with, GrantHoldUs) and records the evaluations in
// `out->reports`. Internal, naming the job, when the flow model cannot score the plan: the plan
// must not be published with the routing's unscored rates.
absl::Status Rescore(const PlanningInput& input, const MemoryPlannerOptions& memory,
                     PlannerOutput* out);
// JobPlan::lp_bound_gbps of every PS job: ChainedBound (scheduler/routing/bounds.h) within
// PlannerOptions::bound_max_columns, none otherwise; the routing's own LP optimum moves to
// JobReport::candidate_optimum_gbps (a candidate-family optimum is not a bound).
void AttachBounds(const PlanRequest& request, const PlanningInput& input, PlannerOutput* out);
// The last steps of ComputePlan: algorithm and policy names, ring jobs, batch sizes, jobs sorted
// by id, generations carried from request.previous and the intents.
void FinishPlan(const PlanRequest& request, const std::vector<const core::Job*>& rings,
                PlannerOutput* out);

}  // namespace inac::scheduler
