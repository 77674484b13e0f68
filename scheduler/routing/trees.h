// trees: aggregation trees priced by column generation over the whole fabric. INAC's own
// algorithm (no paper describes it); the plan families it searches are those the data plane runs
// (core::DeriveSwitchIntents, api/p4/ina.p4), the model is the flow model's
// (scheduler/model/flow_model.h) and docs/routing.md section 3b explains it with its figures.
//
// A plan of one (job, PS) shard is a set of *trees*, each carrying an aligned chunk range of the
// shard (one aggregation tag): every worker's part of the range goes to one aggregation node (an
// INA switch, or the PS raw), every switch that aggregates sends one stream -- to the PS, or
// (chains) to a parent switch that counts it as one input and sends its own stream to the PS. At
// most 64 inputs per switch and tag (ina.p4's bitmap). A tree carrying m Gbps of every worker's
// gradient loads each resource linearly in m: the arcs of every worker's path and of every
// stream's path, the processing of each aggregating switch (its inputs), the PS's ingress (its
// raw inputs and the streams reaching it) and, with a memory policy, each aggregating switch's
// aggregators (m · hold · 125 / aggregator bytes, Little's law with the policy's hold time). So
// the best mixture of given trees is an LP: maximise the smallest job rate t (plus 1e-6 · the sum
// of the rates) subject to Σ_trees m ≤ capacity per resource and Σ_{trees of a job's shard} m =
// the shard's rate. Column generation finds the trees: the LP's shadow prices make every resource
// a cost, and a *pricing* heuristic builds, per shard, the cheapest trees under those costs
// (Dijkstra over the arcs' prices for every worker path, then a capacitated facility location
// solved greedily: open the aggregation node whose workers save most, at most 64 inputs each);
// a tree whose cost is below the shard's price enters the LP. The first trees are priced with
// utilisation costs (1 / residual), so the first LP is already a plan.
//
// Two families, searched separately (one plan must give each switch one role per shard: its
// stream goes to the PS or to one parent):
//   single level -- every aggregating switch sends to the PS;
//   chains       -- the *parents* are the INA switches nearest the PS (hop distance at most the
//                   nearest's + 2: the PS's ToR and the rest of its pod on a fat-tree); every
//                   other INA switch is a child with a fixed parent (those at the fewest hops,
//                   dealt round-robin in node order, so that the ToRs of one pod serve
//                   different parents), and a tree is rooted at one parent.
// Both are realised, evaluated by the flow model, and the better (BetterRates, max-min order of
// the evaluated rates) is kept; JobDiagnostics::source says "trees:single" or "trees:chains".
//
// Realisation: the LP's trees with m > 0.5 % of their shard become chunk ranges in creation
// order (FlowPlan::fraction = m / shard rate), at most min(MaxRangesPerShard(P),
// PlanningOptions::split_max_ranges when set) per shard -- the largest kept, the LP re-solved
// over the kept trees -- so each tag's traffic is exactly what the LP charged. A switch's stream
// path (and its parent) is fixed for the shard the first time a tree uses it.
//
// Several jobs: one joint LP (all shards' trees), so a scarce resource is shared max-min fairly
// by the LP itself. Deterministic: no randomness, no clock; the work is bounded by
// PlanningOptions::tree_iterations pricing rounds (the controller's re-plan budget) and the LP's
// time limit. lp_bound_gbps is not set (the bounds are scheduler/routing/bounds.h's).
#pragma once

#include <string_view>

#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

class TreeRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "trees"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
