#include "storage/retention.h"

#include <chrono>
#include <thread>

#include "storage/store_rules.h"

namespace inac::storage {

namespace {

// Runs `batch` until it deletes fewer than `rows`; adds the deleted count to *total.
absl::Status Drain(const std::function<absl::StatusOr<int64_t>()>& batch, int64_t rows,
                   int pause_ms, int64_t* total, int64_t* batches,
                   const std::function<bool()>& stop) {
  while (!stop || !stop()) {
    absl::StatusOr<int64_t> deleted = batch();
    if (!deleted.ok()) return deleted.status();
    *total += *deleted;
    ++*batches;
    if (*deleted < rows) break;
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PruneExpired(core::Storage& storage, const RetentionCutoffs& cutoffs,
                          RetentionResult* result, const std::function<bool()>& stop) {
  if (absl::Status s = ValidatePruneBatch(cutoffs.batch_rows); !s.ok()) return s;
  if (cutoffs.pause_ms < 0) return absl::InvalidArgumentError("pause must not be negative");
  const int64_t rows = cutoffs.batch_rows;
  if (cutoffs.finished_jobs_before_ms) {
    const int64_t before = *cutoffs.finished_jobs_before_ms;
    absl::Status s = Drain([&] { return storage.jobs().PruneFinished(before, rows); }, rows,
                           cutoffs.pause_ms, &result->jobs, &result->batches, stop);
    if (!s.ok()) return s;
  }
  if (cutoffs.audit_before_ms) {
    const int64_t before = *cutoffs.audit_before_ms;
    absl::Status s = Drain([&] { return storage.audit().Prune(before, rows); }, rows,
                           cutoffs.pause_ms, &result->audit, &result->batches, stop);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace inac::storage
