// The pricing side of TreePlanner (scheduler/routing/tree_planner.h): the chains' parents, the
// candidate trees of a shard under given prices (a greedy capacitated facility location over the
// candidate switches), and the shards' streams, fixed at first use. The master LP is in trees.cc.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "scheduler/memory/aggregator_model.h"
#include "scheduler/routing/tree_paths.h"
#include "scheduler/routing/tree_planner.h"

namespace inac::scheduler::trees_internal {

// Hold time (µs) of one chunk at switch `v` whose stream follows `arcs` to the PS (the whole
// route, through a parent), by the memory model (scheduler/memory/aggregator_model.h).
double TreePlanner::HoldUs(int v, const std::vector<int>& route_arcs) const {
  AggregatorTimingOptions timing;
  AggregationTiming t;
  t.spread_us = timing.arrival_spread_us;
  double one_way = 0;
  for (int a : route_arcs) {
    const core::Link& link = g_.topology().links[g_.arc(a).link];
    one_way += link.latency_us.value_or(timing.default_link_latency_us);
  }
  if (route_arcs.empty()) one_way = timing.default_link_latency_us;
  t.ps_rtt_us = 2 * one_way + timing.host_turnaround_us;
  (void)v;
  return HoldTimeUs(*policy_, t);
}

int TreePlanner::CandidateCount(const Shard& sh) const {
  if (family_ == Family::kChains) {
    auto p = parents_of_ps_.find(sh.ps);
    auto c = parent_of_ps_.find(sh.ps);
    return (p == parents_of_ps_.end() ? 0 : static_cast<int>(p->second.size())) +
           (c == parent_of_ps_.end() ? 0 : static_cast<int>(c->second.size()));
  }
  int n = 0;
  for (int v = 0; v < g_.num_switches(); ++v) {
    if (g_.ina_capable(v) && net_.residual(net_.NodeResource(v)) > 1e-9) ++n;
  }
  return n;
}

// --- Chains: parents near each PS, a fixed parent for every other INA switch. ---
void TreePlanner::ComputeParents() {
  if (family_ != Family::kChains) return;
  std::set<int> pss;
  for (const Shard& s : shards_) pss.insert(s.ps);
  for (int ps : pss) {
    std::vector<int> hops = HopsFrom(g_, ps);
    int nearest = std::numeric_limits<int>::max();
    std::vector<int> ina;
    for (int v = 0; v < g_.num_switches(); ++v) {
      if (!g_.ina_capable(v) || net_.residual(net_.NodeResource(v)) <= 1e-9 || hops[v] < 0) {
        continue;
      }
      ina.push_back(v);
      nearest = std::min(nearest, hops[v]);
    }
    std::vector<int> parents, children;
    for (int v : ina) (hops[v] <= nearest + 2 ? parents : children).push_back(v);
    parents_of_ps_[ps] = parents;
    std::map<int, int> dealt;  // per parent set (by first member): children dealt so far
    std::map<int, int>& parent_of = parent_of_ps_[ps];
    for (int c : children) {
      std::vector<int> from_c = HopsFrom(g_, c);
      int best = std::numeric_limits<int>::max();
      for (int p : parents) {
        if (from_c[p] >= 0) best = std::min(best, from_c[p]);
      }
      std::vector<int> nearest_parents;
      for (int p : parents) {
        if (from_c[p] == best) nearest_parents.push_back(p);
      }
      if (nearest_parents.empty()) continue;
      int& k = dealt[nearest_parents.front() * 100003 + static_cast<int>(nearest_parents.size())];
      parent_of[c] = nearest_parents[k % nearest_parents.size()];
      ++k;
    }
  }
}

// One shard's pricing under one round's prices: `steer` decides the choices (paths, nodes).
// Activation and input costs are computed once per switch and memoised; the distances toward
// each target are shared by the round's shards (TreePlanner::dist_cache_).
class TreePlanner::ShardPricer {
 public:
  ShardPricer(TreePlanner* tp, int s, const std::vector<double>& steer);

  // Trees of this pricing: the greedy over every candidate, the greedy without the switch it
  // opened first (another shape), and with chains the greedy within each parent's own subtree
  // (the two cheapest). A shard without network workers gets one empty tree.
  std::vector<Tree> Trees();

