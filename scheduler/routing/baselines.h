// The baselines of docs/routing.md section 3, each a plan in the common form, each as its paper
// defines it (where INAC had to read a rule into the paper, it says "INAC's reading").
//
// Path choice, every baseline (load-balanced routing, as InArt's LBMM baseline and ATP's and
// SwitchML's ECMP fabrics spread flows; INAC's reading of "least-loaded"): the candidates are the
// k shortest paths plus every other minimum-hop path (PathCache::GetSpread: the equal-cost set an
// ECMP fabric hashes over, which Yen's arc-id tie-breaking would cut to the same few core
// switches for every source); a stream is placed on the candidate whose arcs' utilisations after
// adding it, sorted in
// descending order, are lexicographically smallest -- not only the largest, which ties whenever
// every candidate shares an arc (the PS's access link) -- then fewer hops, then the earlier
// candidate. Utilisation = planned load per unit of the job's rate / residual capacity. Greedy in
// worker order, then two passes re-placing each stream against all the others. BalancedPath below.
//
//   no_ina (Geryon-like; InArt's LBMM): every worker to every PS of the job (equal shares), no
//     aggregation. O(P · W · k · L).
//   switchml (SwitchML, Sapio et al., NSDI 2021): equal shares; each flow on its balanced path,
//     aggregated at the first INA switch on it (else at the PS), no spill-over; each switch's
//     stream then on the balanced one of its k shortest paths to the PS. O(P · W · k · L).
//   atp (ATP, Lao et al., NSDI 2021, section 3: two-level aggregation): the traditional single-PS
//     architecture of the ATP paper -- the whole model on one PS (the job's PS with the most
//     ingress headroom, ties by order), as GRID's and InArt's comparisons use it. Level 1: each
//     worker aggregated at its ToR if INA-capable, as far as the ToR's processing capacity goes
//     (a chunk-range split, FlowPlan::fraction). Level 2: the ToRs' partial sums are re-aggregated
//     at the PS's ToR when it is INA-capable (RoutedStream::via), whole streams in ToR order as
//     far as its capacity left after its own workers goes (INAC's reading of ATP's best-effort
//     level-1 switch); what does not fit there -- ToR streams, and spilled (level-1 overflow) or
//     non-INA-ToR worker chunks, which the PS's ToR aggregates with the capacity still left --
//     goes to the PS. With PlanningOptions::reaggregation false (the deployable data plane) level
//     2 only aggregates worker chunks and every ToR stream goes on to the PS (single-level ATP).
//     λ by bisection (every load is non-decreasing in λ). Paths: one balanced path per ToR.
//     O(60 · (W · L + R)).
//   atp_sharded (ATP sharded over the job's PSs, BytePS-style; INAC's reading of how ATP runs a
//     multi-PS job): the model split over all the job's PSs in equal shares, each shard two-level
//     ATP toward its PS as above, ToR capacity shared by the shards. Same complexity × P.
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

// Index of the candidate in `paths` on which a stream of `add` (per unit of rate) is best balanced
// (see the header comment), given the planned per-unit load `unit` (resource-indexed) and the
// `residual` capacities. -1 when `paths` is empty. Ties: fewer hops, then the lower index.
int BalancedPath(const Network& network, const std::vector<Path>& paths,
                 const std::vector<double>& unit, const std::vector<double>& residual, double add);

// ATP variants (see the header comment).
struct AtpOptions {
  bool two_level = true;  // re-aggregate ToR streams at the PS's ToR (RoutedStream::via)
  bool sharded = false;   // equal shares over every PS of the job; else the one with most headroom
};

// One job (index into input.jobs) alone on `residual` (resource-indexed capacity left for it).
RoutedJob RouteNoIna(const Network& network, PathCache& paths, const std::vector<double>& residual,
                     int job);
RoutedJob RouteAtp(const Network& network, PathCache& paths, const std::vector<double>& residual,
                   int job, const AtpOptions& options);
RoutedJob RouteSwitchMl(const Network& network, PathCache& paths,
                        const std::vector<double>& residual, int job);

// The floor of grid and inart: single-level, single-PS ATP (the part of ATP a single-level plan
// can express, so that the LP can take its routes as candidates) for every job in priority order.
// Result in input order.
std::vector<RoutedJob> RouteAllAtp(const Network& network, PathCache& paths);

class NoInaRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "no_ina"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

// `atp` (one PS) or `atp_sharded` (every PS); two-level unless PlanningOptions::reaggregation is
// false.
class AtpRouting : public RoutingAlgorithm {
 public:
  explicit AtpRouting(bool sharded = false) : sharded_(sharded) {}
  std::string_view name() const override { return sharded_ ? "atp_sharded" : "atp"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;

 private:
  bool sharded_;
};

class SwitchMlRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "switchml"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
