#include "scheduler/routing/baselines.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

namespace inac::scheduler {
namespace {

// Utilisations of `arcs` after adding `add`, sorted descending.
std::vector<double> SortedUtilisation(const Network& net, const std::vector<int>& arcs,
                                      const std::vector<double>& unit,
                                      const std::vector<double>& residual, double add) {
  std::vector<double> u;
  u.reserve(arcs.size());
  for (int a : arcs) {
    const int r = net.ArcResource(a);
    const double load = unit[r] + add;
    u.push_back(residual[r] > 0 ? load / residual[r] : (load > 0 ? kUnbounded : 0));
  }
  std::sort(u.begin(), u.end(), std::greater<>());
  return u;
}

// -1, 0, 1: `a` better, tied, worse than `b` (lexicographic, relative tolerance 1e-12).
int CompareUtilisation(const std::vector<double>& a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double scale = std::max(std::abs(a[i]), std::abs(b[i]));
    if (std::isinf(scale)) return a[i] < b[i] ? -1 : 1;
    if (std::abs(a[i] - b[i]) <= 1e-12 * scale) continue;
    return a[i] < b[i] ? -1 : 1;
  }
  return 0;  // one is a prefix of the other: the hop count decides
}

void AddLoad(const std::vector<int>& arcs, double x, std::vector<double>& unit) {
  for (int a : arcs) unit[a] += x;
}

std::vector<std::pair<int, double>> EqualShares(const std::vector<int>& ps) {
  std::vector<std::pair<int, double>> shares;
  for (int s : ps) shares.emplace_back(s, 1.0 / static_cast<double>(ps.size()));
  return shares;
}

double ShareOf(const RoutedJob& rj, int ps) {
  for (const auto& [s, x] : rj.shares) {
    if (s == ps) return x;
  }
  return 0;
}

using RouteFn =
    std::function<RoutedJob(const Network&, PathCache&, const std::vector<double>&, int)>;

absl::StatusOr<RoutingResult> RouteSequentially(const Network& net, const RouteFn& route,
                                                const std::string& source) {
  absl::Status ok = CheckPsJobs(net);
  if (!ok.ok()) return ok;
  PathCache cache(net.graph(), net.input().options.paths);
  FlowEvaluator evaluator(net);
  RoutingResult result;
  const int n = static_cast<int>(net.input().jobs.size());
  result.jobs.resize(n);
  result.lp_bound_gbps.resize(n);
  result.diagnostics.resize(n);
  std::vector<RoutedJob> planned;
  for (int j : PriorityOrder(net.input())) {
    std::vector<double> residual = evaluator.ResidualAfter(planned);
    result.jobs[j] = route(net, cache, residual, j);
    planned.push_back(result.jobs[j]);
    result.diagnostics[j].job_id = net.input().jobs[j].id;
    result.diagnostics[j].source = source;
  }
  return result;
}

}  // namespace

int BalancedPath(const Network& net, const std::vector<Path>& paths,
                 const std::vector<double>& unit, const std::vector<double>& residual, double add) {
  int best = -1;
  std::vector<double> best_u;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::vector<double> u = SortedUtilisation(net, paths[i].arcs, unit, residual, add);
    if (best >= 0) {
      const int c = CompareUtilisation(u, best_u);
      if (c > 0) continue;
      if (c == 0 && paths[i].hops() >= paths[best].hops()) continue;
    }
    best = static_cast<int>(i);
    best_u = std::move(u);
  }
  return best;
}

