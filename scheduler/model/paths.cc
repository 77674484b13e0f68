#include "scheduler/model/paths.h"

#include <algorithm>
#include <deque>
#include <optional>

namespace inac::scheduler {
namespace {

// Breadth-first search that transits switches only, with blocked arcs and nodes (Yen's spurs).
// Scratch reused across queries (ScratchBfs): blocked marks are undone from their own lists and
// visits are stamped, so a query costs what it visits, not the graph's size.
class Bfs {
 public:
  // Rebinds to `g`, growing the scratch when `g` is larger than any graph before.
  void Bind(const core::Graph& g) {
    g_ = &g;
    Clear();
    if (parent_arc_.size() < static_cast<size_t>(g.num_nodes())) {
      parent_arc_.assign(g.num_nodes(), -1);
      depth_.assign(g.num_nodes(), 0);
      seen_.assign(g.num_nodes(), 0);
      node_blocked_.assign(g.num_nodes(), 0);
      stamp_ = 0;
    }
    if (arc_blocked_.size() < static_cast<size_t>(g.num_arcs())) {
      arc_blocked_.assign(g.num_arcs(), 0);
    }
  }

  void BlockArc(int a) {
    arc_blocked_[a] = 1;
    blocked_arcs_.push_back(a);
  }
  void BlockNode(int v) {
    node_blocked_[v] = 1;
    blocked_nodes_.push_back(v);
  }
  void Clear() {
    for (int a : blocked_arcs_) arc_blocked_[a] = 0;
    for (int v : blocked_nodes_) node_blocked_[v] = 0;
    blocked_arcs_.clear();
    blocked_nodes_.clear();
  }

  // Hop distances to `t` (transiting switches only) over every up link, blocked or not: lower
  // bounds for Run's pruning. Links are full duplex, so this is a BFS from `t`.
  void DistancesTo(int t) {
    const core::Graph& g = *g_;
    own_to_t_.assign(g.num_nodes(), -1);
    queue_.clear();
    queue_.push_back(t);
    own_to_t_[t] = 0;
    for (size_t head = 0; head < queue_.size(); ++head) {
      const int v = queue_[head];
      if (v != t && !g.is_switch(v)) continue;
      for (int a : g.out_arcs(v)) {
        const int w = g.arc(a).to;
        if (own_to_t_[w] >= 0) continue;
        own_to_t_[w] = own_to_t_[v] + 1;
        queue_.push_back(w);
      }
    }
    to_t_ = own_to_t_.data();
  }
  // The same distances, computed by the caller (PathCache::HopsFrom(t)); not owned, must outlive
  // the queries.
  void UseDistancesTo(const std::vector<int>& hops) { to_t_ = hops.data(); }

  // Shortest path s -> t avoiding blocked arcs/nodes, the one a plain BFS (arcs in adjacency
  // order, hosts other than s and t never expanded) finds; false if none. Precondition:
  // DistancesTo(t). The BFS is pruned: with L the length of the path, a node at depth i whose
  // distance to t (unblocked, a lower bound) exceeds L - i is on no shortest path; nor is any
  // node it alone would have discovered first, so every node of a shortest path keeps its depth,
  // its queue order and its parent, and the path found is the plain BFS's. L is not known
  // before: bounds from the unblocked distance of s upward until a search finds t, or prunes
  // nothing (then t is unreachable).
  bool Run(int s, int t, Path* out) {
    if (to_t_[s] < 0) return false;
    for (int bound = to_t_[s];; ++bound) {
      bool pruned = false;
      if (Search(s, t, bound, &pruned)) break;
      if (!pruned) return false;
    }
    const core::Graph& g = *g_;
    out->nodes.clear();
    out->arcs.clear();
    for (int v = t; v != s; v = g.arc(parent_arc_[v]).from) out->arcs.push_back(parent_arc_[v]);
    std::reverse(out->arcs.begin(), out->arcs.end());
    out->nodes.push_back(s);
    for (int a : out->arcs) out->nodes.push_back(g.arc(a).to);
    return true;
  }

 private:
  // One BFS that expands only nodes at depth i with i + (distance to t) <= bound.
  bool Search(int s, int t, int bound, bool* pruned) {
    const core::Graph& g = *g_;
    if (++stamp_ == 0) {  // wrapped: forget every old stamp
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 1;
    }
    queue_.clear();
    queue_.push_back(s);
    seen_[s] = stamp_;
    parent_arc_[s] = -1;
    depth_[s] = 0;
    if (s == t) return true;
    for (size_t head = 0; head < queue_.size(); ++head) {
      const int v = queue_[head];
      for (int a : g.out_arcs(v)) {
        if (arc_blocked_[a]) continue;
        const int w = g.arc(a).to;
        if (seen_[w] == stamp_ || node_blocked_[w]) continue;
        seen_[w] = stamp_;
        parent_arc_[w] = a;
        if (w == t) return true;
        if (!g.is_switch(w)) continue;  // hosts are endpoints only
        depth_[w] = depth_[v] + 1;
        if (to_t_[w] < 0 || depth_[w] + to_t_[w] > bound) {
          *pruned = true;
          continue;
        }
        queue_.push_back(w);
      }
    }
    return false;
  }

