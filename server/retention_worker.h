// Retention in the running controller (docs/storage.md "Retention"): finished jobs (completed,
// cancelled, failed) with their idempotency keys and events, and audit entries, are deleted once
// older than the configured ages -- at start and then every `period_ms`, on a thread of their own,
// so the control loop never waits for it. The work is storage/retention.h's batched prune: one
// transaction per `batch_rows` rows, so a large backlog delays a concurrent writer (a job
// submission, the loop's plan) by one batch at most. Each run that removed something appends a
// `retention_pruned` event and logs how many rows it removed; the counts are also in
// inac_retention_pruned_total{kind="jobs"|"audit"}.
//
// Thread safety: Start, Stop and RunOnce may be called from any thread.
#pragma once

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/stores.h"
#include "server/event_hub.h"
#include "server/metrics.h"
#include "storage/retention.h"

namespace inac::server {

struct RetentionOptions {
  static constexpr int64_t kDayMs = 24LL * 3600 * 1000;
  // A finished job is deleted this long after its last update (its completion, cancellation or
  // failure); 0 keeps finished jobs forever.
  int64_t finished_jobs_ms = 7 * kDayMs;
  // An audit entry is deleted this long after the request; 0 keeps the audit log forever.
  int64_t audit_ms = 90 * kDayMs;
  int64_t period_ms = 3600 * 1000;  // between runs (> 0)
  int64_t batch_rows = 1000;        // rows per transaction (> 0)
};

class RetentionWorker {
 public:
  // None owned; all must outlive the worker.
  RetentionWorker(core::Storage* storage, EventHub* events, Metrics* metrics, Clock clock,
                  RetentionOptions options);
  ~RetentionWorker();  // Stop()
  RetentionWorker(const RetentionWorker&) = delete;
  RetentionWorker& operator=(const RetentionWorker&) = delete;

  // Starts the thread: a run now, then one every period. Nothing when both ages are 0. No-op
  // when already started.
  void Start();
  // Ends the thread; a run in progress stops after its current batch. Idempotent.
  void Stop();

  // One run on the calling thread, with the clock's now (tests; the thread calls it too). Returns
  // what was removed, or the storage error that ended the run (batches before it stay deleted).
  absl::StatusOr<storage::RetentionResult> RunOnce();

 private:
  void ThreadMain();
  bool stopping();

  core::Storage* storage_;
  EventHub* events_;
  Metrics* metrics_;
  Clock clock_;
  const RetentionOptions options_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace inac::server
