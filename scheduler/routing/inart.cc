#include "scheduler/routing/inart.h"

#include <algorithm>
#include <map>
#include <set>

#include "scheduler/routing/lp_routing.h"

namespace inac::scheduler {
namespace {

struct PsProfile {
  double headroom = 0;  // B_s
  double d_agg = 0;
  double d_direct = 0;
  bool has_ina = false;
};

// λ and shares of one mode assignment (see the header).
double Evaluate(const std::vector<PsProfile>& ps, const std::vector<bool>& agg, double k,
                std::vector<double>* shares) {
  double agg_sum = 0, direct_sum = 0;
  for (size_t s = 0; s < ps.size(); ++s) {
    if (agg[s] && ps[s].has_ina) {
      agg_sum += ps[s].d_agg > 0 ? ps[s].headroom / ps[s].d_agg : 0;
    } else {
      direct_sum += ps[s].d_direct > 0 ? ps[s].headroom / ps[s].d_direct : 0;
    }
  }
  double agg_part = std::min(agg_sum, k);
  double lambda = agg_part + direct_sum;
  if (shares != nullptr) {
    shares->assign(ps.size(), 0.0);
    if (lambda > 0) {
      double theta = agg_sum > 0 ? agg_part / agg_sum : 0;
      for (size_t s = 0; s < ps.size(); ++s) {
        if (agg[s] && ps[s].has_ina) {
          (*shares)[s] = ps[s].d_agg > 0 ? ps[s].headroom / ps[s].d_agg * theta / lambda : 0;
        } else {
          (*shares)[s] = ps[s].d_direct > 0 ? ps[s].headroom / ps[s].d_direct / lambda : 0;
        }
      }
    }
  }
  return lambda;
}

}  // namespace

ShareSplit InArtShares(const Network& net, PathCache& paths, const std::vector<double>& residual,
                       int job) {
  const core::Graph& g = net.graph();
  std::vector<int> ps_nodes = PsNodes(net, job);
  std::vector<int> workers = WorkerNodes(net, job);
  const int p = static_cast<int>(ps_nodes.size());
  std::vector<PsProfile> ps(p);
  std::map<int, int> fan_in;  // switch -> largest number of workers it aggregates for one PS
  for (int si = 0; si < p; ++si) {
    int s = ps_nodes[si];
    ps[si].headroom = residual[net.NodeResource(s)];
    std::map<int, int> count;
    int direct = 0;
    for (int w : workers) {
      if (w == s) continue;
      ++ps[si].d_direct;
      const std::vector<Path>& route = paths.Get(w, s);
      int agg = -1;
      if (!route.empty()) {
        for (size_t i = 1; i + 1 < route[0].nodes.size() && agg < 0; ++i) {
          if (g.ina_capable(route[0].nodes[i])) agg = route[0].nodes[i];
        }
      }
      if (agg >= 0) {
        ++count[agg];
      } else {
        ++direct;
      }
    }
    ps[si].has_ina = !count.empty();
    ps[si].d_agg = static_cast<double>(count.size() + direct);
    for (const auto& [v, n] : count) fan_in[v] = std::max(fan_in[v], n);
  }
  double k = kUnbounded;
  for (const auto& [v, n] : fan_in) k = std::min(k, residual[net.NodeResource(v)] / n);

  ShareSplit out;
  std::vector<bool> best(p, true);
  double best_lambda = -1;
  if (p <= 12) {
    for (int mask = (1 << p) - 1; mask >= 0; --mask) {
      std::vector<bool> agg(p);
      for (int s = 0; s < p; ++s) agg[s] = (mask >> (p - 1 - s)) & 1;
      double lambda = Evaluate(ps, agg, k, nullptr);
      if (lambda > best_lambda * (1 + 1e-12) + 1e-15) {
        best_lambda = lambda;
        best = agg;
      }
    }
  } else {
    best_lambda = Evaluate(ps, best, k, nullptr);
    for (bool improved = true; improved;) {
      improved = false;
      for (int s = 0; s < p; ++s) {
        std::vector<bool> trial = best;
        trial[s] = !trial[s];
        double lambda = Evaluate(ps, trial, k, nullptr);
        if (lambda > best_lambda * (1 + 1e-12)) {
          best_lambda = lambda;
          best = trial;
          improved = true;
        }
      }
    }
  }
  out.lambda_estimate = Evaluate(ps, best, k, &out.shares);
  out.aggregated = best;
  double total = 0;
  for (double x : out.shares) total += x;
  if (total <= 0) {
    out.shares.assign(p, 1.0 / p);
  } else {
    for (double& x : out.shares) x /= total;
  }
  return out;
}

absl::StatusOr<RoutingResult> InArtRouting::Route(const Network& network) const {
  LpRoutingConfig config;
  config.shares = [](const Network& net, PathCache& paths, const std::vector<double>& residual,
                     int job) -> std::optional<std::vector<double>> {
    return InArtShares(net, paths, residual, job).shares;
  };
  return RouteWithLp(network, config);
}

}  // namespace inac::scheduler
