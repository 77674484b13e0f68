// Fills the memory part of a plan: core::JobPlan::aggregators and core::JobPlan::priority, with
// the planner form of a memory policy (scheduler/memory/allocator.h; docs/memory.md section 2).
// The planner calls it after routing; the flow evaluator's memory cap then uses the aggregators.
//
// For every job and every INA switch v where the job's plan aggregates (a FlowPlan's
// aggregation_node or an AggregatorPlan's switch_id), the job's window there is sized for the
// traffic of its tags on v (core::JobTagsOf: the chunk ranges the data plane aggregates there,
// chain parents included):
//   r   = min(line rate of its workers, 1.02 x JobPlan::rate_gbps): the rate the routing planned
//         (evaluated before memory), the line rate when the plan has none (rate 0);
//   n_t = WindowAggregators(r x x_s * (range end - begin of t),
//                           HoldTimeUs(policy, TimingAt(...))) + 1 for each of those tags t,
//   W_j = max(T, min(max_t ceil(n_t · Σw / w_t), 2 · Σ_t n_t)) for T >= 2 tags, and for one
//   tag its window WindowAggregators(r x w, hold) exactly
// with T the number of those tags and w_t = x_s * (range end - begin) (each tag needs one
// aggregator; the grant is split over them by core::SplitGrant in proportion to w, rounding down,
// so W_j is the least grant whose quotas give every tag its n_t, bounded so that a tiny tag
// cannot inflate it), and the policy's allocator divides the
// switch's A_v among the jobs. A grant below T is no grant: some tag would have no window. With
// `fall_back_without_memory`, a job granted no aggregator on a switch falls back to its PS there
// (FallBackToPs), so the plan no longer counts on memory it does not have (its PS link then
// carries the unaggregated streams); without it the job simply gets no entry there.
//
// Pure and deterministic: jobs ranked by (priority desc, id asc) for esa; (admission, id) for
// switchml. O(S * J log J).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/priority.h"

namespace inac::scheduler {

// What the memory planner needs to know about a job besides its plan.
struct MemoryJobState {
  core::JobId id = 0;
  int user_priority = 0;             // JobSpec::priority
  std::vector<std::string> workers;  // JobSpec::workers (line rate)
  double remaining_comm_bytes = 0;   // remaining iterations x gradient bytes
  double age_s = 0;                  // now - arrival
  int64_t admission = 0;             // admission order (arrival time in ms, say)
};

// From a controller's job record; `now_ms` is the caller's clock (Unix ms). The age is counted in
// whole periods of `age_grid_ms` of that clock (ticks since the epoch at now minus at creation,
// times the period), so every job ages at the same instants: with the grid equal to the aging
// step of ShortestRemainingWorkWithAging (10 s by default) aging raises all priorities together
// and never re-orders a fixed set of jobs by itself (no churn of ESA priorities in the switches);
// an older job still outranks a newer one of equal work by the ticks between them.
// age_grid_ms <= 0: the exact age.
MemoryJobState MemoryJobStateFromJob(const core::Job& job, int64_t now_ms,
                                     int64_t age_grid_ms = 10'000);

struct MemoryPlannerOptions {
  MemoryPolicy policy = MemoryPolicy::kEsa;
  AggregatorTimingOptions timing;
  // Not owned; nullptr means ShortestRemainingWorkWithAging with default options.
  const PriorityFunction* priority = nullptr;
  bool fall_back_without_memory = true;
};

// The one hold-time model of a grant (docs/memory.md section 1, "One hold-time model"):
// HoldTimeUs(options.policy, TimingAt(graph, job, switch_id, options.timing)). AssignAggregators
// sizes windows with it and the planner's re-scoring (EvaluatePlan's memory cap) divides by it,
// so a job granted its full window is never capped below the rate the window was sized for.
double GrantHoldUs(const core::Graph& graph, const core::JobPlan& job, const std::string& switch_id,
                   const MemoryPlannerOptions& options);

// Sets aggregators and priority of every JobPlan of `plan`. `previous` (nullable) supplies the
// aggregators each job held (SwitchML keeps its pools). Jobs that aggregate nowhere get an empty
// map but still a priority. Errors: InvalidArgument when a JobPlan has no MemoryJobState (the
// plan is left unchanged). Precondition: `plan`'s node ids are in `topology`'s graph.
absl::Status AssignAggregators(const core::Graph& graph, const std::vector<MemoryJobState>& jobs,
                               const core::Plan* previous, const MemoryPlannerOptions& options,
                               core::Plan* plan);

// Ring all-reduce jobs (Rina, docs/rina.md "Data plane"): grants every ring job of `plan` (in
// `jobs`) aggregators on the ToR of each of its abstract racks (core::RingRacksOf): the rack's
// whole gradient, ceil(gradient_bytes / aggregator_bytes) (the rack's workers send a whole
// iteration at once and the agent answers after the ring), at least the window AssignAggregators
// would size, at most what the switch has left after every grant already in `plan`; ring jobs in
// (spec priority desc, id) order. A rack granted nothing keeps no entry in `aggregators` (its
// chunks reach the agent unaggregated); ring jobs never fall back otherwise. Policy no_ina grants
// nothing. Deterministic.
void AssignRingAggregators(const core::Graph& graph, const std::vector<core::Job>& jobs,
                           const MemoryPlannerOptions& options, core::Plan* plan);

// Between re-plans ESA's data-plane priorities follow the jobs' progress (docs/memory.md
// section 2, "Priorities between re-plans"): recomputes JobPlan::priority, with `priority`
// (nullptr: the default ShortestRemainingWorkWithAging), of every JobPlan that has a state in
// `jobs` and is not a ring (ring jobs hold no switch state), leaving routes and aggregators alone.
// Returns true when the order the switches act on changed: the jobs ranked by priority (desc), ties
// kept as ties, differ from before; a uniform shift (every job aged by one step) is no change.
// Deterministic.
bool RefreshPriorities(const std::vector<MemoryJobState>& jobs, const PriorityFunction* priority,
                       core::Plan* plan);

// The INA switches where `job` aggregates, sorted, unique.
std::vector<std::string> AggregatingSwitches(const core::Graph& graph, const core::JobPlan& job);

// Re-points every flow of `job` aggregated at `switch_id` to its PS and drops the switch's
// aggregator paths; streams it re-aggregated (aggregator paths of other switches ending at it,
// for the same PS) continue along its path instead. A re-pointed flow's path runs on to the PS:
// along the switch's aggregator path and, when that ends at a parent that re-aggregates it (a
// chain child), on through the parent's own path (and its parent's) to the PS; a fewest-hop path
// over up links when the plan has none or the chain does not reach the PS. A node the path would
// visit twice cuts the loop out (so does an extended stream).
void FallBackToPs(const core::Graph& graph, const std::string& switch_id, core::JobPlan* job);

}  // namespace inac::scheduler
