#include "scheduler/routing/optimal.h"

#include <algorithm>
#include <map>

#include "scheduler/lp/linear_program.h"
#include "scheduler/routing/baselines.h"
#include "scheduler/routing/grid.h"
#include "scheduler/routing/inart.h"
#include "scheduler/routing/lp_routing.h"
#include "scheduler/routing/routing_lp.h"

namespace inac::scheduler {
namespace {

// The choice of `plan` in `c` (every flow unsplit and among the candidates), or false.
bool ChoiceOf(const JobCandidates& c, const RoutedJob& plan, Choice* choice) {
  choice->pair.assign(c.pairs.size(), {-1, -1});
  for (const RoutedFlow& f : plan.flows) {
    if (f.arcs.empty()) continue;
    if (f.fraction < 1 - 1e-12) return false;
    for (size_t i = 0; i < c.pairs.size(); ++i) {
      const PairCandidates& pc = c.pairs[i];
      if (pc.worker != f.worker || c.ps[pc.ps_index] != f.ps) continue;
      for (size_t o = 0; o < pc.options.size(); ++o) {
        if (pc.options[o].agg != f.agg) continue;
        for (size_t p = 0; p < pc.options[o].paths.size(); ++p) {
          if (pc.options[o].paths[p].arcs == f.arcs) {
            choice->pair[i] = {static_cast<int>(o), static_cast<int>(p)};
          }
        }
      }
    }
  }
  for (const auto& [o, p] : choice->pair) {
    if (o < 0) return false;
  }
  for (const RoutedStream& st : plan.streams) {
    const std::vector<Path>& paths = c.streams.at({st.sw, st.ps});
    for (size_t q = 0; q < paths.size(); ++q) {
      if (paths[q].arcs == st.arcs) choice->stream[{st.sw, st.ps}] = static_cast<int>(q);
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<RoutingResult> OptimalRouting::Route(const Network& net) const {
  absl::Status ok = CheckPsJobs(net);
  if (!ok.ok()) return ok;
  const PlanningInput& input = net.input();
  auto grid = GridRouting().Route(net);
  if (!grid.ok()) return grid.status();
  PathCache cache(net.graph(), input.options.paths);
  FlowEvaluator evaluator(net);
  const int n = static_cast<int>(input.jobs.size());
  RoutingResult result;
  result.jobs.resize(n);
  result.lp_bound_gbps.resize(n);
  result.diagnostics.resize(n);
  std::vector<RoutedJob> planned;
  for (int j : PriorityOrder(input)) {
    std::vector<double> residual = evaluator.ResidualAfter(planned);
    std::vector<int> ps = PsNodes(net, j);
    std::vector<double> shares =
        ps.size() == 1 ? std::vector<double>{1.0} : InArtShares(net, cache, residual, j).shares;
    JobCandidates c =
        BuildCandidates(net, cache, j, ps, shares, input.options.extra_candidates + 4);
    AddPlanToCandidates(net, grid->jobs[j], &c);
    {
      // The bound over this MIP's own candidates: the free-share LP alone on the network.
      std::vector<JobCandidates> one{c};
      RoutingLp bound_lp = BuildRoutingLp(net, net.residuals(), one, true);
      auto bound = SolveRoutingLp(bound_lp, one, true, input.options.lp_time_limit_s);
      if (!bound.ok()) return bound.status();
      result.lp_bound_gbps[j] = bound->bound;
      result.diagnostics[j].lp_bound_source = BoundSource(*bound);
    }

    lp::LinearProgram mip;
    mip.SetMaximize(false);
    int mu = mip.AddColumn(0, lp::kInfinity, 1);
    std::vector<std::vector<std::vector<int>>> x(c.pairs.size());
    std::map<std::pair<int, int>, std::vector<int>> z;
    std::vector<std::vector<std::pair<int, double>>> resource(net.num_resources());
    auto share_of = [&](int ps_node) {
      for (size_t si = 0; si < c.ps.size(); ++si) {
        if (c.ps[si] == ps_node) return c.shares[si];
      }
      return 0.0;
    };
    for (const auto& [key, paths] : c.streams) {
      double xs = share_of(key.second);
      std::vector<int> cols;
      for (const Path& p : paths) {
        int col = mip.AddColumn(0, 1, 0);
        mip.SetInteger(col);
        cols.push_back(col);
        for (int a : p.arcs) resource[net.ArcResource(a)].emplace_back(col, xs);
        resource[net.NodeResource(key.second)].emplace_back(col, xs);
      }
      mip.AddRow(-lp::kInfinity, 1, cols, std::vector<double>(cols.size(), 1.0));
      z[key] = cols;
    }
    for (size_t i = 0; i < c.pairs.size(); ++i) {
      const PairCandidates& pc = c.pairs[i];
      int s = c.ps[pc.ps_index];
      double xs = c.shares[pc.ps_index];
      std::vector<int> all;
      x[i].resize(pc.options.size());
      for (size_t o = 0; o < pc.options.size(); ++o) {
        const AggregationOption& opt = pc.options[o];
        std::vector<int> link;
        std::vector<double> coef;
        for (const Path& p : opt.paths) {
          int col = mip.AddColumn(0, 1, 0);
          mip.SetInteger(col);
          x[i][o].push_back(col);
          all.push_back(col);
          link.push_back(col);
          coef.push_back(1);
          for (int a : p.arcs) resource[net.ArcResource(a)].emplace_back(col, xs);
          resource[net.NodeResource(opt.agg)].emplace_back(col, xs);
        }
        if (opt.agg != s) {
          for (int col : z[{opt.agg, s}]) {
            link.push_back(col);
            coef.push_back(-1);
          }
          mip.AddRow(-lp::kInfinity, 0, link, coef);
        }
      }
      mip.AddRow(1, 1, all, std::vector<double>(all.size(), 1.0));
    }
    for (int r = 0; r < net.num_resources(); ++r) {
      if (resource[r].empty()) continue;
      std::vector<int> cols;
      std::vector<double> coef;
      for (const auto& [col, v] : resource[r]) {
        cols.push_back(col);
        coef.push_back(v);
      }
      cols.push_back(mu);
      coef.push_back(-residual[r]);
      mip.AddRow(-lp::kInfinity, 0, cols, coef);
    }

    // GRID's plan as the first incumbent when it fits the candidates.
    std::vector<double> start;
    Choice grid_choice;
    if (ChoiceOf(c, grid->jobs[j], &grid_choice)) {
      RoutedJob gj = ToRoutedJob(net, c, grid_choice);
      double rate = SingleJobRate(ComputeUsage(net, gj), residual);
      if (rate > 0 && rate < kUnbounded) {
        start.assign(mip.num_columns(), 0.0);
        start[mu] = 1.0 / rate;
        for (size_t i = 0; i < c.pairs.size(); ++i) {
          start[x[i][grid_choice.pair[i].first][grid_choice.pair[i].second]] = 1;
        }
        for (const RoutedStream& st : gj.streams) {
          int q = grid_choice.stream.count({st.sw, st.ps}) ? grid_choice.stream[{st.sw, st.ps}] : 0;
          start[z[{st.sw, st.ps}][q]] = 1;
        }
      }
    }
    auto solved =
        lp::SolveMip(mip, input.options.mip_time_limit_s, start, input.options.mip_node_limit);
    if (!solved.ok()) return solved.status();
    JobDiagnostics& d = result.diagnostics[j];
    d.job_id = input.jobs[j].id;
    d.lp_status = lp::SolveStatusName(solved->status);
    d.lp_columns = mip.num_columns();
    d.lp_rows = mip.num_rows();
    RoutedJob best = grid->jobs[j];
    d.source = "grid (no MIP solution)";
    if (!solved->values.empty()) {
      Choice ch;
      ch.pair.resize(c.pairs.size());
      for (size_t i = 0; i < c.pairs.size(); ++i) {
        ch.pair[i] = {0, 0};
        for (size_t o = 0; o < x[i].size(); ++o) {
          for (size_t p = 0; p < x[i][o].size(); ++p) {
            if (solved->values[x[i][o][p]] > 0.5)
              ch.pair[i] = {static_cast<int>(o), static_cast<int>(p)};
          }
        }
      }
      for (const auto& [key, cols] : z) {
        ch.stream[key] = 0;
        for (size_t q = 0; q < cols.size(); ++q) {
          if (solved->values[cols[q]] > 0.5) ch.stream[key] = static_cast<int>(q);
        }
      }
      RoutedJob mip_plan = ToRoutedJob(net, c, ch);
      double mip_rate = SingleJobRate(ComputeUsage(net, mip_plan), residual);
      double grid_rate = SingleJobRate(ComputeUsage(net, best), residual);
      if (mip_rate >= grid_rate * (1 - 1e-9)) {
        best = mip_plan;
        d.source = "mip";
      } else {
        d.source = "grid (better than the MIP incumbent)";
      }
    }
    result.jobs[j] = best;
    planned.push_back(best);
  }
  return result;
}

}  // namespace inac::scheduler
