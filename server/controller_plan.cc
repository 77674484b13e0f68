// The control loop's planning step (server/controller.h, Controller::MaybeReplan): the inputs'
// fingerprint, the plan in force kept (with its priorities refreshed) or a new one -- jobs sorted
// into placeable and not, an admission or a full plan computed, saved with its intents and
// events, its pending jobs scheduled.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/validation.h"
#include "scheduler/incremental.h"
#include "scheduler/memory/memory_planner.h"
#include "server/controller.h"
#include "server/plan_fingerprint.h"
#include "spdlog/spdlog.h"

namespace inac::server {

scheduler::PlannerOptions Controller::PlannerOptionsOf() const {
  scheduler::PlannerOptions o;
  o.algorithm = options_.algorithm;
  o.memory_policy = options_.memory_policy;
  o.seed = options_.seed;
  o.rounds = options_.rounds;
  o.paths = options_.paths;
  o.spread_min_columns = options_.spread_min_columns;
  o.split_max_ranges = options_.split_max_ranges;
  o.replan_move_threshold = options_.replan_move_threshold;
  o.batch_rule.hysteresis = options_.batch_hysteresis;
  o.batch_rule.min_interval_ms = options_.batch_min_interval_ms;
  return o;
}

std::string Controller::Fingerprint(const core::Snapshot& snapshot) const {
  scheduler::PlanRequest request;
  request.topology_version = snapshot.topology ? snapshot.topology->version : 0;
  request.jobs = snapshot.jobs;
  request.options = PlannerOptionsOf();
  return PlanFingerprint(request);
}

absl::StatusOr<core::Plan> Controller::ComputePlan(const core::Topology& topology,
                                                   const std::vector<core::Job>& jobs,
                                                   const core::Plan* previous) {
  scheduler::PlanRequest request;
  request.topology = &topology;
  request.jobs = jobs;
  request.previous = previous;
  request.now_ms = clock_();
  request.options = PlannerOptionsOf();
  request.batch_changed_ms = batch_refit_.ChangedMs();
  auto out = scheduler::ComputePlan(request);
  if (!out.ok()) return out.status();
  return std::move(out->plan);
}

absl::StatusOr<bool> Controller::RefreshPriorities(const core::Snapshot& snapshot,
                                                   int64_t* plan_version) {
  // ESA only: the other policies do not act on priorities in the data plane.
  if (options_.memory_policy != "esa" || !snapshot.plan || !snapshot.topology) return false;
  const int64_t now = clock_();
  std::vector<scheduler::MemoryJobState> states;
  for (const core::Job& job : snapshot.jobs) {
    if (snapshot.plan->plan.FindJob(job.id) != nullptr) {
      states.push_back(scheduler::MemoryJobStateFromJob(job, now));
    }
  }
  core::Plan plan = snapshot.plan->plan;
  if (!scheduler::RefreshPriorities(states, nullptr, &plan)) return false;
  plan.version = 0;  // next version; same routes, aggregators and fingerprint
  auto intents = core::DeriveSwitchIntents(snapshot.topology->topology, plan);
  auto version = storage_->plans().Save(
      plan, intents, now,
      {MakeEvent(now, "plan_saved", std::nullopt,
                 absl::StrCat("priorities refreshed from progress and age (plan ",
                              snapshot.plan->plan.version, " re-ranked, routes kept)"))});
  if (!version.ok()) return version.status();
  *plan_version = *version;
  metrics_.CountPriorityRefresh();
  spdlog::info("event=priorities_refreshed version={} jobs={}", *version, plan.jobs.size());
  events_.Notify();
  return true;
}

absl::StatusOr<bool> Controller::MaybeReplan(const core::Snapshot& snapshot,
                                             int64_t* plan_version) {
  std::string fingerprint = Fingerprint(snapshot);
  if (snapshot.plan && snapshot.plan->plan.fingerprint == fingerprint) {
    return KeepPlan(snapshot, plan_version);
  }
  if (options_.incremental && snapshot.plan &&
      snapshot.plan->plan.fingerprint == absl::StrCat("admitted:", fingerprint)) {
    return RefineStep(snapshot, fingerprint, plan_version);
  }
  const core::Topology& topology = snapshot.topology->topology;
  int64_t now = clock_();
  JobSort sort = SortJobs(snapshot.jobs, topology, now);
  const core::Plan* previous = snapshot.plan ? &snapshot.plan->plan : nullptr;
  auto planned = PlanJobs(topology, sort.placeable, previous);
  if (!planned.ok()) {
    const std::string error(planned.status().message());
    events_.Log("plan_failed", std::nullopt, absl::StrCat("planning failed: ", error));
    spdlog::warn("event=plan_failed error=\"{}\"", error);
    if (!sort.updates.empty()) ApplyJobUpdates(sort.updates, sort.events, now);
    return planned.status();
  }
  auto version =
      SavePlan(topology, fingerprint, std::move(*planned), previous, sort.placeable, now);
  if (!version.ok()) return version.status();
  *plan_version = *version;
  ScheduleJobs(sort.placeable, *version, now, &sort);
  if (!sort.updates.empty()) ApplyJobUpdates(sort.updates, sort.events, now);
  storage_->plans().Prune(options_.keep_plans).IgnoreError();
  events_.Notify();
  return true;
}

absl::StatusOr<bool> Controller::KeepPlan(const core::Snapshot& snapshot, int64_t* plan_version) {
  *plan_version = snapshot.plan->plan.version;
  {
    absl::MutexLock lock(&mu_);  // a final plan for these inputs: nothing left to refine
    refine_fingerprint_.clear();
    refine_request_.reset();
    refine_result_.reset();
  }
  MarkScheduled(snapshot, *plan_version);
  return RefreshPriorities(snapshot, plan_version);
}

Controller::JobSort Controller::SortJobs(const std::vector<core::Job>& jobs,
                                         const core::Topology& topology, int64_t now) const {
  JobSort sort;
  for (const core::Job& job : jobs) {
    auto problems = core::ValidateJobSpec(job.spec, &topology, "");
    if (problems.empty()) {
      sort.placeable.push_back(job);
      continue;
    }
    bool missing_host = false;
    for (const auto& p : problems) missing_host |= p.kind == core::ProblemKind::kUnknownNode;
    // A spec that is invalid whatever the topology (stored before a limit existed) never
    // becomes placeable: it fails rather than waiting forever.
    const bool invalid = !core::ValidateJobSpec(job.spec, nullptr, "").empty();
    if (missing_host || invalid) {
      core::JobUpdate u;
      u.state = core::JobState::kFailed;
      u.failure_reason = core::FormatProblems(problems);
      sort.updates.push_back({job.id, u});
      sort.events.push_back(MakeEvent(now, "job_failed", job.id, u.failure_reason->substr(0, 500)));
    } else if (job.state != core::JobState::kPending) {
      core::JobUpdate u;
      u.state = core::JobState::kPending;
      sort.updates.push_back({job.id, u});
      sort.events.push_back(
          MakeEvent(now, "job_unplaceable", job.id, core::FormatProblems(problems)));
    }
  }
  return sort;
}

absl::StatusOr<Controller::PlannedJobs> Controller::PlanJobs(
    const core::Topology& topology, const std::vector<core::Job>& placeable,
    const core::Plan* previous) {
  auto start = std::chrono::steady_clock::now();
  // Incremental: admit onto the plan in force (milliseconds) and refine in the background; the
  // first plan (nothing to admit onto) is the full plan either way.
  PlannedJobs planned;
  if (options_.incremental && previous != nullptr) {
    scheduler::PlanRequest request;
    request.topology = &topology;
    request.jobs = placeable;
    request.previous = previous;
    request.now_ms = clock_();
    request.options = PlannerOptionsOf();
    auto admitted = scheduler::AdmitJobs(request);
    if (!admitted.ok()) return admitted.status();
    spdlog::info("event=admission kept={} admitted={} removed={} full={}", admitted->kept.size(),
                 admitted->admitted.size(), admitted->removed.size(), admitted->full);
    planned.plan = admitted->output.plan;
    planned.admission = std::move(*admitted);
  } else {
    spdlog::info("event=full_plan reason={}",
                 previous == nullptr ? "no plan in force" : "not incremental");
    auto plan = ComputePlan(topology, placeable, previous);
    if (!plan.ok()) return plan.status();
    planned.plan = std::move(*plan);
  }
  planned.solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  planned.plan.solve_ms = planned.solve_ms;
  return planned;
}

absl::StatusOr<int64_t> Controller::SavePlan(const core::Topology& topology,
                                             const std::string& fingerprint, PlannedJobs planned,
                                             const core::Plan* previous,
                                             const std::vector<core::Job>& placeable, int64_t now) {
  core::Plan& plan = planned.plan;
  const double solve_ms = planned.solve_ms;
  // An admission plan that kept jobs is provisional until the refiner's full plan replaces it.
  const bool provisional = planned.admission.has_value() && !planned.admission->full;
  plan.fingerprint = provisional ? absl::StrCat("admitted:", fingerprint) : fingerprint;
  plan.version = 0;  // next version
  auto intents = core::DeriveSwitchIntents(topology, plan);
  std::vector<core::Event> plan_events = {
      MakeEvent(now, "plan_saved", std::nullopt,
                absl::StrFormat("planned %d job(s) with %s in %.1f ms", plan.jobs.size(),
                                plan.algorithm, solve_ms))};
  // InGo: jobs whose batch size changed (docs/batch-size.md); workers read it from /config.
  for (const auto& [id, message] : batch_refit_.NoteBatchChanges(previous, plan, now)) {
    plan_events.push_back(MakeEvent(now, "job_batch_size", id, message));
  }
  if (provisional) {
    const scheduler::AdmissionOutput& admission = *planned.admission;
    plan_events[0].message = absl::StrFormat(
        "admitted %d job(s), removed %d, kept %d unchanged in %.1f ms (full re-plan in the "
        "background)",
        admission.admitted.size(), admission.removed.size(), admission.kept.size(), solve_ms);
    plan_events.push_back(MakeEvent(now, "plan_admitted", std::nullopt, plan_events[0].message));
  }
  auto version = storage_->plans().Save(plan, intents, now, plan_events);
  if (!version.ok()) return version.status();
  metrics_.ObservePlan(solve_ms / 1000.0);  // admissions and full plans alike
  stats_.CountReplan(now);
  spdlog::info("event=plan_saved version={} jobs={} solve_ms={:.1f} admitted={}", *version,
               plan.jobs.size(), solve_ms, provisional);
  absl::MutexLock lock(&mu_);
  refine_result_.reset();  // an older refinement is for other inputs
  refine_request_.reset();
  refine_fingerprint_.clear();
  if (provisional) {
    refine_fingerprint_ = fingerprint;
    refine_request_ = RefineRequest{fingerprint, *version, topology, placeable, plan, now};
    refine_request_->previous.version = *version;
  }
  return *version;
}

void Controller::ScheduleJobs(const std::vector<core::Job>& placeable, int64_t plan_version,
                              int64_t now, JobSort* sort) const {
  for (const core::Job& job : placeable) {
    if (job.state == core::JobState::kPending) {
      core::JobUpdate u;
      u.state = core::JobState::kScheduled;
      sort->updates.push_back({job.id, u});
      sort->events.push_back(MakeEvent(now, "job_scheduled", job.id,
                                       absl::StrCat("scheduled in plan ", plan_version)));
    }
  }
}

}  // namespace inac::server
