#include "scheduler/routing/tree_paths.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <utility>

namespace inac::scheduler::trees_internal {

ToTarget ShortestPathsTo(const core::Graph& g, const std::vector<std::vector<int>>& in_arcs,
                         int target, const std::vector<double>& arc_weight) {
  ToTarget t;
  t.dist.assign(g.num_nodes(), kInf);
  t.next_arc.assign(g.num_nodes(), -1);
  using Item = std::pair<double, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  t.dist[target] = 0;
  heap.push({0, target});
  while (!heap.empty()) {
    auto [d, u] = heap.top();
    heap.pop();
    if (d > t.dist[u]) continue;
    if (u != target && g.is_host(u)) continue;  // hosts do not forward
    for (int a : in_arcs[u]) {
      const int v = g.arc(a).from;
      const double nd = d + arc_weight[a];
      if (nd < t.dist[v] - 1e-15 ||
          (std::abs(nd - t.dist[v]) <= 1e-15 && t.next_arc[v] >= 0 && a < t.next_arc[v])) {
        t.dist[v] = nd;
        t.next_arc[v] = a;
        if (!g.is_host(v)) heap.push({nd, v});  // a host is a leaf: never expanded
      }
    }
  }
  return t;
}

std::vector<int> PathArcs(const ToTarget& t, int from, const core::Graph& g) {
  std::vector<int> arcs;
  int v = from;
  while (t.next_arc[v] >= 0) {
    arcs.push_back(t.next_arc[v]);
    v = g.arc(t.next_arc[v]).to;
    if (arcs.size() > static_cast<size_t>(g.num_nodes())) return {};
  }
  return arcs;
}

std::vector<int> HopsFrom(const core::Graph& g, int src) {
  std::vector<int> hops(g.num_nodes(), -1);
  std::vector<int> queue = {src};
  hops[src] = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const int u = queue[i];
    if (u != src && g.is_host(u)) continue;
    for (int a : g.out_arcs(u)) {
      const int v = g.arc(a).to;
      if (hops[v] >= 0) continue;
      hops[v] = hops[u] + 1;
      queue.push_back(v);
    }
  }
  return hops;
}

std::vector<int> BalancedPath(const core::Graph& g, const ToTarget& t,
                              const std::vector<double>& arc_w, int from,
                              std::map<int, int>* used) {
  std::vector<int> arcs;
  int u = from;
  std::set<int> visited = {from};
  while (t.next_arc[u] >= 0) {
    // Tight arcs used least so far; among them one by a hash of (path origin, node), as ECMP
    // hashes a flow onto one of its equal-cost next hops.
    const double tolerance = 1e-12 * std::max(1.0, t.dist[u]);
    std::vector<int> tight;
    int least = std::numeric_limits<int>::max();
    for (int a : g.out_arcs(u)) {
      const int v = g.arc(a).to;
      if (t.dist[v] == kInf) continue;
      if (g.is_host(v) && t.next_arc[v] >= 0) continue;  // hosts forward nothing
      if (arc_w[a] + t.dist[v] > t.dist[u] + tolerance) continue;
      // Strictly closer to the target and not visited yet: a simple path (the data plane keeps
      // one route per switch and tag, so a path that revisits a node is not what it runs).
      if (!(t.dist[v] < t.dist[u]) || visited.count(v)) continue;
      auto it = used->find(a);
      const int k = it == used->end() ? 0 : it->second;
      if (k < least) {
        least = k;
        tight.clear();
      }
      if (k == least) tight.push_back(a);
    }
    int best = t.next_arc[u];
    if (!tight.empty()) {
      uint64_t h = (static_cast<uint64_t>(from) * 0x9E3779B97F4A7C15ULL) ^
                   (static_cast<uint64_t>(u) * 0xC2B2AE3D27D4EB4FULL);
      h ^= h >> 29;
      best = tight[h % tight.size()];
    }
    arcs.push_back(best);
    ++(*used)[best];
    u = g.arc(best).to;
    if (!visited.insert(u).second) return PathArcs(t, from, g);
    if (arcs.size() > static_cast<size_t>(g.num_nodes())) return PathArcs(t, from, g);
  }
  return arcs;
}

}  // namespace inac::scheduler::trees_internal