RoutedJob RouteNoIna(const Network& net, PathCache& paths, const std::vector<double>& residual,
                     int job) {
  RoutedJob rj;
  rj.job = job;
  rj.batch_size = net.input().jobs[job].spec.batch_size;
  std::vector<int> workers = WorkerNodes(net, job);
  rj.shares = EqualShares(PsNodes(net, job));
  std::vector<double> unit(net.num_resources(), 0.0);
  std::vector<int> choice;
  for (int w : workers) {
    for (const auto& [s, x] : rj.shares) {
      RoutedFlow f{w, s, s, 1.0, {}};
      int c = -1;
      if (w != s) {
        const std::vector<Path>& ps = paths.GetSpread(w, s);
        c = BalancedPath(net, ps, unit, residual, x);
        if (c >= 0) {
          f.arcs = ps[c].arcs;
          AddLoad(f.arcs, x, unit);
        }
      }
      choice.push_back(c);
      rj.flows.push_back(std::move(f));
    }
  }
  // Two passes re-placing each flow against everybody else's load.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < rj.flows.size(); ++i) {
      RoutedFlow& f = rj.flows[i];
      if (choice[i] < 0) continue;
      const double x = ShareOf(rj, f.ps);
      AddLoad(f.arcs, -x, unit);
      const std::vector<Path>& ps = paths.GetSpread(f.worker, f.ps);
      int c = BalancedPath(net, ps, unit, residual, x);
      choice[i] = c;
      f.arcs = ps[c].arcs;
      AddLoad(f.arcs, x, unit);
    }
  }
  return rj;
}

