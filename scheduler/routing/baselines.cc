#include "scheduler/routing/baselines.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace inac::scheduler {
namespace {

// Max over `arcs` of (unit load + add) / residual: the inverse of the rate the path allows.
double PathCost(const Network& net, const std::vector<int>& arcs, const std::vector<double>& unit,
                const std::vector<double>& residual, double add) {
  double worst = 0;
  for (int a : arcs) {
    int r = net.ArcResource(a);
    double load = unit[r] + add;
    double cost = residual[r] > 0 ? load / residual[r] : (load > 0 ? kUnbounded : 0);
    worst = std::max(worst, cost);
  }
  return worst;
}

// Index of the least-loaded path (ties: the earlier, i.e. shorter, path). -1 if none.
int LeastLoaded(const Network& net, const std::vector<Path>& paths, const std::vector<double>& unit,
                const std::vector<double>& residual, double add) {
  int best = -1;
  double best_cost = kUnbounded;
  for (size_t i = 0; i < paths.size(); ++i) {
    double c = PathCost(net, paths[i].arcs, unit, residual, add);
    if (best < 0 || c < best_cost * (1 - 1e-12)) {
      best = static_cast<int>(i);
      best_cost = c;
    }
  }
  return best;
}

void AddLoad(const std::vector<int>& arcs, double x, std::vector<double>& unit) {
  for (int a : arcs) unit[a] += x;
}

std::vector<std::pair<int, double>> EqualShares(const std::vector<int>& ps) {
  std::vector<std::pair<int, double>> shares;
  for (int s : ps) shares.emplace_back(s, 1.0 / static_cast<double>(ps.size()));
  return shares;
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
        const std::vector<Path>& ps = paths.Get(w, s);
        c = LeastLoaded(net, ps, unit, residual, x);
        if (c >= 0) {
          f.arcs = ps[c].arcs;
          AddLoad(f.arcs, x, unit);
        }
      }
      choice.push_back(c);
      rj.flows.push_back(std::move(f));
    }
  }
  // Two passes of re-routing each flow against everybody else's load.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < rj.flows.size(); ++i) {
      RoutedFlow& f = rj.flows[i];
      if (choice[i] < 0) continue;
      double x = 0;
      for (const auto& [s, share] : rj.shares) {
        if (s == f.ps) x = share;
      }
      AddLoad(f.arcs, -x, unit);
      const std::vector<Path>& ps = paths.Get(f.worker, f.ps);
      int c = LeastLoaded(net, ps, unit, residual, x);
      choice[i] = c;
      f.arcs = ps[c].arcs;
      AddLoad(f.arcs, x, unit);
    }
  }
  return rj;
}