  const core::Graph* g_ = nullptr;
  std::vector<int> parent_arc_;
  std::vector<unsigned> seen_;
  unsigned stamp_ = 0;
  std::vector<char> arc_blocked_;
  std::vector<char> node_blocked_;
  std::vector<int> blocked_arcs_, blocked_nodes_;
  std::vector<int> queue_;
  const int* to_t_ = nullptr;  // per node: distance to the target (DistancesTo)
  std::vector<int> own_to_t_, depth_;
};

// The calling thread's BFS scratch, bound to `g`.
Bfs& ScratchBfs(const core::Graph& g) {
  thread_local Bfs bfs;
  bfs.Bind(g);
  return bfs;
}

bool PathLess(const Path& a, const Path& b) {
  if (a.hops() != b.hops()) return a.hops() < b.hops();
  return a.arcs < b.arcs;
}

// The single up arc of a host with exactly one up link; -1 otherwise.
int SoleArc(const core::Graph& g, int v) {
  if (!g.is_host(v) || g.out_arcs(v).size() != 1) return -1;
  return g.out_arcs(v)[0];
}

// The paths between `src` and `dst` when one is a single-homed host (the source; or the
// destination with a switch source): the ToR's paths `of(tor, dst)` / `of(src, tor)` with the
// host's link added. std::nullopt when neither applies.
template <typename Of>
std::optional<std::vector<Path>> ViaSoleLink(const core::Graph& g, int src, int dst, Of&& of) {
  const int src_arc = src != dst ? SoleArc(g, src) : -1;
  const int dst_arc = src != dst ? SoleArc(g, dst) : -1;
  std::vector<Path> paths;
  if (src_arc >= 0) {
    const int tor = g.arc(src_arc).to;
    for (const Path& p : of(tor, dst)) {
      Path q;
      q.nodes.push_back(src);
      q.nodes.insert(q.nodes.end(), p.nodes.begin(), p.nodes.end());
      q.arcs.push_back(src_arc);
      q.arcs.insert(q.arcs.end(), p.arcs.begin(), p.arcs.end());
      paths.push_back(std::move(q));
    }
    return paths;
  }
  if (dst_arc >= 0 && g.is_switch(src)) {
    const int tor = g.arc(dst_arc).to;
    for (const Path& p : of(src, tor)) {
      Path q = p;
      q.nodes.push_back(dst);
      q.arcs.push_back(dst_arc ^ 1);
      paths.push_back(std::move(q));
    }
    return paths;
  }
  return std::nullopt;
}

// Yen on `bfs` (bound to the graph, its distances to dst set).
std::vector<Path> Yen(const core::Graph& graph, Bfs& bfs, int src, int dst, int k) {
  std::vector<Path> result;
  Path first;
  if (!bfs.Run(src, dst, &first)) return result;
  result.push_back(first);
  if (src == dst) return result;
  std::vector<Path> candidates;
  while (static_cast<int>(result.size()) < k) {
    const Path prev = result.back();
    for (int i = 0; i + 1 < static_cast<int>(prev.nodes.size()); ++i) {
      int spur = prev.nodes[i];
      if (i > 0 && !graph.is_switch(spur)) continue;
      bfs.Clear();
      for (const Path& p : result) {
        if (static_cast<int>(p.nodes.size()) > i &&
            std::equal(p.nodes.begin(), p.nodes.begin() + i + 1, prev.nodes.begin())) {
          bfs.BlockArc(p.arcs[i]);
        }
      }
      for (int j = 0; j < i; ++j) bfs.BlockNode(prev.nodes[j]);
      Path spur_path;
      if (!bfs.Run(spur, dst, &spur_path)) continue;
      Path total;
      total.nodes.assign(prev.nodes.begin(), prev.nodes.begin() + i);
      total.arcs.assign(prev.arcs.begin(), prev.arcs.begin() + i);
      total.nodes.insert(total.nodes.end(), spur_path.nodes.begin(), spur_path.nodes.end());
      total.arcs.insert(total.arcs.end(), spur_path.arcs.begin(), spur_path.arcs.end());
      auto same = [&](const Path& p) { return p.arcs == total.arcs; };
      if (std::none_of(result.begin(), result.end(), same) &&
          std::none_of(candidates.begin(), candidates.end(), same)) {
        candidates.push_back(std::move(total));
      }
    }
    if (candidates.empty()) break;
    auto best = std::min_element(candidates.begin(), candidates.end(), PathLess);
    result.push_back(std::move(*best));
    candidates.erase(best);
  }
  return result;
}

// PathCache::GetDiverse's minimum-hop part between switches. `from_src` / `to_dst`: hop
// distances from src and to dst. Each path is a shortest path in the DAG of minimum-hop arcs
// under 0/1 weights (1: an arc chosen before), by dynamic programming over the DAG's layers.
std::vector<Path> Diverse(const core::Graph& graph, const std::vector<int>& from_src,
                          const std::vector<int>& to_dst, int src, int dst, int k) {
  std::vector<Path> result;
  const int length = from_src[dst];
  if (k < 1 || length < 0) return result;
  if (src == dst) return {Path{{src}, {}}};
  // Scratch of the calling thread, reset only where a query wrote.
  thread_local std::vector<unsigned> seen;
  thread_local unsigned stamp = 0;
  thread_local std::vector<int> cost, in_arc;
  thread_local std::vector<char> used;
  if (seen.size() < static_cast<size_t>(graph.num_nodes())) {
    seen.assign(graph.num_nodes(), 0);
    cost.assign(graph.num_nodes(), 0);
    in_arc.assign(graph.num_nodes(), -1);
    stamp = 0;
  }
  if (used.size() < static_cast<size_t>(graph.num_arcs())) used.assign(graph.num_arcs(), 0);
  if (++stamp == 0) {
    std::fill(seen.begin(), seen.end(), 0);
    stamp = 1;
  }
  auto on_dag = [&](int a, int d) {  // arc a from a node at distance d lies on a shortest path
    const int w = graph.arc(a).to;
    return from_src[w] == d + 1 && to_dst[w] == length - d - 1 && (w == dst || graph.is_switch(w));
  };
  // The nodes of minimum-hop paths by distance from src, and the DAG's arcs out of each layer
  // (forward from src).
  std::vector<std::vector<int>> layers(length + 1);
  std::vector<std::vector<int>> dag(length);
  layers[0].push_back(src);
  for (int d = 0; d < length; ++d) {
    for (int v : layers[d]) {
      for (int a : graph.out_arcs(v)) {
        if (!on_dag(a, d)) continue;
        dag[d].push_back(a);
        const int w = graph.arc(a).to;
        if (seen[w] == stamp) continue;
        seen[w] = stamp;
        layers[d + 1].push_back(w);
      }
    }
  }
  auto rank = [src, dst](int a) { return PairOrder(src, dst, a); };  // equal choices
  std::vector<int> chosen;  // arcs of the chosen paths (to reset `used`)
  while (static_cast<int>(result.size()) < k) {
    for (int d = 1; d <= length; ++d) {
      for (int v : layers[d]) in_arc[v] = -1;
    }
    cost[src] = 0;
    for (int d = 0; d < length; ++d) {
      for (int a : dag[d]) {
        const int v = graph.arc(a).from;
        const int w = graph.arc(a).to;
        const int c = cost[v] + used[a];
        if (in_arc[w] < 0 || c < cost[w] || (c == cost[w] && rank(a) < rank(in_arc[w]))) {
          cost[w] = c;
          in_arc[w] = a;
        }
      }
    }
    Path p;
    for (int v = dst; v != src; v = graph.arc(in_arc[v]).from) p.arcs.push_back(in_arc[v]);
    std::reverse(p.arcs.begin(), p.arcs.end());
    if (std::any_of(result.begin(), result.end(),
                    [&](const Path& q) { return q.arcs == p.arcs; })) {
      break;  // the least reused path is one already chosen: the rest come from Get
    }
    p.nodes.push_back(src);
    for (int a : p.arcs) {
      p.nodes.push_back(graph.arc(a).to);
      if (!used[a]) chosen.push_back(a);
      used[a] = 1;
    }
    result.push_back(std::move(p));
  }
  for (int a : chosen) used[a] = 0;
  return result;
}

}  // namespace

uint64_t PairOrder(int a, int b, int item) {
  const uint64_t salt = (static_cast<uint64_t>(a) + 1) * 0x9E3779B97F4A7C15ull ^
                        (static_cast<uint64_t>(b) + 1) * 0xC2B2AE3D27D4EB4Full;
  uint64_t x = (static_cast<uint64_t>(item) + 1) * 0xBF58476D1CE4E5B9ull ^ salt;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

std::vector<Path> KShortestPaths(const core::Graph& graph, int src, int dst, int k) {
  if (k < 1) return {};
  Bfs& bfs = ScratchBfs(graph);
  bfs.DistancesTo(dst);
  return Yen(graph, bfs, src, dst, k);
}

std::vector<Path> EqualCostPaths(const core::Graph& graph, int src, int dst, int limit) {
  std::vector<Path> result;
  if (limit < 1) return result;
  // Hop distances to dst (links are symmetric: every link is two arcs), transiting switches only.
  std::vector<int> dist(graph.num_nodes(), -1);
  std::deque<int> queue{dst};
  dist[dst] = 0;
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    if (v != dst && !graph.is_switch(v)) continue;
    for (int a : graph.out_arcs(v)) {
      int w = graph.arc(a).to;
      if (dist[w] >= 0) continue;
      dist[w] = dist[v] + 1;
      queue.push_back(w);
    }
  }
  if (dist[src] < 0) return result;
  Path cur;
  cur.nodes.push_back(src);
  // Depth-first along arcs that get one hop closer.
  std::vector<std::pair<int, size_t>> stack{{src, 0}};
  while (!stack.empty() && static_cast<int>(result.size()) < limit) {
    auto& [v, next] = stack.back();
    if (v == dst) {
      result.push_back(cur);
      stack.pop_back();
      if (!cur.arcs.empty()) {
        cur.arcs.pop_back();
        cur.nodes.pop_back();
      }
      continue;
    }
    const std::vector<int>& out = graph.out_arcs(v);
    bool descended = false;
    while (next < out.size()) {
      const int a = out[next++];
      const int w = graph.arc(a).to;
      if (dist[w] != dist[v] - 1 || (w != dst && !graph.is_switch(w))) continue;
      cur.arcs.push_back(a);
      cur.nodes.push_back(w);
      stack.emplace_back(w, 0);
      descended = true;
      break;
    }
    if (descended) continue;
    stack.pop_back();
    if (!cur.arcs.empty()) {
      cur.arcs.pop_back();
      cur.nodes.pop_back();
    }
  }
  return result;
}

const std::vector<Path>& PathCache::GetSpread(int src, int dst) {
  auto key = std::make_pair(src, dst);
  auto it = spread_.find(key);
  if (it != spread_.end()) return it->second;
  std::vector<Path> paths = Get(src, dst);
  auto add = [&](Path q) {
    for (const Path& p : paths) {
      if (p.arcs == q.arcs) return;
    }
    paths.push_back(std::move(q));
  };
  auto via = ViaSoleLink(*graph_, src, dst, [this](int a, int b) -> const std::vector<Path>& {
    return GetSpread(a, b);
  });
  if (!via) via = EqualCostPaths(*graph_, src, dst, kMaxEqualCostPaths);
  for (Path& q : *via) add(std::move(q));
  return spread_.emplace(key, std::move(paths)).first->second;
}

const std::vector<Path>& PathCache::GetDiverse(int src, int dst) {
  auto key = std::make_pair(src, dst);
  auto it = diverse_.find(key);
  if (it != diverse_.end()) return it->second;
  auto via = ViaSoleLink(*graph_, src, dst, [this](int a, int b) -> const std::vector<Path>& {
    return GetDiverse(a, b);
  });
  std::vector<Path> paths;
  if (via) {
    paths = std::move(*via);
  } else if (k_ >= 1) {
    paths = Diverse(*graph_, HopsFrom(src), HopsFrom(dst), src, dst, k_);
    for (const Path& p : Get(src, dst)) {
      if (static_cast<int>(paths.size()) >= k_) break;
      if (std::find(paths.begin(), paths.end(), p) == paths.end()) paths.push_back(p);
    }
  }
  return diverse_.emplace(key, std::move(paths)).first->second;
}

const std::vector<Path>& PathCache::Get(int src, int dst) {
  auto key = std::make_pair(src, dst);
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;
  auto via = ViaSoleLink(*graph_, src, dst,
                         [this](int a, int b) -> const std::vector<Path>& { return Get(a, b); });
  std::vector<Path> paths;
  if (via) {
    paths = std::move(*via);
  } else if (k_ >= 1) {
    // Yen with the cached distances to dst (HopsFrom: links are full duplex) as its bounds.
    const std::vector<int>& to_dst = HopsFrom(dst);
    Bfs& bfs = ScratchBfs(*graph_);
    bfs.UseDistancesTo(to_dst);
    paths = Yen(*graph_, bfs, src, dst, k_);
  }
  return paths_.emplace(key, std::move(paths)).first->second;
}

const std::vector<int>& PathCache::HopsFrom(int node) {
  auto it = hops_.find(node);
  if (it != hops_.end()) return it->second;
  std::vector<int> dist(graph_->num_nodes(), -1);
  std::deque<int> queue{node};
  dist[node] = 0;
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop_front();
    if (v != node && !graph_->is_switch(v)) continue;
    for (int a : graph_->out_arcs(v)) {
      int w = graph_->arc(a).to;
      if (dist[w] >= 0) continue;
      dist[w] = dist[v] + 1;
      queue.push_back(w);
    }
  }
  return hops_.emplace(node, std::move(dist)).first->second;
}

}  // namespace inac::scheduler
