#include "server/job_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace inac::server {

JobManager::JobManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet,
                       StatsHistory* stats, DataPathBook* data_paths, BatchRefit* batch_refit,
                       Clock clock, std::function<void()> wake)
    : storage_(storage),
      events_(events),
      fleet_(fleet),
      stats_(stats),
      data_paths_(data_paths),
      batch_refit_(batch_refit),
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
  if (result.ok() && result->created) stats_->CountSubmission(clock_());
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
  if (updated.ok()) data_paths_->Drop(id);  // after the commit: see ReportDataPath
  return updated;
}

absl::StatusOr<core::Job> JobManager::ReportProgress(core::JobId id, int64_t iterations_done,
                                                     std::optional<double> loss) {
  auto job = CommitProgress(id, iterations_done, loss);
  if (job.ok()) {
    stats_->ObserveProgress(id, clock_(), job->iterations_done);
    if (core::IsTerminal(job->state)) data_paths_->Drop(id);  // completed
  }
  return job;
}

absl::StatusOr<core::Job> JobManager::CommitProgress(core::JobId id, int64_t iterations_done,
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

absl::Status JobManager::ReportGradientStats(core::JobId id, double grad_sqr_local,
                                             double grad_sqr_global) {
  auto job = GetJob(id);
  if (!job.ok()) return job.status();
  // The batch the job runs at: its plan's, else the submitted one.
  int batch = job->spec.batch_size;
  if (auto plan = storage_->plans().Latest(); plan.ok() && plan->has_value()) {
    if (const core::JobPlan* jp = (*plan)->plan.FindJob(id); jp && jp->batch_size > 0) {
      batch = jp->batch_size;
    }
  }
  auto published = batch_refit_->Add(*job, batch, grad_sqr_local, grad_sqr_global);
  if (!published.ok()) return published.status();
  if (*published) {
    const double noise_scale = batch_refit_->Published(id).value_or(0);
    spdlog::info("event=noise_scale_refit job={} noise_scale={:.1f}", id, noise_scale);
    // Kept in the event log so a restart restores it (BatchRefit::Restore).
    auto appended = storage_->events().Append(MakeEvent(
        clock_(), "noise_scale_refit", id,
        absl::StrCat("gradient noise scale refitted to ", absl::StrFormat("%.1f", noise_scale)),
        nlohmann::json{{"noise_scale", noise_scale}}.dump()));
    if (!appended.ok()) {
      spdlog::warn("event=noise_scale_refit_not_stored job={} error=\"{}\"", id,
                   std::string(appended.status().message()));
    }
    events_->Notify();
    wake_();
  }
  return absl::OkStatus();
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

absl::StatusOr<JobDataPath> JobManager::ReportDataPath(core::JobId id,
                                                       const DataPathReport& report) {
  auto job = GetJob(id);
  if (!job.ok()) return job.status();
  auto not_accepted = [id](core::JobState state) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", std::string(core::JobStateName(state)),
                     "; data-path reports are accepted only while it is scheduled or running"));
  };
  if (job->state != core::JobState::kScheduled && job->state != core::JobState::kRunning) {
    return not_accepted(job->state);
  }
  if (std::find(job->spec.workers.begin(), job->spec.workers.end(), report.worker) ==
      job->spec.workers.end()) {
    return core::WithField(
        absl::InvalidArgumentError(absl::StrCat("worker: ", core::QuoteForMessage(report.worker),
                                                " is not a worker of job ", id)),
        "worker");
  }
  DataPathReport stored = report;
  stored.updated_ms = clock_();
  JobDataPath path = data_paths_->Record(id, std::move(stored));
  // A job that ended meanwhile keeps no report. Every end (CancelJob, ReportProgress, the loop's
  // Controller::ApplyJobUpdates) drops the job's reports after its commit, so either that drop
  // follows this record, or this read sees the end.
  auto after = GetJob(id);
  if (!after.ok() || core::IsTerminal(after->state)) {
    data_paths_->Drop(id);
    if (!after.ok()) return after.status();
    return not_accepted(after->state);
  }
  return path;
}

std::optional<JobDataPath> JobManager::DataPath(core::JobId id) { return data_paths_->Get(id); }

}  // namespace inac::server
