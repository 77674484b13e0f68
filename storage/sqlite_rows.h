// Row codecs and queries shared by the SQLite repositories and the snapshot read (internal to
// storage/). Every function runs inside a transaction opened by SqliteDatabase::Write/Read and may
// throw SQLite::Exception (converted by the caller's GuardSqlite); decoding errors of stored JSON
// come back as DataLoss.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <SQLiteCpp/Database.h>

#include "absl/status/statusor.h"
#include "core/stores.h"

namespace inac::storage::rows {

// Decoded job specs by job id. Specs never change after Create, so a decoded spec stays valid.
using SpecMap = std::unordered_map<core::JobId, std::shared_ptr<const core::JobSpec>>;

// --- jobs ---
absl::StatusOr<core::Job> ReadJob(SQLite::Database& db, core::JobId id);  // NotFound if absent
absl::StatusOr<core::JobPage> ListJobs(SQLite::Database& db, const core::JobFilter& filter);
// All jobs not in a terminal state, by id. Specs found in `known` (may be null) are not decoded
// again; every returned job's spec is put into `decoded` (may be null).
absl::StatusOr<std::vector<core::Job>> ReadActiveJobs(SQLite::Database& db,
                                                      const SpecMap* known = nullptr,
                                                      SpecMap* decoded = nullptr);
// Inserts a pending job and returns its id.
core::JobId InsertJob(SQLite::Database& db, const core::JobSpec& spec, int64_t now_ms);
// Writes the mutable columns (state, progress, failure_reason, updated_ms) of `job`.
void UpdateJobRow(SQLite::Database& db, const core::Job& job);

// --- events ---
// Appends `events` (job_id defaulting to `default_job_id` when unset); returns the last seq.
int64_t AppendEvents(SQLite::Database& db, const std::vector<core::Event>& events,
                     std::optional<core::JobId> default_job_id = std::nullopt);
int64_t LastEventSeq(SQLite::Database& db);

// --- topology, plans, switches ---
// The version of the stored topology (0 if none), without decoding it.
int64_t TopologyVersion(SQLite::Database& db);
absl::StatusOr<std::optional<core::TopologyRecord>> ReadTopology(SQLite::Database& db);
// NotFound for an unknown version.
absl::StatusOr<core::PlanRecord> ReadPlan(SQLite::Database& db, int64_t version);
absl::StatusOr<std::vector<core::SwitchIntent>> ReadIntents(SQLite::Database& db, int64_t version);
std::vector<core::SwitchState> ReadSwitchStates(SQLite::Database& db,
                                                const std::string* only_switch = nullptr);

}  // namespace inac::storage::rows
