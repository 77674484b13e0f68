// The baselines of ALGORITHMS.md section 2, each a plan in the common form:
//
//   no_ina (Geryon / InArt's LBMM, load-balanced routing without aggregation): every worker to
//     every PS of the job (equal shares), each flow on the least-loaded of its k shortest paths
//     (greedy in worker order, then two re-routing passes). O(P · W · k · L).
//   atp (ATP, Lao et al., NSDI 2021, as the baseline of GRID section 2 and InArt section 2):
//     the traditional single-PS architecture -- the whole model on one PS (the job's PS with the
//     most ingress headroom, ties by order), as InArt's comparison uses it. Each worker's
//     gradient is aggregated at its ToR if INA-capable as far as the ToR's processing capacity
//     goes; what does not fit spills over to the next aggregation point on the path (the PS's
//     ToR when INA-capable and with capacity left), the rest goes to the PS unaggregated. The
//     spill is a chunk-range split (FlowPlan::fraction). The rate is found by bisection on λ
//     (every load is non-decreasing in λ). Paths: the least-loaded shortest path per ToR.
//     O(60 · (W · L + R)).
//   switchml (SwitchML, Sapio et al., NSDI 2021): equal shares; each flow on its least-loaded
//     shortest path, aggregated at the first INA switch on it (else at the PS), no spill-over;
//     the switch's stream continues on that path. O(P · W · k · L).
//
// Deterministic (no randomness). Several jobs: one at a time in priority order, each around the
// evaluated load of the jobs before it.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

// One job (index into input.jobs) alone on `residual` (resource-indexed capacity left for it).
RoutedJob RouteNoIna(const Network& network, PathCache& paths, const std::vector<double>& residual,
                     int job);
RoutedJob RouteAtp(const Network& network, PathCache& paths, const std::vector<double>& residual,
                   int job);
RoutedJob RouteSwitchMl(const Network& network, PathCache& paths,
                        const std::vector<double>& residual, int job);

// ATP for every job in priority order (the floor of grid and inart). Result in input order.
std::vector<RoutedJob> RouteAllAtp(const Network& network, PathCache& paths);

class NoInaRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "no_ina"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

class AtpRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "atp"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

class SwitchMlRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "switchml"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
