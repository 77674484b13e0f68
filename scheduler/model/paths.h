// k shortest loop-free paths (Yen, "Finding the K shortest loopless paths in a network",
// Management Science 17(11), 1971) on a core::Graph with unit arc weights (hop count), and a cache
// of them per (source, destination).
//
// Paths never transit a host: intermediate nodes are switches; hosts are only endpoints. Ties
// between equally long paths are broken by the arc-id sequence, so results are deterministic.
// Complexity of one query: O(k · L · (V + E)) with L the path length (each spur is one BFS);
// the cache reduces a single-homed host endpoint to its switch, so queries are per switch pair.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/topology.h"

namespace inac::scheduler {

struct Path {
  std::vector<int> nodes;  // node indices, source first
  std::vector<int> arcs;   // arcs.size() == nodes.size() - 1

  bool operator==(const Path&) const = default;
  int hops() const { return static_cast<int>(arcs.size()); }
};

// Up to k shortest loop-free paths from `src` to `dst`, shortest first (a single zero-hop path
// when src == dst; empty when unreachable or k < 1). Only links that are up are used.
std::vector<Path> KShortestPaths(const core::Graph& graph, int src, int dst, int k);

// Every minimum-hop path from `src` to `dst` (the equal-cost set an ECMP fabric spreads over), up
// to `limit`, in depth-first order of arc ids (deterministic). Hosts are not transited. Empty when
// unreachable. O(limit · L · degree) after one BFS.
std::vector<Path> EqualCostPaths(const core::Graph& graph, int src, int dst, int limit);
inline constexpr int kMaxEqualCostPaths = 256;

// A pseudo-random rank of `item` in an order of its own for the pair (a, b) (splitmix64 mixing):
// how GetDiverse and spread candidates (BuildCandidates) break ties, so that different pairs
// prefer different equal choices. Deterministic.
uint64_t PairOrder(int a, int b, int item);

// Memoises KShortestPaths. Not thread-safe (the scheduler is single-threaded). The graph is not
// owned and must outlive the cache.
class PathCache {
 public:
  PathCache(const core::Graph& graph, int k) : graph_(&graph), k_(k) {}

  // Same contract as KShortestPaths(graph, src, dst, k). The reference stays valid for the
  // cache's lifetime.
  const std::vector<Path>& Get(int src, int dst);
  // The candidates of the load-balanced baselines: Get(src, dst) followed by the other
  // minimum-hop paths (EqualCostPaths, up to kMaxEqualCostPaths): Yen's ties are broken by arc
  // ids, so on a fat-tree the k shortest reach the same few core switches from every source,
  // where an ECMP fabric spreads over all of them. Same reduction of single-homed hosts as Get.
  const std::vector<Path>& GetSpread(int src, int dst);
  // Up to k paths for spreading load: minimum-hop paths chosen greedily for arc diversity (each
  // next one the minimum-hop path with the fewest arcs already chosen), equal choices broken in a
  // per-(src, dst) hashed order of arc ids -- as an ECMP hash spreads pairs over equal-cost arcs,
  // where Get's arc-id order sends every pair of a fat-tree through the same few core switches;
  // then Get's paths not already chosen, up to k. Deterministic. Same reduction of single-homed
  // hosts as Get (a host's paths are its ToR's, so its workers share them).
  const std::vector<Path>& GetDiverse(int src, int dst);
  // Hop distances from `node` to every node over up links (hosts are not transited; -1 when
  // unreachable). Cached.
  const std::vector<int>& HopsFrom(int node);
  int k() const { return k_; }

 private:
  const core::Graph* graph_;
  int k_;
  std::map<std::pair<int, int>, std::vector<Path>> paths_;
  std::map<std::pair<int, int>, std::vector<Path>> spread_;
  std::map<std::pair<int, int>, std::vector<Path>> diverse_;
  std::map<int, std::vector<int>> hops_;
};

}  // namespace inac::scheduler
