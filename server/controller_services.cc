// The services the controller answers itself (server/controller.h): plans (the stored one and
// what-if previews), events, the audit log, health and metrics. Jobs and topology are the
// managers' (server/job_manager.h, server/topology_manager.h), handed out by services().
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "core/validation.h"
#include "server/controller.h"

namespace inac::server {

absl::StatusOr<std::optional<core::PlanRecord>> Controller::CurrentPlan() {
  return storage_->plans().Latest();
}

absl::StatusOr<core::Plan> Controller::PreviewPlan(const core::JobSpec& spec) {
  auto snapshot = storage_->ReadSnapshot();
  if (!snapshot.ok()) return snapshot.status();
  if (!snapshot->topology) return absl::FailedPreconditionError("no topology has been loaded");
  const core::Topology& topology = snapshot->topology->topology;
  auto problems = core::ValidateJobSpec(spec, &topology, "");
  if (!problems.empty()) return core::ProblemsError(problems);
  std::vector<core::Job> jobs;
  for (const core::Job& job : snapshot->jobs) {
    if (core::ValidateJobSpec(job.spec, &topology, "").empty()) jobs.push_back(job);
  }
  core::Job candidate;
  candidate.id = 0;
  for (const core::Job& job : snapshot->jobs) candidate.id = std::max(candidate.id, job.id);
  candidate.id += 1000000;  // an id no stored job has
  candidate.spec = spec;
  candidate.created_ms = clock_();
  jobs.push_back(candidate);
  const core::Plan* previous = snapshot->plan ? &snapshot->plan->plan : nullptr;
  auto start = std::chrono::steady_clock::now();
  auto plan = ComputePlan(topology, jobs, previous);
  if (!plan.ok()) return plan.status();
  plan->solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (core::JobPlan& jp : plan->jobs) {
    if (jp.job_id == candidate.id) jp.job_id = 0;
  }
  return plan;
}

absl::StatusOr<std::vector<core::Event>> Controller::Events(const core::EventFilter& filter) {
  return storage_->events().List(filter);
}

int64_t Controller::WaitForEvents(int64_t after_seq, int timeout_ms) {
  return events_.WaitForEvents(after_seq, timeout_ms);
}

absl::Status Controller::RecordAudit(core::AuditEntry entry) {
  if (entry.time_ms == 0) entry.time_ms = clock_();
  return storage_->audit().Append(entry).status();
}

absl::StatusOr<core::AuditPage> Controller::ListAudit(const core::AuditFilter& filter) {
  return storage_->audit().List(filter);
}

bool Controller::LoopAlive() {
  absl::MutexLock lock(&mu_);
  if (!started_) return false;
  if (passes_done_ == 0) return true;  // first pass still running
  return clock_() - last_pass_ms_ < 5 * options_.timer_ms + 60000;
}

absl::Status Controller::Ready() {
  if (absl::Status health = storage_->Health(); !health.ok()) {
    return absl::UnavailableError(absl::StrCat("database: ", health.message()));
  }
  auto last = storage_->events().LastSeq();
  if (!last.ok()) {
    return absl::UnavailableError(absl::StrCat("database: ", last.status().message()));
  }
  if (!LoopAlive()) return absl::UnavailableError("controller loop is not running");
  std::vector<std::string> down;
  for (const SwitchStatus& s : topology_.Switches()) {
    if (s.managed && !s.connected) down.push_back(s.id);
  }
  if (!down.empty()) {
    std::string list;
    for (size_t i = 0; i < down.size() && i < 10; ++i) {
      absl::StrAppend(&list, i ? ", " : "", down[i]);
    }
    return absl::UnavailableError(absl::StrCat(down.size(), " switch(es) unreachable: ", list));
  }
  return absl::OkStatus();
}

ControllerMetrics Controller::Metrics() {
  ControllerMetrics m = metrics_.Counters();
  {
    absl::MutexLock lock(&mu_);
    m.last_pass_ms = last_pass_ms_;
  }
  auto counts = storage_->jobs().CountByState();
  if (counts.ok()) m.jobs_by_state = *counts;
  m.switches = topology_.Switches();
  m.ina_counters = fleet_.Counters();
  std::stable_sort(m.ina_counters.begin(), m.ina_counters.end(),
                   [](const InaCounterSample& a, const InaCounterSample& b) {
                     return a.job_id < b.job_id;  // switch and tag order kept from the fleet
                   });
  return m;
}

std::string Controller::MetricsText() { return metrics_.Render(Metrics()); }

}  // namespace inac::server