RoutedJob RouteAtp(const Network& net, PathCache& paths, const std::vector<double>& residual,
                   int job) {
  const core::Graph& g = net.graph();
  RoutedJob base;
  base.job = job;
  base.batch_size = net.input().jobs[job].spec.batch_size;
  std::vector<int> ps_nodes = PsNodes(net, job);
  int ps = ps_nodes[0];
  for (int s : ps_nodes) {
    if (residual[net.NodeResource(s)] > residual[net.NodeResource(ps)]) ps = s;
  }
  base.shares = {{ps, 1.0}};
  std::vector<int> workers = WorkerNodes(net, job);

  // Routes: one path per first-hop switch (the ToR), least-loaded among its k shortest to the PS.
  struct Route {
    int worker;
    std::vector<int> arcs;  // worker -> PS
    int tor = -1;           // level-1 aggregation switch (INA ToR) or -1
    int l2 = -1;            // level-2 (switch before the PS) or -1
    int l2_pos = -1;        // number of arcs from the worker to l2
  };
  std::vector<Route> routes;
  std::map<int, std::vector<int>> tor_path;  // first switch -> arcs to PS
  std::vector<double> unit(net.num_resources(), 0.0);
  for (int w : workers) {
    Route r;
    r.worker = w;
    if (w == ps) {
      routes.push_back(r);
      continue;
    }
    const std::vector<Path>& wp = paths.Get(w, ps);
    if (wp.empty()) continue;  // unreachable: validation rules this out
    int first_switch = wp[0].nodes.size() > 2 ? wp[0].nodes[1] : -1;
    if (first_switch >= 0 && g.out_arcs(w).size() == 1) {
      auto it = tor_path.find(first_switch);
      if (it == tor_path.end()) {
        const std::vector<Path>& tp = paths.Get(first_switch, ps);
        int c = LeastLoaded(net, tp, unit, residual, 1.0);
        it = tor_path.emplace(first_switch, tp[c].arcs).first;
        AddLoad(it->second, 1.0, unit);
      }
      r.arcs = {wp[0].arcs[0]};
      r.arcs.insert(r.arcs.end(), it->second.begin(), it->second.end());
    } else {
      int c = LeastLoaded(net, wp, unit, residual, 1.0);
      r.arcs = wp[c].arcs;
    }
    int first = g.arc(r.arcs[0]).to;
    if (g.ina_capable(first)) r.tor = first;
    int last_switch = g.arc(r.arcs.back()).from;
    if (g.ina_capable(last_switch) && last_switch != r.tor) {
      r.l2 = last_switch;
      r.l2_pos = static_cast<int>(r.arcs.size()) - 1;
    }
    routes.push_back(std::move(r));
  }

  auto build = [&](double lambda) {
    RoutedJob rj = base;
    std::map<int, double> level1;  // switch -> workers aggregating there
    for (const Route& r : routes) {
      if (r.tor >= 0) level1[r.tor] += 1;
    }
    std::map<int, double> f1, used;
    for (const auto& [v, n] : level1) {
      double cap = residual[net.NodeResource(v)];
      double demand = n * lambda;
      f1[v] = demand > 0 ? std::min(1.0, cap / demand) : 1.0;
      used[v] = demand * f1[v];
    }
    std::map<int, double> spill_demand, f2;
    for (const Route& r : routes) {
      if (r.l2 < 0 || r.arcs.empty()) continue;
      double rest = r.tor >= 0 ? 1 - f1[r.tor] : 1.0;
      spill_demand[r.l2] += rest * lambda;
    }
    for (const auto& [v, d] : spill_demand) {
      double left = std::max(0.0, residual[net.NodeResource(v)] - used[v]);
      f2[v] = d > 0 ? std::min(1.0, left / d) : 1.0;
    }
    std::map<int, std::vector<int>> streams;
    for (const Route& r : routes) {
      if (r.arcs.empty()) {
        rj.flows.push_back(RoutedFlow{r.worker, ps, ps, 1.0, {}});
        continue;
      }
      double rest = 1.0;
      if (r.tor >= 0 && f1[r.tor] > 1e-12) {
        rj.flows.push_back(RoutedFlow{r.worker, ps, r.tor, f1[r.tor], {r.arcs[0]}});
        streams.emplace(r.tor, std::vector<int>(r.arcs.begin() + 1, r.arcs.end()));
        rest -= f1[r.tor];
      }
      if (r.l2 >= 0 && rest > 1e-12 && f2[r.l2] > 1e-12) {
        double frac = rest * f2[r.l2];
        rj.flows.push_back(RoutedFlow{r.worker, ps, r.l2, frac,
                                      std::vector<int>(r.arcs.begin(), r.arcs.begin() + r.l2_pos)});
        streams.emplace(r.l2, std::vector<int>(r.arcs.begin() + r.l2_pos, r.arcs.end()));
        rest -= frac;
      }
      if (rest > 1e-12) rj.flows.push_back(RoutedFlow{r.worker, ps, ps, rest, r.arcs});
    }
    for (auto& [sw, arcs] : streams) rj.streams.push_back(RoutedStream{sw, ps, arcs});
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
  RoutedJob routes = RouteNoIna(net, paths, residual, job);  // least-loaded shortest paths
  RoutedJob rj;
  rj.job = job;
  rj.batch_size = routes.batch_size;
  rj.shares = routes.shares;
  std::map<std::pair<int, int>, std::vector<int>> streams;
  for (const RoutedFlow& f : routes.flows) {
    int cut = -1;
    for (size_t i = 0; i + 1 < f.arcs.size(); ++i) {
      if (g.ina_capable(g.arc(f.arcs[i]).to)) {
        cut = static_cast<int>(i) + 1;
        break;
      }
    }
    if (cut < 0) {
      rj.flows.push_back(f);
      continue;
    }
    int sw = g.arc(f.arcs[cut - 1]).to;
    rj.flows.push_back(RoutedFlow{f.worker, f.ps, sw, 1.0,
                                  std::vector<int>(f.arcs.begin(), f.arcs.begin() + cut)});
    streams.emplace(std::make_pair(sw, f.ps), std::vector<int>(f.arcs.begin() + cut, f.arcs.end()));
  }
  for (auto& [key, arcs] : streams) rj.streams.push_back(RoutedStream{key.first, key.second, arcs});
  return rj;
}

std::vector<RoutedJob> RouteAllAtp(const Network& net, PathCache& paths) {
  FlowEvaluator evaluator(net);
  std::vector<RoutedJob> result(net.input().jobs.size());
  std::vector<RoutedJob> planned;
  for (int j : PriorityOrder(net.input())) {
    result[j] = RouteAtp(net, paths, evaluator.ResidualAfter(planned), j);
    planned.push_back(result[j]);
  }
  return result;
}

absl::StatusOr<RoutingResult> NoInaRouting::Route(const Network& network) const {
  return RouteSequentially(network, RouteNoIna, "shortest_paths");
}

absl::StatusOr<RoutingResult> AtpRouting::Route(const Network& network) const {
  return RouteSequentially(network, RouteAtp, "atp");
}

absl::StatusOr<RoutingResult> SwitchMlRouting::Route(const Network& network) const {
  return RouteSequentially(network, RouteSwitchMl, "switchml");
}

}  // namespace inac::scheduler
