// `inac db check|backup|prune|audit --db FILE`: offline maintenance of the controller database
// (storage/maintenance.h).
//
//   check   integrity, schema version, row counts (read-only, safe while serving)
//   backup  --to NEW: consistent copy (read-only on the source, safe while serving)
//   prune   --finished-older-than 7d [--audit-older-than 90d] [--dry-run]: removes finished jobs
//           (with their idempotency keys and events) and audit entries older than the ages, as
//           the controller's retention does; takes the controller's lock, so it refuses while a
//           controller serves the file (stop it, or rely on its "retention" configuration)
//   audit   [--actor NAME] [--after SEQ] [--limit N] [--json]: the audit log of API writes
//           (read-only, safe while serving)
//
// Durations: a positive whole number and one unit d, h, m or s ("7d", "12h", "30m"), at most
// 36500 days; anything else is bad input.
//
// Exit codes: 0 ok; 2 bad input (file missing, not a SQLite/INAC database, backup target exists,
// a malformed duration); 1 the check found problems (integrity or a schema newer than this
// binary), a controller holds the database (prune), or another failure.
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inac::cli {

void AddDbCommand(CLI::App& app);

// "7d", "12h", "30m", "45s" -> milliseconds. InvalidArgument for anything else: no sign, no
// space, no fraction, no zero, one unit, at most 36500 days.
absl::StatusOr<int64_t> ParseDurationMs(absl::string_view text);

}  // namespace inac::cli
