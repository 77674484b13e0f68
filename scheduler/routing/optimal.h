// `optimal`: the integral optimum of the routing problem over the same candidates as GRID (with
// PlanningOptions::extra_candidates + 4 detour switches), by CBC branch and cut, for checking the
// heuristics on small instances (the worked examples; fat-tree k=4 with up to 16 workers).
//
// MIP (μ = 1/λ makes it linear): binary x_{w,s,a,p} (one option and path per (worker, PS) pair),
// binary z_{a,s,q} (one path per aggregating switch's stream), μ >= 0;
//   minimise μ  s.t.  Σ_{a,p} x = 1;  Σ_q z_{a,s,q} <= 1;  Σ_p x_{w,s,a,p} <= Σ_q z_{a,s,q};
//   every resource r: Σ x_s · (x and z crossing r) <= residual_r · μ.
// λ = 1/μ is then exactly the evaluator's up rate of the integral plan. PS shares are fixed: 1
// for one PS, InArt's phase-1 shares for several (so `optimal` is optimal over routing, not over
// the split). The GRID plan is CBC's first incumbent. Several jobs: one at a time in priority
// order around the jobs before them. lp_bound_gbps: GRID's LP bound.
//
// Exponential in the worst case; bounded by PlanningOptions::mip_time_limit_s per job (then the
// best incumbent is returned, JobDiagnostics::lp_status "feasible"). Deterministic when CBC
// proves optimality within the limit.
#pragma once

#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

class OptimalRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "optimal"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
