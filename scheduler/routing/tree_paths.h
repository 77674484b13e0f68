// Shortest paths and balanced (ECMP-like) paths over the fabric graph, as the trees algorithm
// (scheduler/routing/trees.cc, scheduler/routing/tree_pricing.cc) prices and routes its trees:
// reverse shortest paths toward one target under arc weights, breadth-first hop counts, and a
// path that spreads equal-cost choices. Internal to scheduler/routing/; pure functions of the
// graph and the weights given.
#pragma once

#include <limits>
#include <map>
#include <vector>

#include "core/topology.h"

namespace inac::scheduler::trees_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Reverse shortest paths toward one target over arc weights (hosts other than the target do
// not forward, so a host is only ever a path's first node).
struct ToTarget {
  std::vector<double> dist;
  std::vector<int> next_arc;  // arc from a node one step toward the target; -1 at the target
};

// Dijkstra toward `target` over the reversed arcs (`in_arcs[u]`: the arcs into u), ties broken
// toward the smaller arc id.
ToTarget ShortestPathsTo(const core::Graph& g, const std::vector<std::vector<int>>& in_arcs,
                         int target, const std::vector<double>& arc_weight);

// The arcs of `t`'s next_arc chain from `from` to the target; empty when it loops.
std::vector<int> PathArcs(const ToTarget& t, int from, const core::Graph& g);

// Hop counts from `src` (-1: unreachable); hosts other than `src` do not forward.
std::vector<int> HopsFrom(const core::Graph& g, int src);

// A path from `from` toward the target of `t` over arcs that are tight for its distances
// (equal cost up to rounding), taking at each node the tight arc used least so far in `used`
// (then one by a hash of the path's origin and the node): equal-cost paths spread as ECMP would
// spread them. Counts the arcs it takes in `used`.
std::vector<int> BalancedPath(const core::Graph& g, const ToTarget& t,
                              const std::vector<double>& arc_w, int from, std::map<int, int>* used);

}  // namespace inac::scheduler::trees_internal
