#include "scheduler/model/paths.h"

#include <algorithm>
#include <deque>

namespace inac::scheduler {
namespace {

// Breadth-first search that transits switches only, with blocked arcs and nodes (Yen's spurs).
class Bfs {
 public:
  explicit Bfs(const core::Graph& g)
      : g_(g),
        parent_arc_(g.num_nodes(), -1),
        seen_(g.num_nodes(), 0),
        arc_blocked_(g.num_arcs(), 0),
        node_blocked_(g.num_nodes(), 0) {}

  void BlockArc(int a) { arc_blocked_[a] = 1; }
  void BlockNode(int v) { node_blocked_[v] = 1; }
  void Clear() {
    std::fill(arc_blocked_.begin(), arc_blocked_.end(), 0);
    std::fill(node_blocked_.begin(), node_blocked_.end(), 0);
  }

  // Shortest path s -> t avoiding blocked arcs/nodes; false if none.
  bool Run(int s, int t, Path* out) {
    ++stamp_;
    std::deque<int> queue;
    queue.push_back(s);
    seen_[s] = stamp_;
    parent_arc_[s] = -1;
    bool found = s == t;
    while (!queue.empty() && !found) {
      int v = queue.front();
      queue.pop_front();
      if (v != s && !g_.is_switch(v)) continue;  // hosts are endpoints only
      for (int a : g_.out_arcs(v)) {
        if (arc_blocked_[a]) continue;
        int w = g_.arc(a).to;
        if (seen_[w] == stamp_ || node_blocked_[w]) continue;
        seen_[w] = stamp_;
        parent_arc_[w] = a;
        if (w == t) {
          found = true;
          break;
        }
        queue.push_back(w);
      }
    }
    if (!found) return false;
    out->nodes.clear();
    out->arcs.clear();
    for (int v = t; v != s; v = g_.arc(parent_arc_[v]).from) out->arcs.push_back(parent_arc_[v]);
    std::reverse(out->arcs.begin(), out->arcs.end());
    out->nodes.push_back(s);
    for (int a : out->arcs) out->nodes.push_back(g_.arc(a).to);
    return true;
  }

 private:
  const core::Graph& g_;
  std::vector<int> parent_arc_;
  std::vector<int> seen_;
  int stamp_ = 0;
  std::vector<char> arc_blocked_;
  std::vector<char> node_blocked_;
};

bool PathLess(const Path& a, const Path& b) {
  if (a.hops() != b.hops()) return a.hops() < b.hops();
  return a.arcs < b.arcs;
}

// The single up arc of a host with exactly one up link; -1 otherwise.
int SoleArc(const core::Graph& g, int v) {
  if (!g.is_host(v) || g.out_arcs(v).size() != 1) return -1;
  return g.out_arcs(v)[0];
}

}  // namespace

std::vector<Path> KShortestPaths(const core::Graph& graph, int src, int dst, int k) {
  std::vector<Path> result;
  if (k < 1) return result;
  Bfs bfs(graph);
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
  int src_arc = src != dst ? SoleArc(*graph_, src) : -1;
  int dst_arc = src != dst ? SoleArc(*graph_, dst) : -1;
  if (src_arc >= 0) {
    int tor = graph_->arc(src_arc).to;
    for (const Path& p : GetSpread(tor, dst)) {
      Path q;
      q.nodes.push_back(src);
      q.nodes.insert(q.nodes.end(), p.nodes.begin(), p.nodes.end());
      q.arcs.push_back(src_arc);
      q.arcs.insert(q.arcs.end(), p.arcs.begin(), p.arcs.end());
      add(std::move(q));
    }
  } else if (dst_arc >= 0 && graph_->is_switch(src)) {
    int tor = graph_->arc(dst_arc).to;
    for (const Path& p : GetSpread(src, tor)) {
      Path q = p;
      q.nodes.push_back(dst);
      q.arcs.push_back(dst_arc ^ 1);
      add(std::move(q));
    }
  } else {
    for (Path& q : EqualCostPaths(*graph_, src, dst, kMaxEqualCostPaths)) add(std::move(q));
  }
  return spread_.emplace(key, std::move(paths)).first->second;
}

const std::vector<Path>& PathCache::Get(int src, int dst) {
  auto key = std::make_pair(src, dst);
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;
  std::vector<Path> paths;
  int src_arc = src != dst ? SoleArc(*graph_, src) : -1;
  int dst_arc = src != dst ? SoleArc(*graph_, dst) : -1;
  if (src_arc >= 0) {
    // A single-homed host: every path leaves over its one link.
    int tor = graph_->arc(src_arc).to;
    for (const Path& p : Get(tor, dst)) {
      Path q;
      q.nodes.push_back(src);
      q.nodes.insert(q.nodes.end(), p.nodes.begin(), p.nodes.end());
      q.arcs.push_back(src_arc);
      q.arcs.insert(q.arcs.end(), p.arcs.begin(), p.arcs.end());
      paths.push_back(std::move(q));
    }
  } else if (dst_arc >= 0 && graph_->is_switch(src)) {
    int tor = graph_->arc(dst_arc).to;
    for (const Path& p : Get(src, tor)) {
      Path q = p;
      q.nodes.push_back(dst);
      q.arcs.push_back(dst_arc ^ 1);
      paths.push_back(std::move(q));
    }
  } else {
    paths = KShortestPaths(*graph_, src, dst, k_);
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
