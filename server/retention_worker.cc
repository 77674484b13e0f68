#include "server/retention_worker.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace inac::server {

RetentionWorker::RetentionWorker(core::Storage* storage, EventHub* events, Metrics* metrics,
                                 Clock clock, RetentionOptions options)
    : storage_(storage),
      events_(events),
      metrics_(metrics),
      clock_(std::move(clock)),
      options_(options) {}

RetentionWorker::~RetentionWorker() { Stop(); }

void RetentionWorker::Start() {
  if (options_.finished_jobs_ms <= 0 && options_.audit_ms <= 0) {
    spdlog::info(
        "event=retention_disabled reason=\"finished jobs and audit entries kept forever\"");
    return;
  }
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { ThreadMain(); });
}

void RetentionWorker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    stopping_ = true;
    started_ = false;
  }
  if (thread_.joinable()) thread_.join();
}

bool RetentionWorker::stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

absl::StatusOr<storage::RetentionResult> RetentionWorker::RunOnce() {
  const int64_t now = clock_();
  storage::RetentionCutoffs cutoffs;
  if (options_.finished_jobs_ms > 0) {
    cutoffs.finished_jobs_before_ms = now - options_.finished_jobs_ms;
  }
  if (options_.audit_ms > 0) cutoffs.audit_before_ms = now - options_.audit_ms;
  cutoffs.batch_rows = options_.batch_rows;
  storage::RetentionResult result;
  absl::Status status =
      storage::PruneExpired(*storage_, cutoffs, &result, [this] { return stopping(); });
  metrics_->CountPruned(result.jobs, result.audit);
  if (result.jobs > 0 || result.audit > 0) {
    const std::string message =
        absl::StrCat("retention removed ", result.jobs, " finished job(s) (with their idempotency ",
                     "keys and events) and ", result.audit, " audit entries, in ", result.batches,
                     " transaction(s)");
    spdlog::info("event=retention_pruned jobs={} audit={} batches={}", result.jobs, result.audit,
                 result.batches);
    events_->Log("retention_pruned", std::nullopt, message);
  }
  if (!status.ok()) {
    spdlog::error("event=retention_failed jobs={} audit={} error=\"{}\"", result.jobs, result.audit,
                  status.ToString());
    return status;
  }
  return result;
}

void RetentionWorker::ThreadMain() {
  auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    RunOnce().IgnoreError();  // logged; the next run retries
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop), absl::Milliseconds(options_.period_ms))) {
      return;
    }
  }
}

}  // namespace inac::server
