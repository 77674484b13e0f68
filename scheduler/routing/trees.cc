#include "scheduler/routing/trees.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/memory/aggregator_model.h"

namespace inac::scheduler {
namespace {

constexpr int kMaxFanIn = 64;  // ina.p4's input bitmap
constexpr double kInf = std::numeric_limits<double>::infinity();
// Objective weight of a tree's arc load per unit of its rate (negative): among plans of equal
// rates the LP keeps the one that loads the links least, so a job leaves room for the next
// (1e-10 per Gbps-hop: far below what would trade any rate).
constexpr double kLoadCost = 1e-10;
// A tree kept in the plan carries at least this share of its shard (the largest always): every
// tree is a tag with entries on each switch it uses and a window on each aggregating switch, and
// a tiny tag's window is mostly rounding.
constexpr double kMinTreeShare = 0.005;
// Work units (arc relaxations and worker scans) the pricing rounds of one family may take.
constexpr double kWorkPerPlan = 1e8;

enum class Family { kSingle, kChains };

// One shard: a (job, PS) pair.
struct Shard {
  int job = -1;              // index into network.input().jobs
  int ps = -1;               // PS node
  std::vector<int> workers;  // worker nodes that send over the network (not the PS itself)
  std::vector<int> local;    // workers that are this PS (send nothing)
  // Stream of each aggregating switch, fixed at first use: its path and its parent (-1: the PS).
  std::map<int, std::vector<int>> stream_arcs;
  std::map<int, int> parent;
  int cov_row = -1;
  int share_col = -1;
};

struct Tree {
  int shard = -1;
  std::vector<int> agg;                      // per shard worker: node (switch or the PS)
  std::vector<std::vector<int>> arcs;        // per shard worker: path to agg
  std::vector<int> active;                   // aggregating switches, sorted
  std::vector<std::pair<int, double>> load;  // resource row -> coefficient per unit rate
  int column = -1;
};

// Reverse shortest paths toward one target over arc weights (hosts other than the target do
// not forward, so a host is only ever a path's first node).
struct ToTarget {
  std::vector<double> dist;
  std::vector<int> next_arc;  // arc from a node one step toward the target; -1 at the target
};

class Pricer {
 public:
  Pricer(const Network& net, Family family, const std::vector<std::vector<int>>& in_arcs)
      : net_(net), g_(net.graph()), family_(family), in_arcs_(in_arcs) {}

  const Network& net_;
  const core::Graph& g_;
  Family family_;
  const std::vector<std::vector<int>>& in_arcs_;

  ToTarget Dijkstra(int target, const std::vector<double>& arc_weight) const {
    ToTarget t;
    t.dist.assign(g_.num_nodes(), kInf);
    t.next_arc.assign(g_.num_nodes(), -1);
    using Item = std::pair<double, int>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
    t.dist[target] = 0;
    heap.push({0, target});
    while (!heap.empty()) {
      auto [d, u] = heap.top();
      heap.pop();
      if (d > t.dist[u]) continue;
      if (u != target && g_.is_host(u)) continue;  // hosts do not forward
      for (int a : in_arcs_[u]) {
        const int v = g_.arc(a).from;
        const double nd = d + arc_weight[a];
        if (nd < t.dist[v] - 1e-15 ||
            (std::abs(nd - t.dist[v]) <= 1e-15 && t.next_arc[v] >= 0 && a < t.next_arc[v])) {
          t.dist[v] = nd;
          t.next_arc[v] = a;
          if (!g_.is_host(v)) heap.push({nd, v});  // a host is a leaf: never expanded
        }
      }
    }
    return t;
  }

  static std::vector<int> PathArcs(const ToTarget& t, int from, const core::Graph& g) {
    std::vector<int> arcs;
    int v = from;
    while (t.next_arc[v] >= 0) {
      arcs.push_back(t.next_arc[v]);
      v = g.arc(t.next_arc[v]).to;
      if (arcs.size() > static_cast<size_t>(g.num_nodes())) return {};
    }
    return arcs;
  }
};

class TreePlanner {
 public:
  TreePlanner(const Network& net, Family family) : net_(net), g_(net.graph()), family_(family) {
    in_arcs_.resize(g_.num_nodes());
    for (int u = 0; u < g_.num_nodes(); ++u) {
      for (int a : g_.out_arcs(u)) in_arcs_[g_.arc(a).to].push_back(a);
    }
    const PlanningInput& in = net.input();
    policy_ = ParseMemoryPolicy(in.options.memory_policy);
    if (policy_ && *policy_ == MemoryPolicy::kNoIna) policy_.reset();
  }