RoutedJob RouteAtp(const Network& net, PathCache& paths, const std::vector<double>& residual,
                   int job, const AtpOptions& options) {
  const core::Graph& g = net.graph();
  const bool two_level = options.two_level && net.input().options.reaggregation;
  RoutedJob base;
  base.job = job;
  base.batch_size = net.input().jobs[job].spec.batch_size;
  std::vector<int> ps_nodes = PsNodes(net, job);
  if (options.sharded) {
    base.shares = EqualShares(ps_nodes);
  } else {
    int ps = ps_nodes[0];
    for (int s : ps_nodes) {
      if (residual[net.NodeResource(s)] > residual[net.NodeResource(ps)]) ps = s;
    }
    base.shares = {{ps, 1.0}};
  }
  std::vector<int> workers = WorkerNodes(net, job);

  // Single-homed workers behind each first switch (the raw load of a non-INA ToR's path).
  std::map<int, int> behind;
  for (int w : workers) {
    if (g.out_arcs(w).size() == 1) ++behind[g.arc(g.out_arcs(w)[0]).to];
  }

  // One path per (ToR, PS): balanced among the ToR's k shortest to the PS, greedy then two
  // passes; its weight is what it carries per unit of rate (one stream from an INA ToR, its
  // workers' raw streams otherwise).
  struct TorPath {
    int tor;
    int ps;
    double weight;
    std::vector<int> arcs;
  };
  std::vector<TorPath> tor_paths;
  std::map<std::pair<int, int>, int> tor_index;
  std::vector<double> unit(net.num_resources(), 0.0);
  for (const auto& [s, x] : base.shares) {
    for (int w : workers) {
      if (w == s || g.out_arcs(w).size() != 1) continue;
      const int tor = g.arc(g.out_arcs(w)[0]).to;
      if (!g.is_switch(tor) || tor_index.count({tor, s})) continue;
      const std::vector<Path>& tp = paths.GetSpread(tor, s);
      if (tp.empty()) continue;  // unreachable: validation rules this out
      const double weight = x * (g.ina_capable(tor) ? 1.0 : behind[tor]);
      const int c = BalancedPath(net, tp, unit, residual, weight);
      tor_index[{tor, s}] = static_cast<int>(tor_paths.size());
      tor_paths.push_back(TorPath{tor, s, weight, tp[c].arcs});
      AddLoad(tp[c].arcs, weight, unit);
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (TorPath& tp : tor_paths) {
      AddLoad(tp.arcs, -tp.weight, unit);
      const std::vector<Path>& cands = paths.GetSpread(tp.tor, tp.ps);
      tp.arcs = cands[BalancedPath(net, cands, unit, residual, tp.weight)].arcs;
      AddLoad(tp.arcs, tp.weight, unit);
    }
  }

  struct Route {
    int worker;
    int ps;
    double x;
    std::vector<int> arcs;  // worker -> PS
    int tor = -1;           // level-1 aggregation switch (INA ToR) or -1
    int l2 = -1;            // the switch before the PS (the PS's ToR) when INA-capable, or -1
    int l2_pos = -1;        // number of arcs from the worker to l2
  };
  std::vector<Route> routes;
  for (const auto& [s, x] : base.shares) {
    for (int w : workers) {
      Route r{w, s, x, {}};
      if (w == s) {
        routes.push_back(r);
        continue;
      }
      if (g.out_arcs(w).size() == 1 && tor_index.count({g.arc(g.out_arcs(w)[0]).to, s})) {
        const TorPath& tp = tor_paths[tor_index.at({g.arc(g.out_arcs(w)[0]).to, s})];
        r.arcs = {g.out_arcs(w)[0]};
        r.arcs.insert(r.arcs.end(), tp.arcs.begin(), tp.arcs.end());
      } else {
        const std::vector<Path>& wp = paths.GetSpread(w, s);
        if (wp.empty()) continue;  // unreachable: validation rules this out
        const int c = BalancedPath(net, wp, unit, residual, x);
        r.arcs = wp[c].arcs;
        AddLoad(r.arcs, x, unit);
      }
      const int first = g.arc(r.arcs[0]).to;
      if (g.is_switch(first) && g.ina_capable(first)) r.tor = first;
      const int last_switch = g.arc(r.arcs.back()).from;
      if (g.is_switch(last_switch) && g.ina_capable(last_switch) && last_switch != r.tor) {
        r.l2 = last_switch;
        r.l2_pos = static_cast<int>(r.arcs.size()) - 1;
      }
      routes.push_back(std::move(r));
    }
  }

  auto build = [&](double lambda) {
    RoutedJob rj = base;
    // Level 1: a ToR's capacity is shared by its workers' shards (each worker sends λ in all).
    std::map<int, double> level1;
    for (const Route& r : routes) {
      if (r.tor >= 0) level1[r.tor] += r.x;
    }
    std::map<int, double> f1, used;
    for (const auto& [v, n] : level1) {
      const double cap = residual[net.NodeResource(v)];
      const double demand = n * lambda;
      f1[v] = demand > 0 ? std::min(1.0, cap / demand) : 1.0;
      used[v] = demand * f1[v];
    }
    // Level 2 at the PS's ToR, per (switch, PS): first whole ToR streams (two-level only), in ToR
    // order, then the worker chunks that reach it unaggregated, with the capacity left.
    std::map<std::pair<int, int>, std::map<int, double>> children;  // -> ToR -> stream size
    std::map<std::pair<int, int>, double> spill_demand, f2;
    for (const Route& r : routes) {
      if (r.l2 < 0 || r.arcs.empty()) continue;
      const double rest = r.tor >= 0 ? 1 - f1[r.tor] : 1.0;
      spill_demand[{r.l2, r.ps}] += r.x * rest * lambda;
      if (two_level && r.tor >= 0 && f1[r.tor] > 1e-12) {
        children[{r.l2, r.ps}][r.tor] = r.x * f1[r.tor] * lambda;
      }
    }
    std::set<std::pair<int, int>> chained;  // (ToR, PS) re-aggregated at the PS's ToR
    std::set<std::pair<int, int>> groups;
    for (const auto& [key, d] : spill_demand) groups.insert(key);
    for (const auto& [key, c] : children) groups.insert(key);
    for (const auto& key : groups) {
      const int v = key.first;
      const double cap = residual[net.NodeResource(v)];
      for (const auto& [tor, size] : children[key]) {
        if (used[v] + size <= cap * (1 + 1e-12)) {
          used[v] += size;
          chained.insert({tor, key.second});
        }
      }
      const double d = spill_demand[key];
      const double left = std::max(0.0, cap - used[v]);
      f2[key] = d > 0 ? std::min(1.0, left / d) : 1.0;
      used[v] += d * f2[key];
    }
    std::map<std::pair<int, int>, RoutedStream> streams;
    for (const Route& r : routes) {
      if (r.arcs.empty()) {
        rj.flows.push_back(RoutedFlow{r.worker, r.ps, r.ps, 1.0, {}});
        continue;
      }
      double rest = 1.0;
      if (r.tor >= 0 && f1[r.tor] > 1e-12) {
        rj.flows.push_back(RoutedFlow{r.worker, r.ps, r.tor, f1[r.tor], {r.arcs[0]}});
        if (chained.count({r.tor, r.ps})) {
          streams.emplace(
              std::make_pair(r.tor, r.ps),
              RoutedStream{r.tor, r.ps,
                           std::vector<int>(r.arcs.begin() + 1, r.arcs.begin() + r.l2_pos), r.l2});
          streams.emplace(
              std::make_pair(r.l2, r.ps),
              RoutedStream{r.l2, r.ps, std::vector<int>(r.arcs.begin() + r.l2_pos, r.arcs.end())});
        } else {
          streams.emplace(
              std::make_pair(r.tor, r.ps),
              RoutedStream{r.tor, r.ps, std::vector<int>(r.arcs.begin() + 1, r.arcs.end())});
        }
        rest -= f1[r.tor];
      }
      if (r.l2 >= 0 && rest > 1e-12 && f2[{r.l2, r.ps}] > 1e-12) {
        const double frac = rest * f2[{r.l2, r.ps}];
        rj.flows.push_back(RoutedFlow{r.worker, r.ps, r.l2, frac,
                                      std::vector<int>(r.arcs.begin(), r.arcs.begin() + r.l2_pos)});
        streams.emplace(
            std::make_pair(r.l2, r.ps),
            RoutedStream{r.l2, r.ps, std::vector<int>(r.arcs.begin() + r.l2_pos, r.arcs.end())});
        rest -= frac;
      }
      if (rest > 1e-12) rj.flows.push_back(RoutedFlow{r.worker, r.ps, r.ps, rest, r.arcs});
    }
    for (auto& [key, st] : streams) rj.streams.push_back(std::move(st));
    return rj;
  };
  auto feasible = [&](double lambda) {
    RoutedJob rj = build(lambda);
    return SingleJobRate(ComputeUsage(net, rj), residual) >= lambda * (1 - 1e-13);
  };
  double hi = 0;
  for (const Route& r : routes) {
    if (!r.arcs.empty()) hi = std::max(hi, residual[net.ArcResource(r.arcs[0])]);
  }
  if (hi <= 0) return build(0);
  double lo = 0;
  if (feasible(hi)) {
    lo = hi;
  } else {
    for (int it = 0; it < 60; ++it) {
      double mid = 0.5 * (lo + hi);
      if (feasible(mid)) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
  }
  return build(lo);
}

RoutedJob RouteSwitchMl(const Network& net, PathCache& paths, const std::vector<double>& residual,
                        int job) {
  const core::Graph& g = net.graph();
  RoutedJob rj;
  rj.job = job;
  rj.batch_size = net.input().jobs[job].spec.batch_size;
  rj.shares = EqualShares(PsNodes(net, job));
  std::vector<double> unit(net.num_resources(), 0.0);
  std::map<std::pair<int, int>, std::vector<int>> streams;  // (switch, PS) -> arcs
  auto utilisation = [&](int r, double add) {
    const double load = unit[r] + add;
    return residual[r] > 0 ? load / residual[r] : (load > 0 ? kUnbounded : 0);
  };
  // Index of the first arc after the first INA switch on `arcs` (-1: none before the end).
  auto cut_of = [&](const std::vector<int>& arcs) {
    for (size_t i = 0; i + 1 < arcs.size(); ++i) {
      if (g.ina_capable(g.arc(arcs[i]).to)) return static_cast<int>(i) + 1;
    }
    return -1;
  };
  // What placing a flow of `x` on `arcs` adds, per resource: the arcs to its aggregation switch
  // and the switch, plus, for a switch without a stream toward `ps` yet, the stream's arcs and the
  // PS (so joining an existing aggregation is seen as the cheaper choice it is).
  auto additions = [&](const std::vector<int>& arcs, int ps, double x) {
    std::vector<std::pair<int, double>> add;
    const int cut = cut_of(arcs);
    const int end = cut < 0 ? static_cast<int>(arcs.size()) : cut;
    for (int i = 0; i < end; ++i) add.emplace_back(net.ArcResource(arcs[i]), x);
    if (cut < 0) {
      add.emplace_back(net.NodeResource(ps), x);
      return add;
    }
    const int sw = g.arc(arcs[cut - 1]).to;
    add.emplace_back(net.NodeResource(sw), x);
    if (!streams.count({sw, ps})) {
      for (size_t i = cut; i < arcs.size(); ++i) add.emplace_back(net.ArcResource(arcs[i]), x);
      add.emplace_back(net.NodeResource(ps), x);
    }
    return add;
  };
  for (int w : WorkerNodes(net, job)) {
    for (const auto& [s, x] : rj.shares) {
      if (w == s) {
        rj.flows.push_back(RoutedFlow{w, s, s, 1.0, {}});
        continue;
      }
      const std::vector<Path>& cands = paths.GetSpread(w, s);
      int best = -1;
      std::vector<double> best_u;
      for (size_t i = 0; i < cands.size(); ++i) {
        std::vector<double> u;
        for (const auto& [r, a] : additions(cands[i].arcs, s, x)) u.push_back(utilisation(r, a));
        std::sort(u.begin(), u.end(), std::greater<>());
        if (best >= 0) {
          const int c = CompareUtilisation(u, best_u);
          if (c > 0 || (c == 0 && cands[i].hops() >= cands[best].hops())) continue;
        }
        best = static_cast<int>(i);
        best_u = std::move(u);
      }
      if (best < 0) continue;  // unreachable: validation rules this out
      const std::vector<int>& arcs = cands[best].arcs;
      for (const auto& [r, a] : additions(arcs, s, x)) unit[r] += a;
      const int cut = cut_of(arcs);
      if (cut < 0) {
        rj.flows.push_back(RoutedFlow{w, s, s, 1.0, arcs});
        continue;
      }
      const int sw = g.arc(arcs[cut - 1]).to;
      rj.flows.push_back(
          RoutedFlow{w, s, sw, 1.0, std::vector<int>(arcs.begin(), arcs.begin() + cut)});
      streams.emplace(std::make_pair(sw, s), std::vector<int>(arcs.begin() + cut, arcs.end()));
    }
  }
  // Each switch's stream on its balanced path to the PS (two passes against all other loads).
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& [key, arcs] : streams) {
      const double x = ShareOf(rj, key.second);
      AddLoad(arcs, -x, unit);
      const std::vector<Path>& cands = paths.GetSpread(key.first, key.second);
      const int c = BalancedPath(net, cands, unit, residual, x);
      if (c >= 0) arcs = cands[c].arcs;
      AddLoad(arcs, x, unit);
    }
  }
  for (auto& [key, arcs] : streams) rj.streams.push_back(RoutedStream{key.first, key.second, arcs});
  return rj;
}

