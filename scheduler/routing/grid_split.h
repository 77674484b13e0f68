// grid-split: GRID's LP relaxation realised with chunk-range splits instead of rounded away
// (docs/routing.md section 3a). INAC's own algorithm built on GRID.
//
// What is GRID's (Fang et al., IEEE/ACM ToN 31(5) 2023, sections 4-5): the LP relaxation of the
// joint aggregation-node and path choice (R-GRIA, path-based as the authors' IAR variant, with
// INAC's link constraints: scheduler/routing/routing_lp.h), and plain `grid` itself, whose plan is
// computed too and kept when it is better (BetterRates over the evaluated job rates).
//
// What is INAC's own:
//   1. Richer candidates (AddSplitCandidates): besides GRID's (on-path INA switches, the
//      `extra_candidates` smallest detours, ATP's and GRID's routes), every pair gets the
//      split_switches INA switches with the most spare capacity (min of processing residual and
//      the residual of its in-arcs) whose detour hops(w, a) + hops(a, s) - hops(w, s) is within
//      detour_hops -- cross-pod aggregation points -- each with minimum-hop paths chosen
//      for arc diversity (so the paths into a switch use all its in-links, as ECMP would). LP size:
//      O(W · P · (GRID's options + split_switches) · k') columns with split_switches = 32,
//      detour_hops = 4 and k' = min(--paths, 4) diverse paths per cross-pod option; the number of
//      cross-pod switches per pair is lowered so that the LP keeps at most 40,000 columns (GRID's
//      setting at 100 workers: ~16,000), and is 0 when GRID's candidates alone exceed that.
//   2. Realisation of the fractional solution (per (job, PS) shard). The LP has the fan-in cuts
//      of BuildRoutingLp (max_fan_in = kMaxFanIn), so its optimum bounds every deployable
//      single-level plan. The shard is cut into aligned chunk ranges (at most
//      MaxRangesPerShard(P), on a 1/1024 grid), each its own aggregation tag, and each range gets
//      a set of covering switches by one of two layouts (both are tried, the better evaluated
//      plan kept): the circle layout lays the LP's streams y_a (fractions of the shard) end to end
//      on a circle of circumference 1, so each point is covered by about Σ y_a switches as the
//      LP's PS load says; the strip layout gives each switch round(y_a · ranges) equal ranges,
//      those least served so far, counting b_a / y_a workers per range (b_a = what the LP sends it
//      summed over workers). Each worker then sends each range to one covering switch (or its PS):
//      the one its own LP fractions f_{w,a} favour while the switch's LP inbound b_a lasts, at most
//      kMaxFanIn (64, the data plane's input bitmap) inputs per (switch, range); a worker's
//      consecutive ranges at one node on one path form one FlowPlan (fraction = their length).
//      Range counts: the cap (MaxRangesPerShard(P), or PlanningOptions::split_max_ranges when
//      lower) and its halves down to 8, fewest first, each with both layouts and item 3; a plan
//      with more ranges replaces the best so far only when it is more than 1 % faster (every
//      range is a tag with entries on each switch it crosses). No count is best everywhere.
//   3. Paths and local search: each (worker, range) flow and each switch's stream is put on its
//      balanced candidate path, then a local search moves single (worker, range) flows to another
//      node (the PS, or a switch already aggregating that range or that shard) or path, and
//      streams to another path, while the bottleneck's utilisation falls (bounded move budget);
//      when no single move helps and a PS is a bottleneck, a compound move closes one switch's
//      partial sum of one range: all its inputs move to switches already summing that range
//      (the PS's load falls only when the last input leaves, so single moves never find it).
//   4. The better of this plan and plain grid is kept; JobDiagnostics::source says which
//      ("split", "split+local_search", or grid's). lp_bound_gbps is the richer LP's optimum, a
//      bound on every single-level plan over its candidates (any chunk split), hence >= both
//      plans' rates.
// Single-level only (no re-aggregation chains): the data plane's intents program one level
// (core::DeriveSwitchIntents), so the plan deploys as it is scored. Note the fan-in cap: with more
// than 64 workers a range needs at least two partial sums at its PS, so a single-level plan of
// one PS reaches at most half the PS's ingress per worker (docs/routing.md).
//
// Several jobs: one at a time in priority order, each around the evaluated load of those before
// it; then the whole result is compared with grid's.
//
// Complexity: grid's, plus one LP of the size above (two for every job after the first: the
// bound alone on the network), solved with CLP's primal simplex (lp::Simplex::kPrimal: on these
// degenerate max-min LPs 6-40x faster than the dual simplex CLP picks for them), and per range
// count R (at most 4 counts, 2 layouts each) the realisation O(W · R · options) and the local
// search's budget of O(moves · W · R · options · k · L).
// Deterministic for a seed (grid's rounding is seeded; the realisation and local search are
// deterministic).
#pragma once

#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

// Inputs one aggregation switch can sum for one tag (the 64-bit input bitmap of api/p4/ina.p4).
inline constexpr int kMaxFanIn = 64;

class GridSplitRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "grid-split"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
