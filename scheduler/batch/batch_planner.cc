#include "scheduler/batch/batch_planner.h"

#include <algorithm>

#include "scheduler/memory/aggregator_model.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {

bool AnyBatchChoice(const PlanningInput& input) {
  for (const JobInput& j : input.jobs) {
    if (j.spec.allreduce != core::AllReduce::kPs) continue;
    for (int b : j.spec.batch_sizes) {
      if (b != j.spec.batch_size) return true;
    }
  }
  return false;
}

absl::StatusOr<PlanBatchResult> ChoosePlanBatchSizes(const PlanningInput& input,
                                                     const HoldTimeFunction& hold_us,
                                                     const std::map<core::JobId, double>& remaining,
                                                     const BatchOptions& options,
                                                     core::Plan* plan) {
  auto net = Network::Create(input);
  if (!net.ok()) return net.status();
  FlowEvaluator evaluator(**net);
  std::vector<RoutedJob> routed;
  std::vector<double> left;
  for (const core::JobPlan& jp : plan->jobs) {
    auto job = evaluator.FromJobPlan(jp);
    if (!job.ok()) return job.status();
    if (hold_us) {
      for (const auto& [sw, n] : job->aggregators) {
        job->hold_us[sw] = hold_us(jp, (*net)->graph().name(sw));
      }
    }
    routed.push_back(*std::move(job));
    auto it = remaining.find(jp.job_id);
    left.push_back(it == remaining.end() ? 1.0 : it->second);
  }
  auto problem = BuildBatchProblem(**net, routed, left);
  if (!problem.ok()) return problem.status();
  PlanBatchResult out;
  out.fixed = FixedBatchSizes(*problem);
  out.chosen = ChooseBatchSizes(*problem, options);
  for (size_t i = 0; i < plan->jobs.size(); ++i) {
    core::JobPlan& jp = plan->jobs[i];
    const JobBatchOutcome& o = out.chosen.jobs[i];
    jp.batch_size = o.batch;
    jp.iteration_ms = problem->jobs[i].model.compute.Ms(o.batch) + jp.comm_ms;
    out.by_job[jp.job_id] = o;
    out.fixed_by_job[jp.job_id] = out.fixed.jobs[i];
  }
  return out;
}

absl::Status ChoosePlannerBatchSizes(const PlanRequest& request, const PlanningInput& input,
                                     const MemoryPlannerOptions& memory, PlannerOutput* out) {
  if (request.options.algorithm != "ingo" && !AnyBatchChoice(input)) return absl::OkStatus();
  core::Graph graph(input.topology);
  core::Plan ps_only;
  std::vector<size_t> where;
  for (size_t i = 0; i < out->plan.jobs.size(); ++i) {
    if (!out->plan.jobs[i].ring.empty()) continue;
    ps_only.jobs.push_back(out->plan.jobs[i]);
    where.push_back(i);
  }
  if (ps_only.jobs.empty()) return absl::OkStatus();
  std::map<core::JobId, double> remaining;
  for (const core::Job& job : request.jobs) {
    if (job.spec.iterations > 0) {
      const double done =
          static_cast<double>(job.iterations_done) / static_cast<double>(job.spec.iterations);
      remaining[job.id] = std::clamp(1 - done, 1e-3, 1.0);
    }
  }
  auto hold = [&](const core::JobPlan& jp, const std::string& sw) {
    return GrantHoldUs(graph, jp, sw, memory);
  };
  auto result =
      ChoosePlanBatchSizes(input, hold, remaining, request.options.batch_options, &ps_only);
  if (!result.ok()) return result.status();
  // Hysteresis against the previous plan's batch sizes.
  if (request.previous != nullptr) {
    std::vector<int> current, chosen;
    std::vector<int64_t> last_change;
    bool any_previous = false;
    for (const core::JobPlan& jp : ps_only.jobs) {
      const core::JobPlan* before = request.previous->FindJob(jp.job_id);
      // A job new to the plan takes its choice (the hysteresis is for jobs already running).
      const int was =
          before != nullptr && before->batch_size > 0 ? before->batch_size : jp.batch_size;
      any_previous = any_previous || before != nullptr;
      current.push_back(was);
      chosen.push_back(jp.batch_size);
      auto it = request.batch_changed_ms.find(jp.job_id);
      last_change.push_back(it == request.batch_changed_ms.end() ? -1 : it->second);
    }
    if (any_previous && current != chosen) {
      auto net = Network::Create(input);
      if (!net.ok()) return net.status();
      FlowEvaluator evaluator(**net);
      std::vector<RoutedJob> routed;
      std::vector<double> left;
      for (const core::JobPlan& jp : ps_only.jobs) {
        auto job = evaluator.FromJobPlan(jp);
        if (!job.ok()) return job.status();
        for (const auto& [sw, n] : job->aggregators) {
          job->hold_us[sw] = hold(jp, (*net)->graph().name(sw));
        }
        routed.push_back(*std::move(job));
        auto it = remaining.find(jp.job_id);
        left.push_back(it == remaining.end() ? 1.0 : it->second);
      }
      auto problem = BuildBatchProblem(**net, routed, left);
      if (!problem.ok()) return problem.status();
      const BatchUpdate update = ApplyBatchHysteresis(*problem, current, chosen, last_change,
                                                      request.now_ms, request.options.batch_rule);
      const BatchChoice kept = EvaluateBatches(*problem, update.batches);
      for (size_t i = 0; i < ps_only.jobs.size(); ++i) {
        core::JobPlan& jp = ps_only.jobs[i];
        jp.batch_size = update.batches[i];
        jp.iteration_ms = problem->jobs[i].model.compute.Ms(jp.batch_size) + jp.comm_ms;
        result->by_job[jp.job_id] = kept.jobs[i];
      }
    }
  }
  for (size_t k = 0; k < where.size(); ++k) {
    core::JobPlan& jp = out->plan.jobs[where[k]];
    jp.batch_size = ps_only.jobs[k].batch_size;
    jp.iteration_ms = ps_only.jobs[k].iteration_ms;
    out->reports[jp.job_id].batch = result->by_job.at(jp.job_id);
    out->reports[jp.job_id].batch_fixed = result->fixed_by_job.at(jp.job_id);
    out->reports[jp.job_id].batch_method = result->chosen.method;
  }
  return absl::OkStatus();
}

}  // namespace inac::scheduler