  absl::StatusOr<RoutingResult> Run() {
    const PlanningInput& in = net_.input();
    const int n_jobs = static_cast<int>(in.jobs.size());
    // Shards.
    for (int j = 0; j < n_jobs; ++j) {
      const std::vector<int> ps = PsNodes(net_, j);
      const std::vector<int> workers = WorkerNodes(net_, j);
      for (int s : ps) {
        Shard sh;
        sh.job = j;
        sh.ps = s;
        for (int w : workers) (w == s ? sh.local : sh.workers).push_back(w);
        shards_.push_back(std::move(sh));
      }
    }
    ComputeParents();
    BuildRows(n_jobs);
    // Initial trees: utilisation prices.
    std::vector<double> util(rows_resource_.size(), 0);
    for (size_t r = 0; r < rows_resource_.size(); ++r) {
      const double cap = RowCapacity(static_cast<int>(r));
      util[r] = cap > 1e-12 ? 1.0 / cap : 1e6;
    }
    for (size_t s = 0; s < shards_.size(); ++s) {
      for (Tree& t : Price(static_cast<int>(s), util, /*utilisation=*/util)) AddTree(std::move(t));
    }
    ++price_round_;
    lp::Solution sol;
    int iterations = 0;
    // The pricing rounds: PlanningOptions::tree_iterations, fewer when one round's estimated
    // work (per shard: a shortest-path tree toward every candidate, and the greedy's scan of
    // every candidate's workers) exceeds kWorkPerPlan / rounds. On GRID's k=8 settings a round
    // costs ~2e5 units and nothing is cut; at k=32 with 1024 workers and 4 PSs a round costs
    // ~2.7e8 (1.9 s of CPU) and the plan is the initial pricing's LP (docs/routing.md 3b).
    double per_round = 0;
    for (const Shard& sh : shards_) {
      const double cands = static_cast<double>(CandidateCount(sh));
      per_round += cands * (static_cast<double>(g_.num_arcs()) + 16.0 * sh.workers.size());
    }
    int max_iterations = std::max(0, in.options.tree_iterations);
    if (per_round > 0) {
      max_iterations =
          static_cast<int>(std::min<double>(max_iterations, std::floor(kWorkPerPlan / per_round)));
    }
    for (;; ++iterations) {
      auto solved = Solve(/*restrict_to=*/nullptr);
      if (!solved.ok()) return solved.status();
      sol = std::move(*solved);
      if (sol.status != lp::SolveStatus::kOptimal || sol.row_duals.empty()) break;
      if (iterations >= max_iterations) break;
      // Prices: the LP's duals on the resource rows; the pricing's choices also see a small
      // utilisation term, so that free resources are spread rather than taken at random.
      std::vector<double> dual(rows_resource_.size(), 0), steer(rows_resource_.size(), 0);
      double scale = 0;
      for (size_t r = 0; r < rows_resource_.size(); ++r) {
        dual[r] = std::max(0.0, sol.row_duals[first_resource_row_ + r]);
        scale = std::max(scale, dual[r]);
      }
      if (scale <= 0) scale = 1;
      for (size_t r = 0; r < rows_resource_.size(); ++r) {
        steer[r] = dual[r] + 1e-3 * scale * util[r] * MeanCapacity();
      }
      int added = 0;
      for (size_t s = 0; s < shards_.size(); ++s) {
        const double price = -sol.row_duals[shards_[s].cov_row];
        for (Tree& t : Price(static_cast<int>(s), steer, dual)) {
          double cost = 0;
          for (const auto& [row, c] : t.load) cost += dual[row] * c;
          cost += kLoadCost * ArcLoad(t);
          if (cost < price - 1e-9 * std::max(1.0, std::abs(price))) {
            if (AddTree(std::move(t))) ++added;
          }
        }
      }
      ++price_round_;
      if (added == 0) break;
    }
    iterations_ = iterations;
    if (sol.status != lp::SolveStatus::kOptimal && sol.status != lp::SolveStatus::kFeasible) {
      return absl::InternalError(
          absl::StrCat("trees: master LP ", lp::SolveStatusName(sol.status)));
    }
    // Keep the trees that carry a real part of their shard, at most the range cap per shard.
    std::vector<char> keep(trees_.size(), 0);
    KeepTrees(sol, &keep);
    auto final_sol = Solve(&keep);
    if (!final_sol.ok()) return final_sol.status();
    if (final_sol->status == lp::SolveStatus::kOptimal) sol = std::move(*final_sol);
    objective_ = sol.objective;
    return Realise(sol, keep);
  }

