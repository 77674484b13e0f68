#include "scheduler/routing/grid_split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/plan.h"
#include "scheduler/routing/baselines.h"
#include "scheduler/routing/grid.h"
#include "scheduler/routing/lp_routing.h"
#include "scheduler/routing/routing_lp.h"
#include "scheduler/routing/split_plan.h"

namespace inac::scheduler {
namespace {

constexpr int kSplitSwitches = 32;           // cross-pod candidates per job
constexpr int kDetourHops = 4;               // their detour budget
constexpr int kSplitPaths = 4;               // diverse paths per cross-pod option (at most --paths)
constexpr int64_t kMaxSplitColumns = 40000;  // LP budget: fewer cross-pod switches beyond it
// Range counts the realisation tries: the cap, halved down to this (item 2 of the header).
constexpr int kFewestRanges = 8;
// A realisation with more ranges replaces one with fewer only when its rate is higher by more
// than this fraction: every range is a tag, with its entries on every switch it crosses.
constexpr double kMoreRangesGain = 0.01;

std::vector<double> RatesOf(const Evaluation& ev) {
  std::vector<double> r;
  for (const JobEvaluation& j : ev.jobs) r.push_back(j.rate_gbps);
  return r;
}

// Hops between two nodes (a single-homed host counts from its switch, plus one).
int Hops(PathCache& paths, const core::Graph& g, int from, int to) {
  int extra = 0;
  if (g.is_host(from) && g.out_arcs(from).size() == 1) {
    from = g.arc(g.out_arcs(from)[0]).to;
    extra = 1;
  }
  if (from == to) return extra;
  int d = paths.HopsFrom(from)[to];
  return d < 0 ? -1 : d + extra;
}

// Up to k minimum-hop paths (then Yen's) chosen greedily for arc diversity: each next path is the
// one with the most arcs no chosen path uses yet (ties: earlier).
std::vector<Path> DiversePaths(PathCache& paths, int from, int to, int k) {
  const std::vector<Path>& all = paths.GetSpread(from, to);
  std::vector<Path> out;
  std::set<int> used;
  std::vector<char> taken(all.size(), 0);
  while (static_cast<int>(out.size()) < k) {
    int best = -1;
    int best_new = -1;
    for (size_t i = 0; i < all.size(); ++i) {
      if (taken[i]) continue;
      int fresh = 0;
      for (int a : all[i].arcs) fresh += used.count(a) ? 0 : 1;
      if (fresh > best_new) {
        best_new = fresh;
        best = static_cast<int>(i);
      }
    }
    if (best < 0) break;
    taken[best] = 1;
    for (int a : all[best].arcs) used.insert(a);
    out.push_back(all[best]);
  }
  return out;
}

void AddPathIfNew(std::vector<Path>* list, const Path& p) {
  for (const Path& q : *list) {
    if (q.arcs == p.arcs) return;
  }
  list->push_back(p);
}

// See the header, item 1.
int64_t Columns(const JobCandidates& c) {
  int64_t n = 1 + static_cast<int64_t>(c.ps.size());
  for (const PairCandidates& p : c.pairs) {
    for (const AggregationOption& o : p.options) n += static_cast<int64_t>(o.paths.size());
  }
  for (const auto& [key, list] : c.streams) n += static_cast<int64_t>(list.size());
  return n;
}

void AddSplitCandidates(const Network& net, PathCache& paths, const std::vector<double>& residual,
                        JobCandidates* c) {
  const core::Graph& g = net.graph();
  const int k = std::clamp(paths.k(), 1, kSplitPaths);
  // Cross-pod switches per pair within the LP budget.
  const int64_t room = kMaxSplitColumns - Columns(*c);
  const int64_t per_pair =
      c->pairs.empty() ? 0 : room / (static_cast<int64_t>(c->pairs.size()) * k);
  const int switches = static_cast<int>(std::clamp<int64_t>(per_pair, 0, kSplitSwitches));
  std::vector<std::pair<double, int>> spare;
  for (int v = 0; v < g.num_switches(); ++v) {
    if (!g.ina_capable(v)) continue;
    double proc = residual[net.NodeResource(v)];
    double in = 0;
    for (int a : g.out_arcs(v)) in += std::max(0.0, residual[net.ArcResource(Network::Reverse(a))]);
    double s = std::min(proc, in);
    if (s > 0) spare.emplace_back(-s, v);
  }
  std::sort(spare.begin(), spare.end());
  for (PairCandidates& pc : c->pairs) {
    const int w = pc.worker;
    const int s = c->ps[pc.ps_index];
    const int direct = Hops(paths, g, w, s);
    if (direct < 0) continue;
    int added = 0;
    for (const auto& [neg, a] : spare) {
      if (added >= switches) break;
      const int d1 = Hops(paths, g, w, a);
      const int d2 = Hops(paths, g, s, a);
      if (d1 < 0 || d2 < 0 || d1 + d2 > direct + kDetourHops) continue;
      ++added;
      std::vector<Path> to_a = DiversePaths(paths, w, a, k);
      if (to_a.empty()) continue;
      auto key = std::make_pair(a, s);
      if (!c->streams.count(key)) {
        std::vector<Path> to_s = DiversePaths(paths, a, s, k);
        if (to_s.empty()) continue;
        c->streams[key] = std::move(to_s);
      }
      AggregationOption* opt = nullptr;
      for (AggregationOption& o : pc.options) {
        if (o.agg == a) opt = &o;
      }
      if (opt == nullptr) {
        pc.options.push_back(AggregationOption{a, {}});
        opt = &pc.options.back();
      }
      for (const Path& p : to_a) AddPathIfNew(&opt->paths, p);
    }
  }
}

// The largest number of workers one switch aggregates for one PS (an upper bound on its inputs
// per tag).
int LargestFanIn(const RoutedJob& job) {
  std::map<std::pair<int, int>, std::set<int>> inputs;
  for (const RoutedFlow& f : job.flows) {
    if (f.agg != f.ps) inputs[{f.agg, f.ps}].insert(f.worker);
  }
  size_t most = 0;
  for (const auto& [key, workers] : inputs) most = std::max(most, workers.size());
  return static_cast<int>(most);
}

int MoveBudget(const JobCandidates& c) { return 200 + 20 * static_cast<int>(c.pairs.size()); }

struct SplitJob {
  RoutedJob job;
  std::optional<double> bound;
  std::string bound_source;
  std::string status;
  std::string source;
  int columns = 0;
  int rows = 0;
};

// One job on `residual`: richer candidates, the LP, its realisation and the local search.
// `extra` routes join the candidates. SplitJob::bound is the same candidates' LP alone on the
// network (solved again when `residual` is not the network's own).
absl::StatusOr<SplitJob> SplitOne(const Network& net, PathCache& cache,
                                  const std::vector<double>& residual, int job,
                                  const std::vector<const RoutedJob*>& extra, bool alone) {
  const PlanningOptions& opt = net.input().options;
  std::vector<int> ps = PsNodes(net, job);
  JobCandidates c = BuildCandidates(
      net, cache, job, ps, std::vector<double>(ps.size(), 1.0 / ps.size()), opt.extra_candidates);
  for (const RoutedJob* routes : extra) AddPlanToCandidates(net, *routes, &c);
  AddSplitCandidates(net, cache, residual, &c);
  std::vector<JobCandidates> one{c};
  RoutingLp lp = BuildRoutingLp(net, residual, one, /*free_shares=*/true, kMaxFanIn);
  auto outcome = SolveRoutingLp(lp, one, true, opt.lp_time_limit_s, {}, lp::Simplex::kPrimal);
  if (!outcome.ok()) return outcome.status();
  SplitJob out;
  out.bound = outcome->bound;
  out.bound_source = outcome->bound_source;
  out.status = lp::SolveStatusName(outcome->solution.status);
  out.columns = lp.program.num_columns();
  out.rows = lp.program.num_rows();
  if (!alone) {
    RoutingLp lp_alone = BuildRoutingLp(net, net.residuals(), one, true, kMaxFanIn);
    // Cold: a dual simplex warm-started from the basis just found took 1.5-2x longer in all
    // (planning_bench --algorithm=grid-split multi_job).
    auto bound = SolveRoutingLp(lp_alone, one, true, opt.lp_time_limit_s, {}, lp::Simplex::kPrimal);
    if (!bound.ok()) return bound.status();
    out.bound = bound->bound;
    out.bound_source = bound->bound_source;
  }
  if (outcome->solution.values.empty() || outcome->lambda[0] <= 0) return out;
  one[0].shares = outcome->shares[0];
  // Range counts, fewest first: the cap (the data plane's MaxRangesPerShard(P), or
  // PlanningOptions::split_max_ranges when lower), halved down to kFewestRanges. No count is
  // best everywhere: on GRID's settings 8 ranges win at 100 workers on (a), 64 at 40 workers
  // (docs/routing.md).
  int cap = core::MaxRangesPerShard(static_cast<int>(ps.size()));
  if (opt.split_max_ranges > 0) cap = std::min(cap, opt.split_max_ranges);
  std::vector<int> counts = {cap};
  while (counts.front() / 2 >= kFewestRanges) counts.insert(counts.begin(), counts.front() / 2);
  // Both layouts at each count, each balanced and searched; the best evaluated plan is kept, a
  // plan with more ranges only when it is faster by more than kMoreRangesGain.
  double best_rate = -1;
  int best_ranges = 0;
  for (int ranges : counts) {
    for (bool strip : {true, false}) {
      SplitPlan plan(net, residual, one[0]);
      plan.Realise(lp.jobs[0], outcome->solution.values, outcome->lambda[0], strip, ranges);
      plan.BalancePaths();
      std::string source = "split";
      if (opt.local_search && plan.LocalSearch(MoveBudget(one[0])) > 0) {
        source = "split+local_search";
      }
      RoutedJob rj = plan.ToRoutedJob();
      const double rate = SingleJobRate(ComputeUsage(net, rj), residual);
      const double gain = ranges > best_ranges ? kMoreRangesGain : 1e-9;
      if (best_rate < 0 || rate > best_rate * (1 + gain)) {
        best_rate = rate;
        best_ranges = ranges;
        out.job = std::move(rj);
        out.source = source;
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<RoutingResult> GridSplitRouting::Route(const Network& net) const {
  auto grid = GridRouting().Route(net);
  if (!grid.ok()) return grid.status();
  const PlanningInput& input = net.input();
  const int n = static_cast<int>(input.jobs.size());
  if (n == 0) return grid;
  PathCache cache(net.graph(), input.options.paths);
  FlowEvaluator evaluator(net);
  const std::vector<RoutedJob> atp = RouteAllAtp(net, cache);
  RoutingResult split = *grid;
  std::vector<RoutedJob> planned;
  for (int j : PriorityOrder(input)) {
    const std::vector<const RoutedJob*> extra = {&grid->jobs[j], &atp[j]};
    std::vector<double> residual = evaluator.ResidualAfter(planned);
    auto one = SplitOne(net, cache, residual, j, extra, /*alone=*/planned.empty());
    if (!one.ok()) return grid;  // the split LP failed: grid's plan stands
    JobDiagnostics& d = split.diagnostics[j];
    if (!one->source.empty()) {
      split.jobs[j] = one->job;
      d.source = one->source;
      d.lp_status = one->status;
      d.lp_columns = one->columns;
      d.lp_rows = one->rows;
      d.joint = false;
    }
    // The bound: the job's richer LP alone on the network.
    split.lp_bound_gbps[j] = one->bound;
    d.lp_bound_source = one->bound_source;
    planned.push_back(split.jobs[j]);
  }
  std::vector<double> grid_rates = RatesOf(evaluator.Evaluate(grid->jobs));
  std::vector<double> split_rates = RatesOf(evaluator.Evaluate(split.jobs));
  bool grid_deploys = true;  // no switch above the data plane's fan-in
  for (const RoutedJob& j : grid->jobs) grid_deploys &= LargestFanIn(j) <= kMaxFanIn;
  bool split_complete = true;
  for (int j = 0; j < n; ++j) split_complete &= split.diagnostics[j].source.rfind("split", 0) == 0;
  if ((grid_deploys || !split_complete) && !BetterRates(split_rates, grid_rates)) {
    // Grid's plan stays, with the richer LP's bound (grid's routes are among its candidates).
    RoutingResult kept = *grid;
    // (A grid plan above the fan-in is outside the fan-in-cut LP: it keeps grid's bound.)
    for (int j = 0; j < n && grid_deploys; ++j) {
      kept.lp_bound_gbps[j] = split.lp_bound_gbps[j];
      kept.diagnostics[j].lp_bound_source = split.diagnostics[j].lp_bound_source;
    }
    return kept;
  }
  return split;
}

}  // namespace inac::scheduler
