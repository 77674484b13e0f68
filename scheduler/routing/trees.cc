// TreeRouting (scheduler/routing/trees.h) and the master-LP side of its TreePlanner
// (scheduler/routing/tree_planner.h): shards, rows, the column-generation loop, the kept trees
// and their realisation as a RoutingResult. The pricing is in tree_pricing.cc.
#include "scheduler/routing/trees.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/routing/tree_planner.h"

namespace inac::scheduler {
namespace trees_internal {

TreePlanner::TreePlanner(const Network& net, Family family)
    : net_(net), g_(net.graph()), family_(family) {
  in_arcs_.resize(g_.num_nodes());
  for (int u = 0; u < g_.num_nodes(); ++u) {
    for (int a : g_.out_arcs(u)) in_arcs_[g_.arc(a).to].push_back(a);
  }
  const PlanningInput& in = net.input();
  policy_ = ParseMemoryPolicy(in.options.memory_policy);
  if (policy_ && *policy_ == MemoryPolicy::kNoIna) policy_.reset();
}

absl::StatusOr<RoutingResult> TreePlanner::Run() {
  const PlanningInput& in = net_.input();
  const int n_jobs = static_cast<int>(in.jobs.size());
  BuildShards(n_jobs);
  ComputeParents();
  BuildRows(n_jobs);
  const std::vector<double> util = AddInitialTrees();
  ++price_round_;
  lp::Solution sol;
  int iterations = 0;
  const int max_iterations = MaxIterations();
  for (;; ++iterations) {
    auto solved = Solve(/*restrict_to=*/nullptr);
    if (!solved.ok()) return solved.status();
    sol = std::move(*solved);
    if (sol.status != lp::SolveStatus::kOptimal || sol.row_duals.empty()) break;
    if (iterations >= max_iterations) break;
    const int added = PricingRound(sol, util);
    ++price_round_;
    if (added == 0) break;
  }
  iterations_ = iterations;
  if (sol.status != lp::SolveStatus::kOptimal && sol.status != lp::SolveStatus::kFeasible) {
    return absl::InternalError(absl::StrCat("trees: master LP ", lp::SolveStatusName(sol.status)));
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

void TreePlanner::BuildShards(int n_jobs) {
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
}

std::vector<double> TreePlanner::AddInitialTrees() {
  std::vector<double> util(rows_resource_.size(), 0);
  for (size_t r = 0; r < rows_resource_.size(); ++r) {
    const double cap = RowCapacity(static_cast<int>(r));
    util[r] = cap > 1e-12 ? 1.0 / cap : 1e6;
  }
  for (size_t s = 0; s < shards_.size(); ++s) {
    for (Tree& t : Price(static_cast<int>(s), util, /*utilisation=*/util)) AddTree(std::move(t));
  }
  return util;
}

// PlanningOptions::tree_iterations, fewer when one round's estimated work (per shard: a
// shortest-path tree toward every candidate, and the greedy's scan of every candidate's workers)
// exceeds kWorkPerPlan / rounds. On GRID's k=8 settings a round costs ~2e5 units and nothing is
// cut; at k=32 with 1024 workers and 4 PSs a round costs ~2.7e8 (1.9 s of CPU) and the plan is
// the initial pricing's LP (docs/routing.md 3b).
int TreePlanner::MaxIterations() const {
  const PlanningInput& in = net_.input();
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
  return max_iterations;
}

int TreePlanner::PricingRound(const lp::Solution& sol, const std::vector<double>& util) {
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
  return added;
}

void TreePlanner::BuildRows(int n_jobs) {
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

double TreePlanner::RowCapacity(int r) const {
  const int res = rows_resource_[r];
  if (res >= 0) return std::max(0.0, net_.residual(res));
  const int v = -1 - res;
  // The aggregators of the switch, less one per tag that may round up (a margin for the
  // integer windows the memory planner grants).
  return std::max(0.0, 0.97 * static_cast<double>(g_.aggregators(v)) - 8);
}

double TreePlanner::MeanCapacity() const {
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

double TreePlanner::ArcLoad(const Tree& t) const {
  double total = 0;
  for (const auto& [row, c] : t.load) {
    const int res = rows_resource_[row];
    if (res >= 0 && net_.IsArcResource(res)) total += c;
  }
  return total;
}

bool TreePlanner::AddTree(Tree t) {
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

// The master LP's columns t and λ_j and its rows but the trees' columns.
void TreePlanner::BuildMaster() {
  const int n_jobs = static_cast<int>(net_.input().jobs.size());
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

// The master LP over the trees (all, or those marked in `restrict_to`): built once with
// every row, the trees added as columns as they are found, each solve warm-started from the
// last (lp::ColumnGenerationLp).
absl::StatusOr<lp::Solution> TreePlanner::Solve(const std::vector<char>* restrict_to) {
  const PlanningInput& in = net_.input();
  if (master_ == nullptr) BuildMaster();
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
    for (size_t s = 0; s < shards_.size(); ++s) share_value_[s] = sol->values[shards_[s].share_col];
  }
  return sol;
}

void TreePlanner::KeepTrees(const lp::Solution& sol, std::vector<char>* keep) {
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

absl::StatusOr<RoutingResult> TreePlanner::Realise(const lp::Solution& sol,
                                                   const std::vector<char>& keep) {
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
    RealiseShard(sol, static_cast<int>(s), shard_trees[s], shard_total[s],
                 &result.jobs[shards_[s].job]);
  }
  return result;
}

// The flows and streams of shard `s` from its kept trees `list` (creation order), which carry
// `total` of the shard in `sol`.
void TreePlanner::RealiseShard(const lp::Solution& sol, int s, const std::vector<int>& list,
                               double total, RoutedJob* rj) const {
  const Shard& sh = shards_[s];
  // Fractions of the shard, in creation order; a shard the LP gives no rate keeps its first
  // tree whole.
  std::vector<double> frac;
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
      rj->flows.push_back(RoutedFlow{sh.workers[i], sh.ps, t.agg[i], kf[q], t.arcs[i]});
      if (t.agg[i] != sh.ps) active.insert(t.agg[i]);
    }
  }
  for (int w : sh.local) rj->flows.push_back(RoutedFlow{w, sh.ps, sh.ps, 1.0, {}});
  for (int k : kept) {
    for (int v : trees_[k].active) active.insert(v);
  }
  for (int v : active) {
    auto it = sh.stream_arcs.find(v);
    if (it == sh.stream_arcs.end()) continue;
    const int p = sh.parent.at(v);
    rj->streams.push_back(RoutedStream{v, sh.ps, it->second, p});
  }
}

}  // namespace trees_internal

absl::StatusOr<RoutingResult> TreeRouting::Route(const Network& network) const {
  using trees_internal::Family;
  if (absl::Status s = CheckPsJobs(network); !s.ok()) return s;
  FlowEvaluator evaluator(network);
  std::optional<RoutingResult> best;
  std::vector<double> best_rates;
  for (Family family : {Family::kSingle, Family::kChains}) {
    if (family == Family::kChains && !network.input().options.reaggregation) continue;
    trees_internal::TreePlanner planner(network, family);
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
