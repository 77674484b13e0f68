#include "server/job_manager.h"

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"

namespace inac::server {

JobManager::JobManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet, Clock clock,
                       std::function<void()> wake)
    : storage_(storage),
      events_(events),
      fleet_(fleet),
      clock_(std::move(clock)),
      wake_(std::move(wake)) {}

absl::StatusOr<core::CreateJobResult> JobManager::SubmitJob(
    const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) {
  auto topology = storage_->topology().Get();
  if (!topology.ok()) return topology.status();
  const core::Topology* topo = topology->has_value() ? &(*topology)->topology : nullptr;
  auto problems = core::ValidateJobSpec(spec, topo, "");
  if (!problems.empty()) return core::ProblemsError(problems);
  const int64_t now = clock_();
  auto result = storage_->jobs().Create(
      spec, now, idempotency,
      {MakeEvent(now, "job_submitted", std::nullopt,
                 absl::StrCat("job \"", spec.name, "\" submitted by tenant ", spec.tenant))});
  if (result.ok()) {
    events_->Notify();
    if (result->created) wake_();
  }
  return result;
}

absl::StatusOr<core::Job> JobManager::CancelJob(core::JobId id) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  // The store treats cancelled -> cancelled as a no-op; the contract is FailedPrecondition for
  // every terminal job (and no second job_cancelled event).
  if (core::IsTerminal(job->state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is already ", std::string(core::JobStateName(job->state))));
  }
  core::JobUpdate u;
  u.state = core::JobState::kCancelled;
  const int64_t now = clock_();
  auto updated =
      storage_->jobs().Update(id, u, now, {MakeEvent(now, "job_cancelled", id, "cancelled")});
  if (updated.ok()) {
    events_->Notify();
    wake_();
  }
  return updated;
}

absl::StatusOr<core::Job> JobManager::ReportProgress(core::JobId id, int64_t iterations_done,
                                                     std::optional<double> loss) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  if (job->state != core::JobState::kScheduled && job->state != core::JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(core::JobStateName(job->state)),
                     "; progress is accepted only while it is scheduled or running"));
  }
  if (iterations_done < job->iterations_done) {
    return core::WithField(
        absl::InvalidArgumentError(absl::StrCat("iterations_done: went backwards (",
                                                iterations_done, " < ", job->iterations_done, ")")),
        "iterations_done");
  }
  if (iterations_done > job->spec.iterations) {
    return core::WithField(absl::InvalidArgumentError(absl::StrCat(
                               "iterations_done: ", iterations_done, " exceeds the job's ",
                               job->spec.iterations, " iterations")),
                           "iterations_done");
  }
  const int64_t now = clock_();
  core::JobUpdate u;
  u.iterations_done = iterations_done;
  u.loss = loss;
  if (iterations_done != job->spec.iterations) return storage_->jobs().Update(id, u, now);
  std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
  if (job->state == core::JobState::kScheduled) {
    core::JobUpdate run;
    run.state = core::JobState::kRunning;
    updates.push_back({id, run});
  }
  u.state = core::JobState::kCompleted;
  updates.push_back({id, u});
  auto s = storage_->jobs().UpdateMany(
      updates, now,
      {MakeEvent(now, "job_completed", id,
                 absl::StrCat("completed after ", iterations_done, " iterations"))});
  if (!s.ok()) return s;
  events_->Notify();
  wake_();
  return storage_->jobs().Get(id);
}

absl::StatusOr<core::Job> JobManager::GetJob(core::JobId id) { return storage_->jobs().Get(id); }

absl::StatusOr<core::JobPage> JobManager::ListJobs(const core::JobFilter& filter) {
  return storage_->jobs().List(filter);
}

absl::StatusOr<JobConfig> JobManager::GetJobConfig(core::JobId id) {
  auto job = storage_->jobs().Get(id);
  if (!job.ok()) return job.status();
  auto plan = storage_->plans().Latest();
  if (!plan.ok()) return plan.status();
  if (!plan->has_value() || (*plan)->plan.FindJob(id) == nullptr) {
    return BuildJobConfig(*job, nullptr, {}, nullptr);
  }
  auto topology = storage_->topology().Get();
  if (!topology.ok()) return topology.status();
  auto intents = storage_->plans().Intents((*plan)->plan.version);
  if (!intents.ok()) return intents.status();
  return BuildJobConfig(*job, &(*plan)->plan, *intents,
                        topology->has_value() ? &(*topology)->topology : nullptr);
}

std::vector<InaCounterSample> JobManager::JobCounters(core::JobId id) {
  return fleet_->JobCounters(id);
}

}  // namespace inac::server
