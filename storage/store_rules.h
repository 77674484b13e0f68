// Semantic rules shared by every implementation of core/stores.h (SqliteStorage and
// InMemoryStorage), so that both behave the same by construction: argument checks and the one
// function that applies a JobUpdate.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "core/stores.h"

namespace inac::storage {

// InvalidArgument for an empty kind or data_json that is not a JSON document.
absl::Status ValidateEvent(const core::Event& event);
absl::Status ValidateEvents(const std::vector<core::Event>& events);
// InvalidArgument for limit <= 0.
absl::Status ValidateEventFilter(const core::EventFilter& filter);
absl::Status ValidateJobFilter(const core::JobFilter& filter);
// InvalidArgument for an empty or repeated switch id.
absl::Status ValidateIntents(const std::vector<core::SwitchIntent>& intents);
// InvalidArgument for an empty switch id.
absl::Status ValidateSwitchState(const core::SwitchState& state);
// InvalidArgument for an empty actor, role, method or path, or a status outside 100..599.
absl::Status ValidateAuditEntry(const core::AuditEntry& entry);
// InvalidArgument for limit <= 0 or after_seq < 0.
absl::Status ValidateAuditFilter(const core::AuditFilter& filter);
// InvalidArgument for max_rows <= 0 (AuditLog::Prune, JobStore::PruneFinished).
absl::Status ValidatePruneBatch(int64_t max_rows);

// Applies `update` to `job` (updated_ms = now_ms). A state change must pass core::CheckTransition
// (FailedPrecondition naming the job; `job` unchanged); the same state again is not a change.
// InvalidArgument for negative iterations_done.
absl::Status ApplyJobUpdate(const core::JobUpdate& update, int64_t now_ms, core::Job& job);

// Whether `job` matches the state and tenant parts of `filter` (not the cursor).
bool JobMatches(const core::JobFilter& filter, const core::Job& job);

}  // namespace inac::storage