 private:
  class Greedy;

  double NodeW(int v) const { return steer_[tp_->resource_row_[tp_->net_.NodeResource(v)]]; }
  double MemW(int v) const { return tp_->mem_row_[v] >= 0 ? steer_[tp_->mem_row_[v]] : 0.0; }
  // Distances toward `target` under this round's prices.
  const ToTarget& DistTo(int target);
  // Activation cost of a switch (its stream, its parent's processing, its memory).
  double Activation(int v);
  double InputCost(int i, int v);
  // The parent of a candidate in this family (-1: its stream goes to the PS).
  int ParentIn(int v);
  double ActOf(int v);
  const std::vector<double>& IcOf(int v);
  // Greedy capacitated facility location over `cands` (ShardPricer::Greedy); returns per worker
  // the chosen node and, in `opened`, the switches in opening order.
  std::vector<int> Locate(const std::vector<int>& cands, int first, std::vector<int>* opened);
  Tree MakeTree(const std::vector<int>& choice);
  // With chains, the greedy within each parent's subtree; the two cheapest trees go to `out`.
  void AddChainTrees(std::vector<Tree>* out);

  TreePlanner* tp_;
  int s_;
  Shard& sh_;
  const std::vector<double>& steer_;
  std::vector<double> arc_w_;
  std::vector<int> candidates_;  // candidate aggregation switches of this shard
  int n_ = 0;                    // the shard's network workers
  std::vector<double> raw_;      // per worker: its cost sending raw to the PS
  std::map<int, double> act_;
  std::map<int, std::vector<double>> ic_;
};

TreePlanner::ShardPricer::ShardPricer(TreePlanner* tp, int s, const std::vector<double>& steer)
    : tp_(tp), s_(s), sh_(tp->shards_[s]), steer_(steer) {
  const core::Graph& g = tp_->g_;
  const Network& net = tp_->net_;
  arc_w_.assign(g.num_arcs(), 0);
  for (int a = 0; a < g.num_arcs(); ++a) {
    arc_w_[a] = steer_[tp_->resource_row_[net.ArcResource(a)]] + 1e-9;
  }
  if (tp_->family_ == Family::kSingle) {
    for (int v = 0; v < g.num_switches(); ++v) {
      if (g.ina_capable(v) && net.residual(net.NodeResource(v)) > 1e-9) candidates_.push_back(v);
    }
  } else {
    for (int p : tp_->parents_of_ps_[sh_.ps]) candidates_.push_back(p);
    for (const auto& [c, p] : tp_->parent_of_ps_[sh_.ps]) candidates_.push_back(c);
  }
  if (tp_->cache_round_ != tp_->price_round_) {
    tp_->dist_cache_.clear();
    tp_->cache_round_ = tp_->price_round_;
  }
  const ToTarget& to_ps = DistTo(sh_.ps);
  const double ps_w = NodeW(sh_.ps);
  n_ = static_cast<int>(sh_.workers.size());
  raw_.resize(n_);
  for (int i = 0; i < n_; ++i) raw_[i] = to_ps.dist[sh_.workers[i]] + ps_w;
}

const ToTarget& TreePlanner::ShardPricer::DistTo(int target) {
  auto it = tp_->dist_cache_.find(target);
  if (it == tp_->dist_cache_.end()) {
    it = tp_->dist_cache_.emplace(target, ShortestPathsTo(tp_->g_, tp_->in_arcs_, target, arc_w_))
             .first;
  }
  return it->second;
}

double TreePlanner::ShardPricer::Activation(int v) {
  int p = -1;
  const std::vector<int>& arcs = tp_->Stream(s_, v, &p);
  double c = 0;
  for (int a : arcs) c += arc_w_[a];
  c += p >= 0 ? NodeW(p) : NodeW(sh_.ps);
  if (tp_->mem_row_[v] >= 0) c += MemW(v) * tp_->MemoryCoefficient(s_, v);
  return c;
}

double TreePlanner::ShardPricer::InputCost(int i, int v) {
  const ToTarget& t = DistTo(v);
  const double d = t.dist[sh_.workers[i]];
  return d + NodeW(v);
}

int TreePlanner::ShardPricer::ParentIn(int v) {
  if (tp_->family_ != Family::kChains) return -1;
  auto it = tp_->parent_of_ps_[sh_.ps].find(v);
  return it == tp_->parent_of_ps_[sh_.ps].end() ? -1 : it->second;
}

double TreePlanner::ShardPricer::ActOf(int v) {
  auto it = act_.find(v);
  if (it == act_.end()) it = act_.emplace(v, Activation(v)).first;
  return it->second;
}

const std::vector<double>& TreePlanner::ShardPricer::IcOf(int v) {
  auto it = ic_.find(v);
  if (it == ic_.end()) {
    std::vector<double> row(n_);
    for (int i = 0; i < n_; ++i) row[i] = InputCost(i, v);
    it = ic_.emplace(v, std::move(row)).first;
  }
  return it->second;
}

// Greedy capacitated facility location over `cands`: repeatedly open (or fill) the switch
// whose best workers save most over their current node, less its activation (and its
// parent's, if closed); at most 64 inputs per switch, an open child being one input of its
// parent. `first` (>= 0) is opened first.
class TreePlanner::ShardPricer::Greedy {
 public:
  Greedy(ShardPricer* pricer, std::vector<int>* opened)
      : p_(*pricer), opened_(opened), choice_(pricer->n_, pricer->sh_.ps), cur_(pricer->raw_) {}