  int iterations() const { return iterations_; }
  int num_trees() const { return static_cast<int>(trees_.size()); }
  double objective() const { return objective_; }
  int lp_rows() const { return lp_rows_; }
  int lp_columns() const { return lp_columns_; }

 private:
  // --- Rows: per job a fairness row, per shard a coverage row, then one row per resource (every
  // network resource with positive residual, and with a memory policy one per INA switch's
  // aggregators). ---
  void BuildRows(int n_jobs) {
    (void)n_jobs;
    const int nres = net_.num_resources();
    resource_row_.assign(nres, -1);
    mem_row_.assign(g_.num_nodes(), -1);
    for (int r = 0; r < nres; ++r) {
      resource_row_[r] = static_cast<int>(rows_resource_.size());
      rows_resource_.push_back(r);
    }
    if (policy_) {
      for (int v = 0; v < g_.num_switches(); ++v) {
        if (!g_.ina_capable(v) || g_.aggregators(v) <= 0) continue;
        mem_row_[v] = static_cast<int>(rows_resource_.size());
        rows_resource_.push_back(-1 - v);
      }
    }
  }

  double RowCapacity(int r) const {
    const int res = rows_resource_[r];
    if (res >= 0) return std::max(0.0, net_.residual(res));
    const int v = -1 - res;
    // The aggregators of the switch, less one per tag that may round up (a margin for the
    // integer windows the memory planner grants).
    return std::max(0.0, 0.97 * static_cast<double>(g_.aggregators(v)) - 8);
  }

  double MeanCapacity() const {
    if (mean_capacity_ > 0) return mean_capacity_;
    double sum = 0;
    int n = 0;
    for (size_t r = 0; r < rows_resource_.size(); ++r) {
      const double c = RowCapacity(static_cast<int>(r));
      if (c > 0 && rows_resource_[r] >= 0) {
        sum += c;
        ++n;
      }
    }
    mean_capacity_ = n > 0 ? sum / n : 1;
    return mean_capacity_;
  }