std::vector<RoutedJob> RouteAllAtp(const Network& net, PathCache& paths) {
  FlowEvaluator evaluator(net);
  std::vector<RoutedJob> result(net.input().jobs.size());
  std::vector<RoutedJob> planned;
  for (int j : PriorityOrder(net.input())) {
    result[j] = RouteAtp(net, paths, evaluator.ResidualAfter(planned), j,
                         AtpOptions{.two_level = false, .sharded = false});
    planned.push_back(result[j]);
  }
  return result;
}

absl::StatusOr<RoutingResult> NoInaRouting::Route(const Network& network) const {
  return RouteSequentially(network, RouteNoIna, "shortest_paths");
}

absl::StatusOr<RoutingResult> AtpRouting::Route(const Network& network) const {
  const AtpOptions options{.two_level = true, .sharded = sharded_};
  return RouteSequentially(
      network,
      [options](const Network& net, PathCache& paths, const std::vector<double>& residual,
                int job) { return RouteAtp(net, paths, residual, job, options); },
      sharded_ ? "atp_sharded" : "atp");
}

absl::StatusOr<RoutingResult> SwitchMlRouting::Route(const Network& network) const {
  return RouteSequentially(network, RouteSwitchMl, "switchml");
}

}  // namespace inac::scheduler