  std::vector<int> Run(const std::vector<int>& cands, int first) {
    if (first >= 0) {
      std::vector<int> take;
      Fill(first, kMaxFanIn, &take);
      Assign(first, take);
    }
    for (int round = 0; round < 2 * static_cast<int>(cands.size()) + 2; ++round) {
      const int best = BestSwitch(cands);
      if (best < 0) break;
      std::vector<int> best_take;
      Fill(best, kMaxFanIn - load_[best] - kids_[best], &best_take);
      Assign(best, best_take);
    }
    return std::move(choice_);
  }

 private:
  // The candidate whose gain (savings less activations) is largest, or -1 when none gains.
  int BestSwitch(const std::vector<int>& cands) {
    int best = -1;
    double best_gain = 1e-12;
    for (int v : cands) {
      const bool is_open = open_.count(v) > 0;
      const int p = p_.ParentIn(v);
      if (!is_open && p >= 0 && load_[p] + kids_[p] + 1 > kMaxFanIn) continue;
      const int room = kMaxFanIn - load_[v] - kids_[v];
      if (room <= 0) continue;
      double gain = Fill(v, room, nullptr);
      if (!is_open) gain -= p_.ActOf(v);
      if (!is_open && p >= 0 && !open_.count(p)) gain -= p_.ActOf(p);
      if (gain > best_gain) {
        best_gain = gain;
        best = v;
      }
    }
    return best;
  }

  // Opens `v` and, up the chain, its closed parents.
  void OpenSwitch(int v) {
    while (v >= 0 && open_.insert(v).second) {
      if (opened_ != nullptr) opened_->push_back(v);
      const int p = p_.ParentIn(v);
      if (p >= 0) ++kids_[p];
      v = p;
    }
  }

  // The workers' savings at `v` (at most `room` of them, the largest): their sum, and with
  // `take` their indices. O(n) per call (partial selection, no full sort).
  double Fill(int v, int room, std::vector<int>* take) {
    const std::vector<double>& row = p_.IcOf(v);
    saving_.clear();
    for (int i = 0; i < p_.n_; ++i) {
      if (choice_[i] == v) continue;
      const double sv = cur_[i] - row[i];
      if (sv > 0) saving_.push_back({-sv, i});
    }
    if (room <= 0) return 0.0;
    if (static_cast<int>(saving_.size()) > room) {
      std::nth_element(saving_.begin(), saving_.begin() + room, saving_.end());
      saving_.resize(room);
    }
    double gain = 0;
    for (const auto& [neg, i] : saving_) {
      gain += -neg;
      if (take != nullptr) take->push_back(i);
    }
    if (take != nullptr) std::sort(take->begin(), take->end());
    return gain;
  }

