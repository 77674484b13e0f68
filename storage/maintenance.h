// Offline maintenance of a controller database, behind `inac db check` and `inac db backup`.
// Both open the source read-only and take no controller lock, so they are safe against a running
// controller (WAL readers do not block the writer) and never modify the source.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

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

}  // namespace inac::storage
