// Offline maintenance of a controller database, behind `inac db check|backup|audit|prune`.
// check, backup and audit open the source read-only and take no controller lock, so they are safe
// against a running controller (WAL readers do not block the writer) and never modify the source.
// prune writes, so it takes the controller's lock (storage/file_lock.h) and refuses while a
// controller runs on the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/stores.h"

namespace inac::storage {

struct CheckReport {
  std::string path;
  int schema_version = 0;              // PRAGMA user_version (0: no INAC schema yet)
  int supported_version = 0;           // LatestSchemaVersion() of this binary
  std::vector<std::string> integrity;  // PRAGMA integrity_check rows: {"ok"} when healthy
  std::vector<std::pair<std::string, int64_t>> counts;  // rows per INAC table present
  std::vector<std::pair<std::string, int64_t>> jobs_by_state;

  // Integrity ok and a schema version this binary can open.
  bool ok() const;
};

// Runs PRAGMA integrity_check and reads the schema version and row counts of `path`.
// NotFound if the file does not exist; FailedPrecondition if it is not a SQLite database or not an
// INAC one; other errors from SQLite as in storage/sqlite_error.h. A corrupt database is reported
// in `integrity`, not as an error status.
absl::StatusOr<CheckReport> CheckDatabase(const std::string& path);

// Copies `from` to a new file `to` with SQLite's online backup API (a consistent snapshot even
// while a controller writes). Written to a temporary file next to `to` and moved into place only
// when complete, so `to` is either absent or a whole database. AlreadyExists if `to` exists (it is
// never overwritten); NotFound if `from` does not exist; FailedPrecondition if `from` is not a
// SQLite database. Returns the number of pages copied.
absl::StatusOr<int64_t> BackupDatabase(const std::string& from, const std::string& to);

// The audit log of `path` (read-only, no lock: safe while a controller serves). Errors as
// CheckDatabase; FailedPrecondition for a database older than schema version 2 (no audit log
// yet); InvalidArgument for a bad filter (core::AuditLog::List).
absl::StatusOr<core::AuditPage> ListAudit(const std::string& path, const core::AuditFilter& filter);

struct PruneOptions {
  // Ages, not timestamps: terminal jobs last updated more than this long before `now_ms`, audit
  // entries older than this. nullopt: that kind is not pruned. Each must be > 0.
  std::optional<int64_t> finished_older_than_ms{};
  std::optional<int64_t> audit_older_than_ms{};
  bool dry_run = false;       // count only; the file is not modified (not even migrated)
  int64_t now_ms = 0;         // 0: the system clock
  int64_t batch_rows = 1000;  // rows per transaction
};

struct PruneReport {
  bool dry_run = false;
  int64_t finished_jobs = 0;     // terminal jobs removed (or that would be)
  int64_t idempotency_keys = 0;  // their idempotency keys
  int64_t events = 0;            // their events
  int64_t audit_entries = 0;
};

// Removes (or with dry_run counts) the finished jobs and audit entries older than `options` says,
// with storage/retention.h's batched prune -- what a controller's retention does, for a database
// no controller serves. Takes the controller's lock on "<path>.lock" for the whole run, dry run
// included: Unavailable naming the holder's pid while a controller (or another prune) has the
// file. A real run opens the database as the controller does, so an older schema is migrated
// first. NotFound if `path` does not exist (it is never created); FailedPrecondition if it is not
// an INAC database or its schema is newer than this binary; InvalidArgument for an age <= 0 or
// neither age given.
absl::StatusOr<PruneReport> PruneDatabase(const std::string& path, const PruneOptions& options);

}  // namespace inac::storage
