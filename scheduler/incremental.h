// Incremental planning (docs/controller.md): admit new jobs onto the plan in force in milliseconds,
// without moving anybody else, and drop finished or cancelled jobs; the controller applies the
// result at once and refines it with a full re-plan (scheduler::ComputePlan) in the background.
//
// AdmitJobs(request): request.previous is the plan in force (required), request.jobs every job
// that should be in the result. A parameter-server job is KEPT when `previous` plans it and its
// routes are still valid on request.topology (core paths over up links, known hosts:
// FlowEvaluator::FromJobPlan); its JobPlan is copied verbatim -- shares, flows, aggregator paths,
// aggregator grants, priority, generation -- except for the predicted rates, which are
// re-scored. Every other PS job is NEW: it is routed alone with the options' admission algorithm
// (PlannerOptions::admission_algorithm; empty: the planner's algorithm, except "grid-split" and
// "optimal", too slow for an admission, which admit with "grid"), its seed, rounds and
// paths, around the kept jobs' evaluated push load as background (PlanningInput::background, as
// the sequential mode plans a job around the jobs before it); its aggregators come from the
// memory policy over what the kept jobs leave on each switch (A_v minus their grants, so a new job
// never preempts a running one here; the background re-plan may). Ring all-reduce jobs are kept
// or added as in ComputePlan. Jobs of `previous` not in request.jobs are dropped (removal). The
// whole plan is then re-scored by the flow model with the memory caps (EvaluatePlan) and finished
// as ComputePlan does (batch sizes, sort, generations, intents).
// With no kept PS job (first plan, or every route invalid) the result is ComputePlan(request)
// itself -- the same plan a full re-plan gives -- and AdmissionOutput::full is true.
//
// Errors: InvalidArgument without a topology or `previous`, or for unknown algorithm / policy
// names; the routing's and memory planner's errors otherwise. Pure and deterministic for a request
// (no clock, no threads; a solver time limit aside, see lp/linear_program.h). Cost: one routing of
// the new jobs on the fabric (for one job with GRID: one LP of that job alone) plus two flow-model
// evaluations of the whole plan; independent of how many jobs are kept.
//
// CountMovedFlows compares two plans: for every PS job planned in both, every (worker, PS) stream
// of `before` whose flows (aggregation node, path, fraction) differ in `after` is one moved flow.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "scheduler/planner.h"

namespace inac::scheduler {

struct AdmissionOutput {
  PlannerOutput output;
  std::vector<core::JobId> kept;      // PS and ring jobs copied from `previous`
  std::vector<core::JobId> admitted;  // jobs routed now
  std::vector<core::JobId> removed;   // jobs of `previous` not in the request
  bool full = false;                  // nothing kept: output is ComputePlan(request)
};

absl::StatusOr<AdmissionOutput> AdmitJobs(const PlanRequest& request);

struct FlowMoves {
  int jobs_compared = 0;   // PS jobs in both plans
  int flows_compared = 0;  // their (worker, PS) streams in `before`
  int flows_moved = 0;
  int jobs_moved = 0;  // jobs with at least one moved flow
};

FlowMoves CountMovedFlows(const core::Plan& before, const core::Plan& after);

}  // namespace inac::scheduler
