// Retention of finished jobs and audit entries (docs/storage.md "Retention"): the batched prune
// that the controller runs periodically (server/retention_worker.h) and `inac db prune` runs
// offline (storage/maintenance.h). Written against core/stores.h only, so both storages run it.
//
// Each batch is one transaction of at most `batch_rows` rows (JobStore::PruneFinished,
// AuditLog::Prune), followed by a short pause: a writer (a job submission, the controller loop)
// waits for about one batch, never for the whole prune (bench/retention_bench: 75 ms per batch of
// 1,000 finished jobs with their keys and events, concurrent submissions 76 ms at most).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/status.h"
#include "core/stores.h"

namespace inac::storage {

struct RetentionCutoffs {
  // Terminal jobs with updated_ms < this are deleted, with their idempotency keys and events;
  // nullopt keeps them.
  std::optional<int64_t> finished_jobs_before_ms{};
  // Audit entries with time_ms < this are deleted; nullopt keeps them.
  std::optional<int64_t> audit_before_ms{};
  int64_t batch_rows = 1000;  // rows per transaction (> 0)
  // Pause between two batches (>= 0), so that writers waiting for the database get it: the
  // process's write lock is not fair, and without a pause the next batch usually takes it again
  // (measured: a concurrent submission then waited for several batches). 0 for an offline prune.
  int pause_ms = 10;
};

struct RetentionResult {
  int64_t jobs = 0;     // finished jobs deleted
  int64_t audit = 0;    // audit entries deleted
  int64_t batches = 0;  // transactions committed
};

// Prunes what `cutoffs` names, batch after batch, until nothing of that age is left or `stop`
// (may be empty; asked between batches) returns true. `*result` counts what was deleted, also
// when an error ends the prune early (every committed batch stays deleted). Returns the first
// storage error; InvalidArgument for batch_rows <= 0.
absl::Status PruneExpired(core::Storage& storage, const RetentionCutoffs& cutoffs,
                          RetentionResult* result, const std::function<bool()>& stop = nullptr);

}  // namespace inac::storage
