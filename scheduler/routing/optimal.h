// `optimal`: the integral optimum of the routing problem over the same candidates as GRID (with
// PlanningOptions::extra_candidates + 4 detour switches), by CBC branch and cut, for checking the
// heuristics on small instances (the worked examples; fat-tree k=4 with up to 16 workers).
//
// What it is optimal over -- the candidate set, and nothing beyond it:
//   - per (worker, PS) pair exactly one aggregation node: the PS, an INA switch on one of the k
//     shortest worker -> PS paths, or one of the extra_candidates + 4 INA switches with the
//     smallest detour; and one of that node's k shortest worker -> node paths (plus GRID's own
//     routes, added as candidates). Unsplit: no chunk-range splits (FlowPlan::fraction 1).
//   - per (switch, PS) stream one of its k shortest paths to the PS; single-level aggregation (no
//     re-aggregation at another switch, so two-level ATP plans are outside it and may beat it).
//   - PS shares fixed (1 for one PS; InArt's phase-1 shares for several), not optimised.
//   - one job at a time in priority order (not a joint optimum over jobs).
// A plan outside that set (other paths, splits, chains, other shares) can be faster.
//
// MIP (μ = 1/λ makes it linear): binary x_{w,s,a,p} (one option and path per (worker, PS) pair),
// binary z_{a,s,q} (one path per aggregating switch's stream), μ >= 0;
//   minimise μ  s.t.  Σ_{a,p} x = 1;  Σ_q z_{a,s,q} <= 1;  Σ_p x_{w,s,a,p} <= Σ_q z_{a,s,q};
//   every resource r: Σ x_s · (x and z crossing r) <= residual_r · μ.
// λ = 1/μ is then exactly the evaluator's up rate of the integral plan. PS shares are fixed: 1
// for one PS, InArt's phase-1 shares for several (so `optimal` is optimal over routing, not over
// the split). The GRID plan is CBC's first incumbent. Several jobs: one at a time in priority
// order around the jobs before them. lp_bound_gbps: the LP relaxation over this MIP's candidates
// with free shares (a bound on every plan in the candidate set, any split), or its dual bound /
// none when the LP stopped on its time limit (JobDiagnostics::lp_bound_source).
//
// Exponential in the worst case; bounded by PlanningOptions::mip_time_limit_s per job (then the
// best incumbent is returned, JobDiagnostics::lp_status "feasible": then the plan is only the best
// found, not the optimum). Deterministic when CBC proves optimality within the limit.
#pragma once

#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

class OptimalRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "optimal"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