  // Hold time (µs) of one chunk at switch `v` whose stream follows `arcs` to the PS (the whole
  // route, through a parent), by the memory model (scheduler/memory/aggregator_model.h).
  double HoldUs(int v, const std::vector<int>& route_arcs) const {
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

  int CandidateCount(const Shard& sh) const {
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
  void ComputeParents() {
    if (family_ != Family::kChains) return;
    std::set<int> pss;
    for (const Shard& s : shards_) pss.insert(s.ps);
    for (int ps : pss) {
      std::vector<int> hops = HopsFrom(ps);
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
        std::vector<int> from_c = HopsFrom(c);
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

  std::vector<int> HopsFrom(int src) const {
    std::vector<int> hops(g_.num_nodes(), -1);
    std::vector<int> queue = {src};
    hops[src] = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      const int u = queue[i];
      if (u != src && g_.is_host(u)) continue;
      for (int a : g_.out_arcs(u)) {
        const int v = g_.arc(a).to;
        if (hops[v] >= 0) continue;
        hops[v] = hops[u] + 1;
        queue.push_back(v);
      }
    }
    return hops;
  }

  // --- Pricing. `steer` decides the choices (paths, nodes); `cost` is what the trees are
  // compared with (both per LP resource row). Returns up to a few trees for the shard. ---
  std::vector<Tree> Price(int s, const std::vector<double>& steer,
                          const std::vector<double>& cost) {
    (void)cost;
    Shard& sh = shards_[s];
    Pricer pricer(net_, family_, in_arcs_);
    std::vector<double> arc_w(g_.num_arcs(), 0);
    for (int a = 0; a < g_.num_arcs(); ++a) {
      arc_w[a] = steer[resource_row_[net_.ArcResource(a)]] + 1e-9;
    }
    auto node_w = [&](int v) { return steer[resource_row_[net_.NodeResource(v)]]; };
    auto mem_w = [&](int v) { return mem_row_[v] >= 0 ? steer[mem_row_[v]] : 0.0; };
    // Candidate aggregation switches of this shard.
    std::vector<int> candidates;
    if (family_ == Family::kSingle) {
      for (int v = 0; v < g_.num_switches(); ++v) {
        if (g_.ina_capable(v) && net_.residual(net_.NodeResource(v)) > 1e-9)
          candidates.push_back(v);
      }
    } else {
      for (int p : parents_of_ps_[sh.ps]) candidates.push_back(p);
      for (const auto& [c, p] : parent_of_ps_[sh.ps]) candidates.push_back(c);
    }
    // Distances toward each target under this round's prices, shared by the round's shards.
    if (cache_round_ != price_round_) {
      dist_cache_.clear();
      cache_round_ = price_round_;
    }
    auto dist_to = [&](int target) -> const ToTarget& {
      auto it = dist_cache_.find(target);
      if (it == dist_cache_.end()) {
        it = dist_cache_.emplace(target, pricer.Dijkstra(target, arc_w)).first;
      }
      return it->second;
    };
    const ToTarget& to_ps = dist_to(sh.ps);
    const double ps_w = node_w(sh.ps);
    // Activation cost of a switch (its stream, its parent's processing, its memory).
    const int n = static_cast<int>(sh.workers.size());
    std::vector<double> raw(n);
    for (int i = 0; i < n; ++i) raw[i] = to_ps.dist[sh.workers[i]] + ps_w;
    std::vector<Tree> out;
    if (n == 0) {
      Tree t;
      t.shard = s;
      FinishTree(&t);
      out.push_back(std::move(t));
      return out;
    }
    auto activation = [&](int v) {
      int p = -1;
      const std::vector<int>& arcs = Stream(s, v, &p);
      double c = 0;
      for (int a : arcs) c += arc_w[a];
      c += p >= 0 ? node_w(p) : ps_w;
      if (mem_row_[v] >= 0) c += mem_w(v) * MemoryCoefficient(s, v);
      return c;
    };
    auto input_cost = [&](int i, int v) {
      const ToTarget& t = dist_to(v);
      const double d = t.dist[sh.workers[i]];
      return d + node_w(v);
    };
    // Greedy capacitated facility location over `open_from` (candidate switches), with `forced`
    // switches open from the start (a chain's root). Returns per worker the chosen node.
    // The parent of a candidate in this family (-1: its stream goes to the PS).
    auto parent_in = [&](int v) {
      if (family_ != Family::kChains) return -1;
      auto it = parent_of_ps_[sh.ps].find(v);
      return it == parent_of_ps_[sh.ps].end() ? -1 : it->second;
    };
    std::map<int, double> act;
    auto act_of = [&](int v) {
      auto it = act.find(v);
      if (it == act.end()) it = act.emplace(v, activation(v)).first;
      return it->second;
    };
    std::map<int, std::vector<double>> ic;
    auto ic_of = [&](int v) -> const std::vector<double>& {
      auto it = ic.find(v);
      if (it == ic.end()) {
        std::vector<double> row(n);
        for (int i = 0; i < n; ++i) row[i] = input_cost(i, v);
        it = ic.emplace(v, std::move(row)).first;
      }
      return it->second;
    };
    // Greedy capacitated facility location over `cands`: repeatedly open (or fill) the switch
    // whose best workers save most over their current node, less its activation (and its
    // parent's, if closed); at most 64 inputs per switch, an open child being one input of its
    // parent. `first` (>= 0) is opened first. Returns per worker the chosen node and, in
    // `opened`, the switches in opening order.
    auto locate = [&](const std::vector<int>& cands, int first, std::vector<int>* opened) {
      std::vector<int> choice(n, sh.ps);
      std::vector<double> cur = raw;
      std::map<int, int> load, kids;
      std::set<int> open;
      auto open_switch = [&](int v) {
        while (v >= 0 && open.insert(v).second) {
          if (opened != nullptr) opened->push_back(v);
          const int p = parent_in(v);
          if (p >= 0) ++kids[p];
          v = p;
        }
      };
      // The workers' savings at `v` (at most `room` of them, the largest): their sum, and with
      // `take` their indices. O(n) per call (partial selection, no full sort).
      std::vector<std::pair<double, int>> saving;
      auto fill = [&](int v, int room, std::vector<int>* take) {
        const std::vector<double>& row = ic_of(v);
        saving.clear();
        for (int i = 0; i < n; ++i) {
          if (choice[i] == v) continue;
          const double sv = cur[i] - row[i];
          if (sv > 0) saving.push_back({-sv, i});
        }
        if (room <= 0) return 0.0;
        if (static_cast<int>(saving.size()) > room) {
          std::nth_element(saving.begin(), saving.begin() + room, saving.end());
          saving.resize(room);
        }
        double gain = 0;
        for (const auto& [neg, i] : saving) {
          gain += -neg;
          if (take != nullptr) take->push_back(i);
        }
        if (take != nullptr) std::sort(take->begin(), take->end());
        return gain;
      };
      auto assign = [&](int v, const std::vector<int>& take) {
        open_switch(v);
        const std::vector<double>& row = ic_of(v);
        for (int i : take) {
          if (choice[i] != sh.ps) --load[choice[i]];
          choice[i] = v;
          cur[i] = row[i];
          ++load[v];
        }
      };
      if (first >= 0) {
        std::vector<int> take;
        fill(first, kMaxFanIn, &take);
        assign(first, take);
      }
      for (int round = 0; round < 2 * static_cast<int>(cands.size()) + 2; ++round) {
        int best = -1;
        double best_gain = 1e-12;
        std::vector<int> best_take;
        for (int v : cands) {
          const bool is_open = open.count(v) > 0;
          const int p = parent_in(v);
          if (!is_open && p >= 0 && load[p] + kids[p] + 1 > kMaxFanIn) continue;
          const int room = kMaxFanIn - load[v] - kids[v];
          if (room <= 0) continue;
          double gain = fill(v, room, nullptr);
          if (!is_open) gain -= act_of(v);
          if (!is_open && p >= 0 && !open.count(p)) gain -= act_of(p);
          if (gain > best_gain) {
            best_gain = gain;
            best = v;
          }
        }
        if (best < 0) break;
        best_take.clear();
        fill(best, kMaxFanIn - load[best] - kids[best], &best_take);
        assign(best, best_take);
      }
      return choice;
    };
    auto make_tree = [&](const std::vector<int>& choice) {
      Tree t;
      t.shard = s;
      t.agg = choice;
      t.arcs.resize(n);
      std::map<int, int> used;  // arcs this tree already uses: equal-cost paths spread over them
      for (int i = 0; i < n; ++i) {
        t.arcs[i] = BalancedPath(dist_to(choice[i]), arc_w, sh.workers[i], &used);
      }
      FinishTree(&t);
      return t;
    };
    // Trees of this pricing: the greedy over every candidate, the greedy without the switch it
    // opened first (another shape), and with chains the greedy within each parent's own subtree
    // (the two cheapest).
    std::vector<int> opened;
    out.push_back(make_tree(locate(candidates, -1, &opened)));
    if (!opened.empty()) {
      std::vector<int> others;
      for (int v : candidates) {
        if (v != opened.front()) others.push_back(v);
      }
      out.push_back(make_tree(locate(others, -1, nullptr)));
    }
    if (family_ == Family::kChains) {
      std::vector<std::pair<double, Tree>> by_cost;
      for (int p : parents_of_ps_[sh.ps]) {
        std::vector<int> cands = {p};
        for (const auto& [c, pp] : parent_of_ps_[sh.ps]) {
          if (pp == p) cands.push_back(c);
        }
        Tree t = make_tree(locate(cands, p, nullptr));
        if (t.active.empty()) continue;
        double c = 0;
        for (const auto& [row, k] : t.load) c += steer[row] * k;
        by_cost.push_back({c, std::move(t)});
      }
      std::stable_sort(by_cost.begin(), by_cost.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (size_t k = 0; k < by_cost.size() && k < 2; ++k)
        out.push_back(std::move(by_cost[k].second));
    }
    return out;
  }

  double MemoryCoefficient(int s, int v) {
    // The route of v's stream to the PS, through its parent.
    std::vector<int> route = StreamRoute(s, v);
    const int bytes = std::max(1, g_.topology().switches[v].ina.aggregator_bytes);
    return HoldUs(v, route) * 125.0 / bytes;
  }

  // Σ over the tree's arcs of its load per unit rate.
  double ArcLoad(const Tree& t) const {
    double total = 0;
    for (const auto& [row, c] : t.load) {
      const int res = rows_resource_[row];
      if (res >= 0 && net_.IsArcResource(res)) total += c;
    }
    return total;
  }

  // The route of v's stream all the way to the PS (through its parent), fixing both.
  std::vector<int> StreamRoute(int s, int v) {
    std::vector<int> route;
    for (int hop = 0; hop < 4 && v >= 0; ++hop) {
      int p = -1;
      const std::vector<int>& arcs = Stream(s, v, &p);
      route.insert(route.end(), arcs.begin(), arcs.end());
      v = p;
    }
    return route;
  }

  // A path from `from` toward the target of `t` over arcs that are tight for its distances
  // (equal cost up to rounding), taking at each node the tight arc used least so far in `used`
  // (then the smaller arc id): equal-cost paths spread as ECMP would spread them.
  std::vector<int> BalancedPath(const ToTarget& t, const std::vector<double>& arc_w, int from,
                                std::map<int, int>* used) const {
    std::vector<int> arcs;
    int u = from;
    std::set<int> visited = {from};
    while (t.next_arc[u] >= 0) {
      // Tight arcs used least so far; among them one by a hash of (path origin, node), as ECMP
      // hashes a flow onto one of its equal-cost next hops.
      const double tolerance = 1e-12 * std::max(1.0, t.dist[u]);
      std::vector<int> tight;
      int least = std::numeric_limits<int>::max();
      for (int a : g_.out_arcs(u)) {
        const int v = g_.arc(a).to;
        if (t.dist[v] == kInf) continue;
        if (g_.is_host(v) && t.next_arc[v] >= 0) continue;  // hosts forward nothing
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
      u = g_.arc(best).to;
      if (!visited.insert(u).second) return Pricer::PathArcs(t, from, g_);
      if (arcs.size() > static_cast<size_t>(g_.num_nodes())) return Pricer::PathArcs(t, from, g_);
    }
    return arcs;
  }

  // Fills active switches and the load of a tree; fixes the streams it uses.
  void FinishTree(Tree* t) {
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
  const std::vector<int>& Stream(int s, int v, int* parent) {
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
      for (int a = 0; a < g_.num_arcs(); ++a)
        top = std::max(top, net_.residual(net_.ArcResource(a)));
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
      Pricer pricer(net_, family_, in_arcs_);
      std::vector<int> arcs =
          BalancedPath(pricer.Dijkstra(p >= 0 ? p : sh.ps, w), w, v, &stream_arc_use_[s]);
      if (p >= 0 && arcs.empty()) p = -1;  // no such path: the child sends to the PS
      if (p < 0 && arcs.empty()) {
        std::vector<double> plain(g_.num_arcs(), 1);
        arcs = BalancedPath(pricer.Dijkstra(sh.ps, plain), plain, v, &stream_arc_use_[s]);
      }
      it = sh.stream_arcs.emplace(v, std::move(arcs)).first;
      sh.parent[v] = p;
    }
    *parent = sh.parent[v];
    return it->second;
  }

  // Adds a tree unless an equal one exists; true when added.
  bool AddTree(Tree t) {
    std::vector<int64_t> key = {t.shard};
    for (size_t i = 0; i < t.agg.size(); ++i) {
      key.push_back(t.agg[i]);
      for (int a : t.arcs[i]) key.push_back(a);
      key.push_back(-1);
    }
    if (!seen_.insert(key).second) return false;
    trees_.push_back(std::move(t));
    return true;
  }

  // The master LP over the trees (all, or those marked in `restrict_to`): built once with
  // every row, the trees added as columns as they are found, each solve warm-started from the
  // last (lp::ColumnGenerationLp).
  absl::StatusOr<lp::Solution> Solve(const std::vector<char>* restrict_to) {
    const PlanningInput& in = net_.input();
    const int n_jobs = static_cast<int>(in.jobs.size());
    if (master_ == nullptr) {
      lp::LinearProgram prog;
      prog.SetMaximize(true);
      t_col_ = prog.AddColumn(0, lp::kInfinity, 1);
      std::vector<int> lambda(n_jobs);
      for (int j = 0; j < n_jobs; ++j) lambda[j] = prog.AddColumn(0, lp::kInfinity, 1e-6);
      for (Shard& sh : shards_) sh.share_col = prog.AddColumn(0, lp::kInfinity, 0);
      // Fairness rows: λ_j - t >= 0.
      for (int j = 0; j < n_jobs; ++j) prog.AddRow(0, lp::kInfinity, {lambda[j], t_col_}, {1, -1});
      // Shares: Σ_s v_s - λ_j = 0.
      for (int j = 0; j < n_jobs; ++j) {
        std::vector<int> cols = {lambda[j]};
        std::vector<double> coef = {-1};
        for (const Shard& sh : shards_) {
          if (sh.job != j) continue;
          cols.push_back(sh.share_col);
          coef.push_back(1);
        }
        prog.AddRow(0, 0, cols, coef);
      }
      // Coverage: Σ_{trees of s} m - v_s = 0 (the trees' entries come with their columns).
      for (Shard& sh : shards_) sh.cov_row = prog.AddRow(0, 0, {sh.share_col}, {-1});
      first_resource_row_ = prog.num_rows();
      for (size_t r = 0; r < rows_resource_.size(); ++r) {
        prog.AddRow(-lp::kInfinity, RowCapacity(static_cast<int>(r)), {}, {});
      }
      master_ = std::make_unique<lp::ColumnGenerationLp>(prog);
    }
    for (Tree& t : trees_) {
      if (t.column >= 0) continue;
      std::vector<int> rows = {shards_[t.shard].cov_row};
      std::vector<double> coef = {1};
      for (const auto& [row, c] : t.load) {
        rows.push_back(first_resource_row_ + row);
        coef.push_back(c);
      }
      t.column = master_->AddColumn(0, lp::kInfinity, -kLoadCost * ArcLoad(t), rows, coef);
    }
    if (restrict_to != nullptr) {
      for (size_t k = 0; k < trees_.size(); ++k) {
        master_->SetColumnBounds(trees_[k].column, 0, (*restrict_to)[k] ? lp::kInfinity : 0);
      }
    }
    lp_rows_ = master_->num_rows();
    lp_columns_ = master_->num_columns();
    auto sol = master_->Solve(in.options.lp_time_limit_s);
    if (!sol.ok()) return sol.status();
    share_value_.assign(shards_.size(), 0);
    if (!sol->values.empty()) {
      for (size_t s = 0; s < shards_.size(); ++s)
        share_value_[s] = sol->values[shards_[s].share_col];
    }
    return sol;
  }

  void KeepTrees(const lp::Solution& sol, std::vector<char>* keep) {
    const PlanningInput& in = net_.input();
    std::map<int, std::vector<std::pair<double, int>>> by_shard;
    for (size_t k = 0; k < trees_.size(); ++k) {
      if (trees_[k].column < 0 || sol.values.empty()) continue;
      const double m = sol.values[trees_[k].column];
      if (m > 0) by_shard[trees_[k].shard].push_back({-m, static_cast<int>(k)});
    }
    for (auto& [s, list] : by_shard) {
      std::sort(list.begin(), list.end());
      const int ps_count = static_cast<int>(PsNodes(net_, shards_[s].job).size());
      int cap = core::MaxRangesPerShard(ps_count);
      if (in.options.split_max_ranges > 0) cap = std::min(cap, in.options.split_max_ranges);
      const double total = share_value_[s];
      for (size_t i = 0; i < list.size() && static_cast<int>(i) < cap; ++i) {
        if (i > 0 && -list[i].first < kMinTreeShare * total) break;
        (*keep)[list[i].second] = 1;
      }
    }
    // A shard without any kept tree keeps its first tree (a plan needs one range).
    std::set<int> covered;
    for (size_t k = 0; k < trees_.size(); ++k) {
      if ((*keep)[k]) covered.insert(trees_[k].shard);
    }
    for (size_t k = 0; k < trees_.size(); ++k) {
      if (!covered.count(trees_[k].shard)) {
        (*keep)[k] = 1;
        covered.insert(trees_[k].shard);
      }
    }
  }

  absl::StatusOr<RoutingResult> Realise(const lp::Solution& sol, const std::vector<char>& keep) {
    const PlanningInput& in = net_.input();
    const int n_jobs = static_cast<int>(in.jobs.size());
    RoutingResult result;
    result.jobs.resize(n_jobs);
    result.lp_bound_gbps.assign(n_jobs, std::nullopt);
    result.diagnostics.resize(n_jobs);
    std::vector<double> shard_total(shards_.size(), 0);
    std::vector<std::vector<int>> shard_trees(shards_.size());
    for (size_t k = 0; k < trees_.size(); ++k) {
      if (!keep[k] || trees_[k].column < 0) continue;
      const double m = sol.values.empty() ? 0 : sol.values[trees_[k].column];
      shard_trees[trees_[k].shard].push_back(static_cast<int>(k));
      shard_total[trees_[k].shard] += std::max(0.0, m);
    }
    std::vector<double> job_total(n_jobs, 0);
    for (size_t s = 0; s < shards_.size(); ++s) job_total[shards_[s].job] += shard_total[s];
    for (int j = 0; j < n_jobs; ++j) {
      RoutedJob& rj = result.jobs[j];
      rj.job = j;
      const std::vector<int> ps = PsNodes(net_, j);
      for (int p : ps) {
        double x = 1.0 / static_cast<double>(ps.size());
        if (job_total[j] > 1e-12) {
          double v = 0;
          for (size_t s = 0; s < shards_.size(); ++s) {
            if (shards_[s].job == j && shards_[s].ps == p) v = shard_total[s];
          }
          x = v / job_total[j];
        }
        rj.shares.push_back({p, x});
      }
      JobDiagnostics& d = result.diagnostics[j];
      d.job_id = in.jobs[j].id;
      d.source = family_ == Family::kSingle ? "trees:single" : "trees:chains";
      d.lp_status = lp::SolveStatusName(sol.status);
      d.lp_columns = lp_columns_;
      d.lp_rows = lp_rows_;
      d.joint = n_jobs > 1;
    }
    for (size_t s = 0; s < shards_.size(); ++s) {
      const Shard& sh = shards_[s];
      RoutedJob& rj = result.jobs[sh.job];
      std::vector<int> list = shard_trees[s];
      // Fractions of the shard, in creation order; a shard the LP gives no rate keeps its first
      // tree whole.
      std::vector<double> frac;
      double total = shard_total[s];
      for (int k : list) {
        const double m = sol.values.empty() ? 0 : std::max(0.0, sol.values[trees_[k].column]);
        frac.push_back(total > 1e-12 ? m / total : (frac.empty() ? 1.0 : 0.0));
      }
      // Drop zero fractions; make them sum to exactly 1.
      std::vector<int> kept;
      std::vector<double> kf;
      for (size_t i = 0; i < list.size(); ++i) {
        if (frac[i] > 0) {
          kept.push_back(list[i]);
          kf.push_back(frac[i]);
        }
      }
      if (kept.empty() && !list.empty()) {
        kept.push_back(list.front());
        kf.push_back(1);
      }
      double sum = 0;
      for (double f : kf) sum += f;
      for (double& f : kf) f /= sum;
      std::set<int> active;
      for (size_t i = 0; i < sh.workers.size(); ++i) {
        for (size_t q = 0; q < kept.size(); ++q) {
          const Tree& t = trees_[kept[q]];
          rj.flows.push_back(RoutedFlow{sh.workers[i], sh.ps, t.agg[i], kf[q], t.arcs[i]});
          if (t.agg[i] != sh.ps) active.insert(t.agg[i]);
        }
      }
      for (int w : sh.local) rj.flows.push_back(RoutedFlow{w, sh.ps, sh.ps, 1.0, {}});
      for (int k : kept) {
        for (int v : trees_[k].active) active.insert(v);
      }
      for (int v : active) {
        auto it = sh.stream_arcs.find(v);
        if (it == sh.stream_arcs.end()) continue;
        const int p = sh.parent.at(v);
        rj.streams.push_back(RoutedStream{v, sh.ps, it->second, p});
      }
    }
    return result;
  }

  const Network& net_;
  const core::Graph& g_;
  Family family_;
  std::optional<MemoryPolicy> policy_;
  std::vector<std::vector<int>> in_arcs_;
  std::vector<Shard> shards_;
  std::vector<Tree> trees_;
  std::set<std::vector<int64_t>> seen_;
  std::vector<int> rows_resource_;  // LP resource row -> network resource, or -1 - switch (memory)
  std::vector<int> resource_row_;   // network resource -> resource row index
  std::vector<int> mem_row_;        // switch -> memory row index, -1 if none
  int first_resource_row_ = 0;
  std::map<int, std::vector<int>> parents_of_ps_;
  std::map<int, std::map<int, int>> parent_of_ps_;
  std::map<int, std::map<int, int>> stream_arc_use_;  // per shard: streams per arc
  std::vector<double> share_value_;
  mutable double mean_capacity_ = 0;
  std::unique_ptr<lp::ColumnGenerationLp> master_;
  int t_col_ = -1;
  int iterations_ = 0;
  int price_round_ = 0;  // bumped whenever the prices change (the distance cache's key)
  int cache_round_ = -1;
  std::map<int, ToTarget> dist_cache_;
  double objective_ = 0;
  int lp_rows_ = 0;
  int lp_columns_ = 0;
};

}  // namespace

absl::StatusOr<RoutingResult> TreeRouting::Route(const Network& network) const {
  if (absl::Status s = CheckPsJobs(network); !s.ok()) return s;
  FlowEvaluator evaluator(network);
  std::optional<RoutingResult> best;
  std::vector<double> best_rates;
  for (Family family : {Family::kSingle, Family::kChains}) {
    if (family == Family::kChains && !network.input().options.reaggregation) continue;
    TreePlanner planner(network, family);
    auto result = planner.Run();
    if (!result.ok()) return result.status();
    std::vector<double> rates;
    for (const JobEvaluation& e : evaluator.Evaluate(result->jobs).jobs)
      rates.push_back(e.rate_gbps);
    if (!best || BetterRates(rates, best_rates)) {
      best = std::move(*result);
      best_rates = std::move(rates);
    }
  }
  return std::move(*best);
}

}  // namespace inac::scheduler