  void Assign(int v, const std::vector<int>& take) {
    OpenSwitch(v);
    const std::vector<double>& row = p_.IcOf(v);
    for (int i : take) {
      if (choice_[i] != p_.sh_.ps) --load_[choice_[i]];
      choice_[i] = v;
      cur_[i] = row[i];
      ++load_[v];
    }
  }

  ShardPricer& p_;
  std::vector<int>* opened_;
  std::vector<int> choice_;  // per worker: its node
  std::vector<double> cur_;  // per worker: the cost of its node
  std::map<int, int> load_, kids_;
  std::set<int> open_;
  std::vector<std::pair<double, int>> saving_;
};

std::vector<int> TreePlanner::ShardPricer::Locate(const std::vector<int>& cands, int first,
                                                  std::vector<int>* opened) {
  Greedy greedy(this, opened);
  return greedy.Run(cands, first);
}

Tree TreePlanner::ShardPricer::MakeTree(const std::vector<int>& choice) {
  Tree t;
  t.shard = s_;
  t.agg = choice;
  t.arcs.resize(n_);
  std::map<int, int> used;  // arcs this tree already uses: equal-cost paths spread over them
  for (int i = 0; i < n_; ++i) {
    t.arcs[i] = BalancedPath(tp_->g_, DistTo(choice[i]), arc_w_, sh_.workers[i], &used);
  }
  tp_->FinishTree(&t);
  return t;
}

std::vector<Tree> TreePlanner::ShardPricer::Trees() {
  std::vector<Tree> out;
  if (n_ == 0) {
    Tree t;
    t.shard = s_;
    tp_->FinishTree(&t);
    out.push_back(std::move(t));
    return out;
  }
  std::vector<int> opened;
  out.push_back(MakeTree(Locate(candidates_, -1, &opened)));
  if (!opened.empty()) {
    std::vector<int> others;
    for (int v : candidates_) {
      if (v != opened.front()) others.push_back(v);
    }
    out.push_back(MakeTree(Locate(others, -1, nullptr)));
  }
  if (tp_->family_ == Family::kChains) AddChainTrees(&out);
  return out;
}

void TreePlanner::ShardPricer::AddChainTrees(std::vector<Tree>* out) {
  std::vector<std::pair<double, Tree>> by_cost;
  for (int p : tp_->parents_of_ps_[sh_.ps]) {
    std::vector<int> cands = {p};
    for (const auto& [c, pp] : tp_->parent_of_ps_[sh_.ps]) {
      if (pp == p) cands.push_back(c);
    }
    Tree t = MakeTree(Locate(cands, p, nullptr));
    if (t.active.empty()) continue;
    double c = 0;
    for (const auto& [row, k] : t.load) c += steer_[row] * k;
    by_cost.push_back({c, std::move(t)});
  }
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t k = 0; k < by_cost.size() && k < 2; ++k) out->push_back(std::move(by_cost[k].second));
}

// --- Pricing. `steer` decides the choices (paths, nodes); `cost` is what the trees are
// compared with (both per LP resource row). Returns up to a few trees for the shard. ---
std::vector<Tree> TreePlanner::Price(int s, const std::vector<double>& steer,
                                     const std::vector<double>& cost) {
  (void)cost;
  ShardPricer pricer(this, s, steer);
  return pricer.Trees();
}

double TreePlanner::MemoryCoefficient(int s, int v) {
  // The route of v's stream to the PS, through its parent.
  std::vector<int> route = StreamRoute(s, v);
  const int bytes = std::max(1, g_.topology().switches[v].ina.aggregator_bytes);
  return HoldUs(v, route) * 125.0 / bytes;
}

// The route of v's stream all the way to the PS (through its parent), fixing both.
std::vector<int> TreePlanner::StreamRoute(int s, int v) {
  std::vector<int> route;
  for (int hop = 0; hop < 4 && v >= 0; ++hop) {
    int p = -1;
    const std::vector<int>& arcs = Stream(s, v, &p);
    route.insert(route.end(), arcs.begin(), arcs.end());
    v = p;
  }
  return route;
}

