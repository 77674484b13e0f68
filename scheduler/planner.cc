#include "scheduler/planner.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "scheduler/batch/batch_planner.h"
#include "scheduler/incremental.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/ring/rina.h"
#include "scheduler/routing/bounds.h"

namespace inac::scheduler {

PlanningInput RoutingInputOf(const PlanRequest& request, std::vector<const core::Job*>* rings) {
  const PlannerOptions& o = request.options;
  PlanningInput input;
  input.topology = *request.topology;
  input.seed = o.seed;
  input.options.rounds = o.rounds;
  input.options.paths = o.paths;
  input.options.spread_min_columns = o.spread_min_columns;
  input.options.split_max_ranges = o.split_max_ranges;
  input.options.lp_time_limit_s = o.lp_time_limit_s;
  input.options.mip_time_limit_s = o.mip_time_limit_s;
  input.options.joint_lp_max_columns = o.joint_lp_max_columns;
  // The data plane's intents program chains (core::DeriveSwitchIntents: a re-aggregating
  // switch takes its child's aggregate as an input), so ATP deploys two-level.
  input.options.reaggregation = true;
  input.options.memory_policy = o.memory_policy;
  for (const core::Job& job : request.jobs) {
    if (job.spec.allreduce == core::AllReduce::kRing) {
      rings->push_back(&job);
    } else {
      input.jobs.push_back(JobInput{job.id, job.spec});
    }
  }
  return input;
}

absl::StatusOr<MemoryPlannerOptions> MemoryOptionsOf(const PlannerOptions& o) {
  std::optional<MemoryPolicy> policy = ParseMemoryPolicy(o.memory_policy);
  if (!policy) {
    return absl::InvalidArgumentError(absl::StrCat("unknown memory policy \"", o.memory_policy,
                                                   "\" (esa, atp, switchml, no_ina)"));
  }
  MemoryPlannerOptions mem;
  mem.policy = *policy;
  return mem;
}

namespace {

// Rescore's work, with its failure as a status: ComputePlan returns it. The hold time of every
// grant is the one it was sized with (one hold-time model: GrantHoldUs), not the route's round
// trip. A plan the flow model cannot score after routing and memory is a planner defect
// (Internal, naming the job): publishing it would print the routing's pre-memory rates.
absl::Status RescoreGrants(const PlanningInput& input, const MemoryPlannerOptions& mem,
                           PlannerOutput* out) {
  core::Graph graph(input.topology);
  auto evaluations = RescorePlan(
      input,
      [&](const core::JobPlan& jp, const std::string& sw) {
        return GrantHoldUs(graph, jp, sw, mem);
      },
      &out->plan);
  if (!evaluations.ok()) return evaluations.status();
  for (const JobEvaluation& e : *evaluations) out->reports[e.job_id].evaluation = e;
  return absl::OkStatus();
}

}  // namespace

absl::Status Rescore(const PlanningInput& input, const MemoryPlannerOptions& mem,
                     PlannerOutput* out) {
  return RescoreGrants(input, mem, out);
}

void FinishPlan(const PlanRequest& request, const std::vector<const core::Job*>& rings,
                PlannerOutput* out) {
  const PlannerOptions& o = request.options;
  core::Plan& plan = out->plan;
  plan.algorithm = o.algorithm;
  // The memory layout of the data plane follows the policy (shared pools for esa/atp).
  plan.memory_policy = o.memory_policy;
  // Ring all-reduce jobs: Rina around the PS jobs' load (scheduler/ring/rina.h).
  std::vector<JobInput> ring_inputs;
  for (const core::Job* job : rings) {
    if (plan.FindJob(job->id) == nullptr) ring_inputs.push_back(JobInput{job->id, job->spec});
  }
  PlanningOptions ring_options;
  ring_options.paths = o.paths;
  for (core::JobPlan& jp : PlanRingJobs(*request.topology, ring_inputs, plan, ring_options)) {
    plan.jobs.push_back(std::move(jp));
  }
  // The abstract racks' aggregators, from what the PS jobs left (docs/rina.md "Data plane").
  if (!rings.empty()) {
    if (auto mem = MemoryOptionsOf(o); mem.ok()) {
      AssignRingAggregators(core::Graph(*request.topology), request.jobs, *mem, &plan);
    }
  }
  for (core::JobPlan& jp : plan.jobs) {
    if (jp.batch_size != 0) continue;
    for (const core::Job& job : request.jobs) {
      if (job.id == jp.job_id) jp.batch_size = job.spec.batch_size;
    }
  }
  std::sort(plan.jobs.begin(), plan.jobs.end(),
            [](const core::JobPlan& a, const core::JobPlan& b) { return a.job_id < b.job_id; });
  // A job aggregated differently than in the previous plan gets new tags (core/plan.h).
  core::CarryAggregationGenerations(request.previous, &plan);
  out->intents = core::DeriveSwitchIntents(*request.topology, plan);
}

namespace {

std::vector<double> RatesOf(const Evaluation& ev) {
  std::vector<double> r;
  for (const JobEvaluation& j : ev.jobs) r.push_back(j.rate_gbps);
  return r;
}

double MinOf(const std::vector<double>& v) {
  double m = kUnbounded;
  for (double x : v) m = std::min(m, x);
  return m;
}

// Stability (PlannerOptions::replan_move_threshold): replaces, in the routed plan `plan` (PS jobs
// of `input` in input order, uncapped), the routes of every running job of `previous` whose gain
// is within the threshold by its previous routes.
absl::Status KeepStableRoutes(const PlanRequest& request, const PlanningInput& input,
                              core::Plan* plan, PlannerOutput* out) {
  const double threshold = request.options.replan_move_threshold;
  if (request.previous == nullptr || threshold < 0 || plan->jobs.empty()) return absl::OkStatus();
  auto net = Network::Create(input);
  if (!net.ok()) return net.status();
  FlowEvaluator evaluator(**net);
  std::vector<RoutedJob> fresh, held;
  std::vector<int> candidates;  // indices of running jobs with valid previous routes
  for (size_t j = 0; j < plan->jobs.size(); ++j) {
    auto routed = evaluator.FromJobPlan(plan->jobs[j]);
    if (!routed.ok()) {  // the routing's own plan: a planner defect, never skipped
      return absl::InternalError(
          absl::StrCat("planner: job ", plan->jobs[j].job_id,
                       " of the routing does not evaluate: ", routed.status().message()));
    }
    routed->aggregators.clear();
    fresh.push_back(*routed);
    held.push_back(*routed);
    const core::JobId id = plan->jobs[j].job_id;
    const core::JobPlan* before = request.previous->FindJob(id);
    bool running = false;
    for (const core::Job& job : request.jobs) {
      if (job.id == id) running = job.state == core::JobState::kRunning;
    }
    if (!running || before == nullptr || !before->ring.empty()) continue;
    core::JobPlan routes_only = *before;
    routes_only.aggregators.clear();
    auto previous = evaluator.FromJobPlan(routes_only);
    if (!previous.ok()) continue;  // a link went down or a host moved: must move
    previous->job = static_cast<int>(j);
    held.back() = *previous;
    candidates.push_back(static_cast<int>(j));
  }
  if (candidates.empty()) return absl::OkStatus();
  // The other jobs (new ones, and running ones that must move) as an admission would place them
  // around the held routes (scheduler/incremental.h): the plan that moves nobody.
  if (candidates.size() < plan->jobs.size()) {
    core::Plan held_previous;
    for (int j : candidates) {
      held_previous.jobs.push_back(*request.previous->FindJob(plan->jobs[j].job_id));
    }
    PlanRequest sub = request;
    sub.previous = &held_previous;
    sub.options.replan_move_threshold = -1;
    auto admitted = AdmitJobs(sub);
    if (admitted.ok()) {
      std::set<int> kept(candidates.begin(), candidates.end());
      for (size_t j = 0; j < plan->jobs.size(); ++j) {
        if (kept.count(static_cast<int>(j))) continue;
        const core::JobPlan* placed = admitted->output.plan.FindJob(plan->jobs[j].job_id);
        if (placed == nullptr) continue;
        core::JobPlan routes_only = *placed;
        routes_only.aggregators.clear();
        auto routed = evaluator.FromJobPlan(routes_only);
        if (routed.ok()) held[j] = *routed;
      }
    }
  }
  const std::vector<double> fresh_rates = RatesOf(evaluator.Evaluate(fresh));
  const std::vector<double> held_rates = RatesOf(evaluator.Evaluate(held));
  auto gains = [&](double now, double before) { return now > (1 + threshold) * before + 1e-12; };
  // Moving nobody keeps `held` whole, the admission's routes for the others included. Then:
  //  1. a running job takes its new routes when they raise its own rate past the threshold;
  //  2. each other job takes the better (max-min order) of its admission and new routes;
  //  3. while the new plan's minimum rate is more than the threshold above the mix's, the
  //     running job whose move raises the mix's minimum most moves too (the minimum's rule).
  std::vector<RoutedJob> chosen = held;
  std::vector<bool> moved(plan->jobs.size(), false);
  for (int j : candidates) {
    if (gains(fresh_rates[j], held_rates[j])) {
      chosen[j] = fresh[j];
      moved[j] = true;
    }
  }
  std::vector<double> rates = RatesOf(evaluator.Evaluate(chosen));
  std::set<int> kept_set(candidates.begin(), candidates.end());
  for (size_t j = 0; j < plan->jobs.size(); ++j) {
    if (kept_set.count(static_cast<int>(j))) continue;
    std::vector<RoutedJob> trial = chosen;
    trial[j] = fresh[j];
    std::vector<double> r = RatesOf(evaluator.Evaluate(trial));
    if (BetterRates(r, rates)) {
      chosen = std::move(trial);
      rates = std::move(r);
    }
  }
  while (gains(MinOf(fresh_rates), MinOf(rates))) {
    int best = -1;
    std::vector<double> best_rates;
    for (int j : candidates) {
      if (moved[j]) continue;
      std::vector<RoutedJob> trial = chosen;
      trial[j] = fresh[j];
      std::vector<double> r = RatesOf(evaluator.Evaluate(trial));
      if (MinOf(r) > MinOf(best < 0 ? rates : best_rates) * (1 + 1e-9)) {
        best = j;
        best_rates = std::move(r);
      }
    }
    if (best < 0) break;  // no single move raises the minimum
    chosen[best] = fresh[best];
    moved[best] = true;
    rates = std::move(best_rates);
  }
  for (int j : candidates) {
    (moved[j] ? out->moved_by_threshold : out->kept_by_threshold).push_back(plan->jobs[j].job_id);
  }
  for (size_t j = 0; j < plan->jobs.size(); ++j) {
    core::JobPlan& jp = plan->jobs[j];
    const std::optional<double> bound = jp.lp_bound_gbps;
    core::JobPlan routes = evaluator.ToJobPlan(chosen[j]);
    jp.ps_shares = routes.ps_shares;
    jp.flows = routes.flows;
    jp.aggregator_paths = routes.aggregator_paths;
    jp.lp_bound_gbps = bound;
  }
  ApplyEvaluation(evaluator.Evaluate(chosen), plan);
  return absl::OkStatus();
}

}  // namespace

// JobPlan::lp_bound_gbps is printed as a bound, so it must bound every plan the data plane runs:
// the routing's own LP optimum (a candidate-family optimum) moves to the report, and the bound is
// ChainedBound when PlannerOptions::bound_max_columns allows its LP, none otherwise.
void AttachBounds(const PlanRequest& request, const PlanningInput& input, PlannerOutput* out) {
  const int64_t max_columns = request.options.bound_max_columns;
  std::unique_ptr<Network> net;
  if (max_columns > 0) {
    if (auto n = Network::Create(input); n.ok()) net = std::move(*n);
  }
  for (core::JobPlan& jp : out->plan.jobs) {
    if (!jp.ring.empty()) continue;
    JobReport& report = out->reports[jp.job_id];
    report.candidate_optimum_gbps = jp.lp_bound_gbps;
    jp.lp_bound_gbps.reset();
    report.diagnostics.lp_bound_source = "none";
    if (net == nullptr) continue;
    int index = -1;
    for (size_t j = 0; j < input.jobs.size(); ++j) {
      if (input.jobs[j].id == jp.job_id) index = static_cast<int>(j);
    }
    if (index < 0) continue;
    auto size = RateBoundSize(*net, index, /*chains=*/true);
    if (!size.ok() || size->columns > max_columns) continue;
    auto bound = ChainedBound(*net, index, nullptr, request.options.lp_time_limit_s);
    if (!bound.ok()) continue;
    jp.lp_bound_gbps = bound->gbps;
    report.diagnostics.lp_bound_source =
        bound->status == "optimal" ? "chained_lp" : absl::StrCat("chained_lp ", bound->status);
  }
}

absl::StatusOr<PlannerOutput> ComputePlan(const PlanRequest& request) {
  if (request.topology == nullptr) return absl::InvalidArgumentError("planner: no topology");
  const PlannerOptions& o = request.options;
  auto mem = MemoryOptionsOf(o);
  if (!mem.ok()) return mem.status();
  std::vector<const core::Job*> rings;
  PlanningInput input = RoutingInputOf(request, &rings);
  PlannerOutput out;
  core::Plan& plan = out.plan;
  if (!input.jobs.empty()) {
    auto routed = PlanRouting(o.algorithm, input);
    if (!routed.ok()) return routed.status();
    plan = std::move(routed->plan);
    for (size_t j = 0; j < input.jobs.size() && j < routed->diagnostics.size(); ++j) {
      out.reports[input.jobs[j].id].diagnostics = routed->diagnostics[j];
    }
    if (absl::Status s = KeepStableRoutes(request, input, &plan, &out); !s.ok()) return s;
    core::Graph graph(input.topology);
    std::vector<MemoryJobState> states;
    for (const core::Job& job : request.jobs) {
      states.push_back(MemoryJobStateFromJob(job, request.now_ms));
    }
    if (absl::Status s = AssignAggregators(graph, states, request.previous, *mem, &plan); !s.ok()) {
      return s;
    }
    if (absl::Status s = RescoreGrants(input, *mem, &out); !s.ok()) return s;
    // InGo: batch sizes chosen jointly under the routing (scheduler/batch/batch_planner.h).
    if (absl::Status s = ChoosePlannerBatchSizes(request, input, *mem, &out); !s.ok()) return s;
    AttachBounds(request, input, &out);
  }
  FinishPlan(request, rings, &out);
  return out;
}

}  // namespace inac::scheduler
