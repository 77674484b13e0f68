// The refiner (server/controller.h, "Incremental planning"): while an admission plan is in
// force, the loop hands a snapshot to the refiner thread, which computes the full plan
// (scheduler::ComputePlan within replan_budget_ms of CLP); the loop adopts the answer when it is
// still for the inputs in force, and drops it otherwise. The loop never waits for the refiner.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/controller.h"
#include "spdlog/spdlog.h"

namespace inac::server {

absl::StatusOr<bool> Controller::RefineStep(const core::Snapshot& snapshot,
                                            const std::string& fingerprint, int64_t* plan_version) {
  *plan_version = snapshot.plan->plan.version;
  MarkScheduled(snapshot, *plan_version);
  std::optional<RefineResult> result = TakeRefineResult(snapshot, fingerprint);
  if (!result) return false;
  return AdoptRefinedPlan(snapshot, fingerprint, std::move(*result), plan_version);
}

std::optional<Controller::RefineResult> Controller::TakeRefineResult(
    const core::Snapshot& snapshot, const std::string& fingerprint) {
  const core::Plan& admitted = snapshot.plan->plan;
  std::optional<RefineResult> result;
  absl::MutexLock lock(&mu_);
  if (refine_result_ && (refine_result_->fingerprint != fingerprint ||
                         refine_result_->base_version != admitted.version)) {
    refine_result_.reset();  // for other inputs or another admission plan
  }
  if (refine_result_) {
    // refine_fingerprint_ is cleared once the result is saved (Sync waits for that).
    result = std::move(refine_result_);
    refine_result_.reset();
    if (!result->output.ok()) {
      refine_failed_fingerprint_ = fingerprint;
      refine_fingerprint_.clear();
    }
    return result;
  }
  if (refine_failed_fingerprint_ == fingerprint) {
    return std::nullopt;  // the full re-plan of these inputs failed: the admission plan stays
  }
  if (refine_fingerprint_ != fingerprint || (!refine_request_ && !refine_running_)) {
    // A restart found this admission plan, or the answer was for another base: ask (again).
    refine_fingerprint_ = fingerprint;
    std::vector<core::Job> jobs;
    for (const core::Job& job : snapshot.jobs) {
      if (admitted.FindJob(job.id) != nullptr) jobs.push_back(job);
    }
    refine_request_ = RefineRequest{fingerprint,     admitted.version, snapshot.topology->topology,
                                    std::move(jobs), admitted,         clock_()};
  }
  // Otherwise queued or solving: the refiner wakes the loop when it is done.
  return std::nullopt;
}

absl::StatusOr<bool> Controller::AdoptRefinedPlan(const core::Snapshot& snapshot,
                                                  const std::string& fingerprint,
                                                  RefineResult result, int64_t* plan_version) {
  const core::Plan& admitted = snapshot.plan->plan;
  const int64_t now = clock_();
  if (!result.output.ok()) {
    const std::string error(result.output.status().message());
    events_.Log("plan_failed", std::nullopt,
                absl::StrCat("background re-plan failed (the admission plan stays): ", error));
    spdlog::warn("event=plan_refine_failed error=\"{}\"", error);
    return false;
  }
  core::Plan plan = std::move(result.output->plan);
  plan.solve_ms = result.solve_ms;
  plan.fingerprint = fingerprint;
  plan.version = 0;
  auto intents = core::DeriveSwitchIntents(snapshot.topology->topology, plan);
  const std::string message = absl::StrFormat(
      "refined plan %d: full re-plan of %d job(s) with %s in %.1f ms; %d running job(s) kept "
      "their routes (gain within the move threshold), %d moved",
      admitted.version, plan.jobs.size(), plan.algorithm, result.solve_ms,
      result.output->kept_by_threshold.size(), result.output->moved_by_threshold.size());
  std::vector<core::Event> refined_events = {MakeEvent(now, "plan_saved", std::nullopt, message),
                                             MakeEvent(now, "plan_refined", std::nullopt, message)};
  // InGo: jobs whose batch size changed (docs/batch-size.md); workers read it from /config.
  for (const auto& [id, batch_message] : batch_refit_.NoteBatchChanges(&admitted, plan, now)) {
    refined_events.push_back(MakeEvent(now, "job_batch_size", id, batch_message));
  }
  auto version = storage_->plans().Save(plan, intents, now, refined_events);
  {
    // Settled at the end of this pass (after the reconciliation of the refined plan), so that
    // Sync returns with the switches programmed; a failed save is asked again next pass.
    absl::MutexLock lock(&mu_);
    refine_settle_at_pass_end_ = true;
  }
  if (!version.ok()) return version.status();
  *plan_version = *version;
  metrics_.ObservePlan(result.solve_ms / 1000.0);
  stats_.CountReplan(now);
  spdlog::info("event=plan_refined version={} base={} jobs={} solve_ms={:.1f} kept={} moved={}",
               *version, admitted.version, plan.jobs.size(), result.solve_ms,
               result.output->kept_by_threshold.size(), result.output->moved_by_threshold.size());
  storage_->plans().Prune(options_.keep_plans).IgnoreError();
  events_.Notify();
  return true;
}

void Controller::RefinerMain() {
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return refine_request_.has_value() || refiner_exit_;
  };
  while (true) {
    RefineRequest request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (refiner_exit_) return;
      request = std::move(*refine_request_);
      refine_request_.reset();
      refine_running_ = true;
    }
    scheduler::PlanRequest plan_request;
    plan_request.topology = &request.topology;
    plan_request.jobs = request.jobs;
    plan_request.previous = &request.previous;
    plan_request.now_ms = request.now_ms;
    plan_request.options = PlannerOptionsOf();
    plan_request.batch_changed_ms = batch_refit_.ChangedMs();
    if (options_.replan_budget_ms > 0) {
      plan_request.options.lp_time_limit_s = options_.replan_budget_ms / 1000.0;
    }
    const auto start = std::chrono::steady_clock::now();
    auto output = scheduler::ComputePlan(plan_request);
    const double solve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    absl::MutexLock lock(&mu_);
    refine_running_ = false;
    // A newer change superseded these inputs while solving: the answer is dropped.
    if (refine_fingerprint_ == request.fingerprint && !refiner_exit_) {
      refine_result_ =
          RefineResult{request.fingerprint, request.base_version, std::move(output), solve_ms};
      wake_ = true;
    }
  }
}

}  // namespace inac::server
