// InGo in the planner (docs/batch-size.md section 3): the batch-size choice of
// scheduler/batch/batch_size.h applied to a routed plan with its memory grants, as
// scheduler::ComputePlan runs it for `--algorithm ingo` (GRID's routing, then the joint batch
// choice) and automatically for jobs that allow several batch sizes. Pure and deterministic.
#pragma once

#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/planning_input.h"
#include "scheduler/planner.h"

namespace inac::scheduler {

// True when some PS job of `input` has more than one allowed batch size.
bool AnyBatchChoice(const PlanningInput& input);

struct PlanBatchResult {
  BatchChoice fixed;   // every job at its submitted batch (the same routing)
  BatchChoice chosen;  // ChooseBatchSizes
  std::map<core::JobId, JobBatchOutcome> by_job;  // chosen, per job id
  std::map<core::JobId, JobBatchOutcome> fixed_by_job;
};

// For the jobs of `plan` (each must be a PS job of `input`, routed; JobPlan::aggregators are the
// memory caps, with hold times from `hold_us` when given): builds the problem
// (BuildBatchProblem; `remaining` by job id, absent: 1), chooses jointly, and writes each
// JobPlan's batch_size and iteration_ms = t(b) + comm_ms (comm_ms as evaluated, unchanged).
// Errors: Network::Create, FlowEvaluator::FromJobPlan, BuildBatchProblem.
absl::StatusOr<PlanBatchResult> ChoosePlanBatchSizes(const PlanningInput& input,
                                                     const HoldTimeFunction& hold_us,
                                                     const std::map<core::JobId, double>& remaining,
                                                     const BatchOptions& options, core::Plan* plan);

// The planner's step (scheduler::ComputePlan, after the memory re-scoring): when
// request.options.algorithm is "ingo" or some PS job allows several batch sizes, chooses the batch
// sizes of the PS jobs of out->plan jointly; remaining fraction of a job = 1 - iterations_done /
// iterations (at least 1e-3). A job not in request.previous takes its choice; a job planned in
// request.previous keeps its previous batch unless
// the new choice improves the predicted total completion by more than
// request.options.batch_rule.hysteresis and its last change (request.batch_changed_ms, absent:
// never) is at least batch_rule.min_interval_ms before request.now_ms (ApplyBatchHysteresis).
// Writes JobPlan::batch_size and iteration_ms and out->reports[id].batch / batch_fixed. Does
// nothing otherwise. Errors: those of ChoosePlanBatchSizes.
absl::Status ChoosePlannerBatchSizes(const PlanRequest& request, const PlanningInput& input,
                                     const MemoryPlannerOptions& memory, PlannerOutput* out);

}  // namespace inac::scheduler
