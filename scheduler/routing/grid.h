// GRID: gradient routing with in-network aggregation (Fang et al., "GRID: Gradient Routing With
// In-Network Aggregation for Distributed Training", IEEE/ACM ToN 31(5), 2023), sections 4-5:
// the R-GRIA algorithm -- LP relaxation of the joint aggregation-node and routing choice, then
// randomised rounding, repeated R times (PlanningOptions::rounds, seeded) keeping the best
// evaluated plan. Ours adds link constraints on k candidate paths (path-based, as the authors'
// IAR variant), a local search after the rounding, and the ATP floor (the better of the LP plan
// and single-level ATP is kept; JobDiagnostics::source says which). A job with several PSs gets
// the LP's PS shares (the shares are LP variables). The LP optimum is reported as lp_bound_gbps
// (a dual bound or none after a time limit; lp_routing.h).
//
// Complexity: one LP of O(W · P · options · k) columns (CLP, polynomial in practice), R + 1
// roundings of O(W · L + R_res) each, the local search's move budget. Deterministic for a seed.
// Details: scheduler/routing/routing_lp.h and lp_routing.h.
#pragma once

#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

class GridRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "grid"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