// Fills active switches and the load of a tree; fixes the streams it uses.
void TreePlanner::FinishTree(Tree* t) {
  Shard& sh = shards_[t->shard];
  std::map<int, double> load;
  auto add = [&](int row, double c) {
    if (row >= 0) load[row] += c;
  };
  std::set<int> active;
  for (size_t i = 0; i < t->agg.size(); ++i) {
    for (int a : t->arcs[i]) add(resource_row_[net_.ArcResource(a)], 1);
    const int v = t->agg[i];
    if (v == sh.ps) {
      add(resource_row_[net_.NodeResource(sh.ps)], 1);
    } else {
      add(resource_row_[net_.NodeResource(v)], 1);
      active.insert(v);
    }
  }
  // Parents of active children are active too.
  std::vector<int> work(active.begin(), active.end());
  while (!work.empty()) {
    const int v = work.back();
    work.pop_back();
    int p = -1;
    Stream(t->shard, v, &p);
    if (p >= 0 && active.insert(p).second) work.push_back(p);
  }
  for (int v : active) {
    int p = -1;
    const std::vector<int>& arcs = Stream(t->shard, v, &p);
    for (int a : arcs) add(resource_row_[net_.ArcResource(a)], 1);
    add(resource_row_[net_.NodeResource(p >= 0 ? p : sh.ps)], 1);
    if (mem_row_[v] >= 0) add(mem_row_[v], MemoryCoefficient(t->shard, v));
  }
  t->active.assign(active.begin(), active.end());
  t->load.assign(load.begin(), load.end());
}

// The stream of `v` in shard `s`, fixed the first time it is asked for: to its parent (chains)
// or the PS, on a minimum-hop path that avoids the arcs the shard's other streams already use.
const std::vector<int>& TreePlanner::Stream(int s, int v, int* parent) {
  Shard& sh = shards_[s];
  auto it = sh.stream_arcs.find(v);
  if (it == sh.stream_arcs.end()) {
    int p = -1;
    if (family_ == Family::kChains) {
      auto cit = parent_of_ps_[sh.ps].find(v);
      if (cit != parent_of_ps_[sh.ps].end()) p = cit->second;
    }
    // Fewest hops first, then the most residual capacity (other jobs' load, the background):
    // one hop weighs 1, an arc at the largest residual 1e-3 more, a saturated one far more.
    std::vector<double> w(g_.num_arcs(), 1);
    double top = 0;
    for (int a = 0; a < g_.num_arcs(); ++a) top = std::max(top, net_.residual(net_.ArcResource(a)));
    for (int a = 0; a < g_.num_arcs(); ++a) {
      const double r = net_.residual(net_.ArcResource(a));
      w[a] = 1 + 1e-3 * top / std::max(r, 1e-6 * std::max(top, 1e-9));
    }
    // A child's path to its parent avoids every node of the parent's own route to the PS
    // (but the parent): the data plane programs a chain only when child -> parent -> PS is a
    // simple path (core::DeriveSwitchIntents), and would otherwise send the child straight to
    // the PS.
    if (p >= 0) {
      int pp = -1;
      const std::vector<int> up = Stream(s, p, &pp);
      for (int a : up) {
        const int node = g_.arc(a).to;
        for (int in : in_arcs_[node]) w[in] = kInf;
      }
      for (int in : in_arcs_[v]) w[in] = kInf;  // nor come back through the child
    }
    std::vector<int> arcs = BalancedPath(g_, ShortestPathsTo(g_, in_arcs_, p >= 0 ? p : sh.ps, w),
                                         w, v, &stream_arc_use_[s]);
    if (p >= 0 && arcs.empty()) p = -1;  // no such path: the child sends to the PS
    if (p < 0 && arcs.empty()) {
      std::vector<double> plain(g_.num_arcs(), 1);
      arcs = BalancedPath(g_, ShortestPathsTo(g_, in_arcs_, sh.ps, plain), plain, v,
                          &stream_arc_use_[s]);
    }
    it = sh.stream_arcs.emplace(v, std::move(arcs)).first;
    sh.parent[v] = p;
  }
  *parent = sh.parent[v];
  return it->second;
}

}  // namespace inac::scheduler::trees_internal
