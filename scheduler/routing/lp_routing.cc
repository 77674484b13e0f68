#include "scheduler/routing/lp_routing.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "scheduler/routing/baselines.h"
#include "scheduler/routing/routing_lp.h"

namespace inac::scheduler {
namespace {

std::vector<double> RatesOf(const Evaluation& ev) {
  std::vector<double> r;
  for (const JobEvaluation& j : ev.jobs) r.push_back(j.rate_gbps);
  return r;
}

uint64_t RoundSeed(uint64_t seed, uint64_t job, uint64_t round) {
  // splitmix64 of the triple: independent, reproducible streams.
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (1 + job * 1000003ULL + round);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The symmetry reduction (PlanningOptions::lp_symmetry_min_columns) when the job's per-worker LP
// is large or its candidates are spread (a large job by the estimate; its fewer detours can leave
// its per-worker LP under the threshold); then a spread job's detours trimmed to
// PlanningOptions::spread_lp_max_columns.
void MaybeGroup(const Network& net, const PlanningOptions& options, JobCandidates* c) {
  if (options.lp_symmetry_min_columns >= 0 &&
      (c->spread || CountLpColumns(*c) > options.lp_symmetry_min_columns)) {
    GroupInterchangeablePairs(net, c);
  }
  if (c->spread && options.spread_lp_max_columns > 0) TrimDetours(options.spread_lp_max_columns, c);
}

// Sequential mode's view of the network for the next job: on every resource the share a new job
// would get were the resource split equally among the planned jobs crossing it and the new one
// (residual / (1 + crossing jobs)), not what the planned jobs' load leaves -- planned alone, each
// earlier job saturates its bottleneck, so later jobs would see no capacity where the final
// max-min fair evaluation shares it, and be routed blind (the 200-job minimum rate of
// docs/controller.md "Incremental planning", item 7).
std::vector<double> FairShareResidual(const Network& net, const std::vector<RoutedJob>& planned) {
  std::vector<int> crossing(net.num_resources(), 0);
  for (const RoutedJob& job : planned) {
    for (const auto& [r, coefficient] : ComputeUsage(net, job).up) {
      if (coefficient > 0) ++crossing[r];
    }
  }
  std::vector<double> residual = FlowEvaluator(net).ResidualAfter(planned);
  for (size_t r = 0; r < residual.size(); ++r) {
    residual[r] = std::max(residual[r], net.residual(static_cast<int>(r)) / (1 + crossing[r]));
  }
  return residual;
}

int MoveBudget(const JobCandidates& c) { return 50 + 10 * static_cast<int>(c.pairs.size()); }

// Local search after every rounding (not only the best) while that stays cheap.
bool EachRound(const JobCandidates& c, const PlanningOptions& options) {
  return options.local_search &&
         static_cast<int64_t>(c.pairs.size()) * (options.rounds + 1) <= 20000;
}

struct Context {
  const Network& net;
  const LpRoutingConfig& config;
  PathCache cache;
  FlowEvaluator evaluator;
  const PlanningOptions& opt;
};

JobCandidates Candidates(Context& ctx, const std::vector<double>& residual, int job,
                         std::optional<std::vector<double>>* fixed) {
  std::vector<int> ps = PsNodes(ctx.net, job);
  *fixed = ctx.config.shares(ctx.net, ctx.cache, residual, job);
  std::vector<double> shares =
      fixed->has_value() ? **fixed : std::vector<double>(ps.size(), 1.0 / ps.size());
  // Spread candidates for a large job (PlanningOptions::spread_min_columns), by an estimate of
  // its per-worker LP taken before building any: pairs · k · (detours + 2 on-path switches).
  const int64_t estimate = static_cast<int64_t>(WorkerNodes(ctx.net, job).size()) *
                           static_cast<int64_t>(ps.size()) * ctx.opt.paths *
                           (ctx.opt.extra_candidates + 2);
  const bool spread = ctx.opt.spread_min_columns >= 0 && estimate > ctx.opt.spread_min_columns;
  const int extra = spread ? std::min(ctx.opt.extra_candidates, ctx.opt.spread_extra_candidates)
                           : ctx.opt.extra_candidates;
  return BuildCandidates(ctx.net, ctx.cache, job, ps, shares, extra, spread);
}

}  // namespace

std::string BoundSource(const LpOutcome& outcome) { return outcome.bound_source; }

namespace {

// Standalone bound of one job: its LP alone on the network with free shares.
// `warm`: start from the basis of the same candidates' LP with free shares solved earlier in THIS
// planning (the sequential mode's routing LP of the job over its residual). Only then: a basis
// left by an earlier planning (the process-wide cache) would make the bound depend on the
// process's history in its last bits (the warm and the cold solve agree only up to CLP's
// tolerances), and plans must be equal for equal inputs.
absl::Status StandaloneBound(Context& ctx, const JobCandidates& c, bool warm,
                             std::optional<double>* bound, JobDiagnostics* d) {
  std::vector<JobCandidates> one{c};
  RoutingLp lp = BuildRoutingLp(ctx.net, ctx.net.residuals(), one, true);
  auto out = SolveRoutingLp(lp, one, true, ctx.opt.lp_time_limit_s, lp::WarmStart{.use = warm});
  if (!out.ok()) return out.status();
  *bound = out->bound;
  d->lp_bound_source = BoundSource(*out);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RoutingResult> RouteWithLp(const Network& net, const LpRoutingConfig& config) {
  absl::Status ok = CheckPsJobs(net);
  if (!ok.ok()) return ok;
  const PlanningInput& input = net.input();
  Context ctx{net, config, PathCache(net.graph(), input.options.paths), FlowEvaluator(net),
              input.options};
  const int n = static_cast<int>(input.jobs.size());
  RoutingResult result;
  result.jobs.resize(n);
  result.lp_bound_gbps.resize(n);
  result.diagnostics.resize(n);
  for (int j = 0; j < n; ++j) result.diagnostics[j].job_id = input.jobs[j].id;
  if (n == 0) return result;
  const std::vector<int> order = PriorityOrder(input);
  std::vector<RoutedJob> atp = RouteAllAtp(net, ctx.cache);

  // Candidates on the empty network decide joint vs sequential.
  std::vector<JobCandidates> cands(n);
  std::vector<std::optional<std::vector<double>>> fixed(n);
  int64_t columns = 0;
  for (int j = 0; j < n; ++j) {
    cands[j] = Candidates(ctx, net.residuals(), j, &fixed[j]);
    AddPlanToCandidates(net, atp[j], &cands[j]);
    MaybeGroup(net, input.options, &cands[j]);
    columns += CountLpColumns(cands[j]);
  }
  const bool joint = n > 1 && columns <= input.options.joint_lp_max_columns;

  if (n == 1 || joint) {
    const bool free = std::any_of(fixed.begin(), fixed.end(), [](const auto& f) { return !f; });
    // An algorithm either fixes every job's shares (inart) or none (grid).
    RoutingLp lp = BuildRoutingLp(net, net.residuals(), cands, free);
    auto outcome = SolveRoutingLp(lp, cands, free, input.options.lp_time_limit_s);
    if (!outcome.ok()) return outcome.status();
    const std::string status = lp::SolveStatusName(outcome->solution.status);
    if (free) {
      for (int j = 0; j < n; ++j) {
        if (!fixed[j] && outcome->lambda[j] > 0) cands[j].shares = outcome->shares[j];
      }
    }
    std::vector<RoutedJob> best;
    std::vector<double> best_rates;
    std::string source = "lp_rounding";
    if (!outcome->solution.values.empty()) {
      std::vector<Choice> best_choice;
      for (int round = 0; round <= input.options.rounds; ++round) {
        std::vector<Choice> choice(n);
        std::vector<RoutedJob> routed(n);
        for (int j = 0; j < n; ++j) {
          std::mt19937_64 rng(RoundSeed(input.seed, j, round));
          choice[j] = RoundChoice(cands[j], lp.jobs[j], outcome->solution.values,
                                  round == 0 ? nullptr : &rng);
          if (n == 1 && EachRound(cands[j], input.options)) {
            LocalSearch(net, net.residuals(), cands[j], MoveBudget(cands[j]), &choice[j]);
            source = "lp_rounding+local_search";
          }
          routed[j] = ToRoutedJob(net, cands[j], choice[j]);
        }
        std::vector<double> rates = RatesOf(ctx.evaluator.Evaluate(routed));
        if (best.empty() || BetterRates(rates, best_rates)) {
          best = routed;
          best_rates = rates;
          best_choice = choice;
        }
      }
      if (input.options.local_search) {
        for (int j : order) {
          std::vector<RoutedJob> others;
          for (int k = 0; k < n; ++k) {
            if (k != j) others.push_back(best[k]);
          }
          std::vector<double> residual = ctx.evaluator.ResidualAfter(others);
          Choice improved = best_choice[j];
          LocalSearch(net, residual, cands[j], MoveBudget(cands[j]), &improved);
          std::vector<RoutedJob> trial = best;
          trial[j] = ToRoutedJob(net, cands[j], improved);
          std::vector<double> rates = RatesOf(ctx.evaluator.Evaluate(trial));
          if (BetterRates(rates, best_rates)) {
            best = trial;
            best_rates = rates;
            best_choice[j] = improved;
            source = "lp_rounding+local_search";
          }
        }
      }
    }
    std::vector<double> atp_rates = RatesOf(ctx.evaluator.Evaluate(atp));
    if (best.empty() || BetterRates(atp_rates, best_rates)) {
      best = atp;
      source = "atp_floor";
    }
    for (int j = 0; j < n; ++j) {
      result.jobs[j] = best[j];
      result.diagnostics[j].source = source;
      result.diagnostics[j].lp_status = status;
      result.diagnostics[j].lp_columns = lp.program.num_columns();
      result.diagnostics[j].lp_rows = lp.program.num_rows();
      result.diagnostics[j].joint = joint;
      if (n == 1 && free) {
        result.lp_bound_gbps[j] = outcome->bound;
        result.diagnostics[j].lp_bound_source = BoundSource(*outcome);
      } else {
        absl::Status s =
            StandaloneBound(ctx, cands[j], false, &result.lp_bound_gbps[j], &result.diagnostics[j]);
        if (!s.ok()) return s;
      }
    }
    return result;
  }

  // One job at a time in priority order, each around the jobs before it: twice, once around
  // their evaluated load (what they leave) and once around FairShareResidual (what they would
  // share with it); the plan better in max-min fair order of the evaluated rates is kept (the
  // first wins ties). The first suits lightly loaded fabrics, the second loaded ones.
  struct Pass {
    RoutingResult result;
    std::vector<JobCandidates> candidates;  // per job, for its standalone bound
    std::vector<double> rates;
  };
  auto sequential = [&](bool fair) -> absl::StatusOr<Pass> {
    Pass pass;
    pass.result = result;
    pass.candidates.resize(n);
    std::vector<RoutedJob> planned;
    for (int j : order) {
      std::vector<double> residual =
          fair ? FairShareResidual(net, planned) : ctx.evaluator.ResidualAfter(planned);
      std::optional<std::vector<double>> shares;
      JobCandidates c = Candidates(ctx, residual, j, &shares);
      RoutedJob floor =
          RouteAtp(net, ctx.cache, residual, j, AtpOptions{.two_level = false, .sharded = false});
      AddPlanToCandidates(net, floor, &c);
      AddPlanToCandidates(net, atp[j], &c);
      MaybeGroup(net, input.options, &c);
      std::vector<JobCandidates> one{c};
      const bool free = !shares.has_value();
      RoutingLp lp = BuildRoutingLp(net, residual, one, free);
      auto outcome = SolveRoutingLp(lp, one, free, input.options.lp_time_limit_s);
      if (!outcome.ok()) return outcome.status();
      if (free && outcome->lambda[0] > 0) one[0].shares = outcome->shares[0];
      RoutedJob best = floor;
      double best_rate = SingleJobRate(ComputeUsage(net, floor), residual);
      std::string source = "atp_floor";
      if (!outcome->solution.values.empty()) {
        Choice best_choice;
        double rounded_rate = -1;
        for (int round = 0; round <= input.options.rounds; ++round) {
          std::mt19937_64 rng(RoundSeed(input.seed, j, round));
          Choice ch = RoundChoice(one[0], lp.jobs[0], outcome->solution.values,
                                  round == 0 ? nullptr : &rng);
          if (EachRound(one[0], input.options)) {
            LocalSearch(net, residual, one[0], MoveBudget(one[0]), &ch);
          }
          double rate = SingleJobRate(ComputeUsage(net, ToRoutedJob(net, one[0], ch)), residual);
          if (rate > rounded_rate * (1 + 1e-9)) {
            rounded_rate = rate;
            best_choice = ch;
          }
        }
        std::string rsource = "lp_rounding";
        if (input.options.local_search) {
          LocalSearch(net, residual, one[0], MoveBudget(one[0]), &best_choice);
          double rate =
              SingleJobRate(ComputeUsage(net, ToRoutedJob(net, one[0], best_choice)), residual);
          if (rate > rounded_rate * (1 + 1e-9)) rsource = "lp_rounding+local_search";
          rounded_rate = std::max(rounded_rate, rate);
        }
        if (rounded_rate >= best_rate * (1 - 1e-12)) {
          best = ToRoutedJob(net, one[0], best_choice);
          best_rate = rounded_rate;
          source = rsource;
        }
      }
      pass.result.jobs[j] = best;
      planned.push_back(best);
      JobDiagnostics& d = pass.result.diagnostics[j];
      d.source = source;
      d.lp_status = lp::SolveStatusName(outcome->solution.status);
      d.lp_columns = lp.program.num_columns();
      d.lp_rows = lp.program.num_rows();
      pass.candidates[j] = c;
      if (free && planned.size() == 1) {
        pass.result.lp_bound_gbps[j] = outcome->bound;
        d.lp_bound_source = BoundSource(*outcome);
      }
    }
    pass.rates = RatesOf(ctx.evaluator.Evaluate(pass.result.jobs));
    return pass;
  };
  auto loaded = sequential(false);
  if (!loaded.ok()) return loaded.status();
  auto shared = sequential(true);
  if (!shared.ok()) return shared.status();
  Pass& chosen = BetterRates(shared->rates, loaded->rates) ? *shared : *loaded;
  result = std::move(chosen.result);
  for (int j = 0; j < n; ++j) {
    if (result.diagnostics[j].lp_bound_source.empty()) {
      absl::Status s = StandaloneBound(ctx, chosen.candidates[j], !fixed[j].has_value(),
                                       &result.lp_bound_gbps[j], &result.diagnostics[j]);
      if (!s.ok()) return s;
    }
  }
  return result;
}

}  // namespace inac::scheduler
