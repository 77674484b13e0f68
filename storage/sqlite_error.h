// The one place where exceptions from SQLiteCpp (and anything else thrown while talking to
// SQLite) become absl::Status (DESIGN.md "Conventions": one conversion per edge).
#pragma once

#include <exception>
#include <type_traits>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace inac::storage {

// Maps an SQLite primary result code to a canonical status code:
//   SQLITE_FULL -> ResourceExhausted; BUSY, LOCKED, IOERR, PROTOCOL -> Unavailable;
//   NOTADB, CANTOPEN -> FailedPrecondition; PERM, READONLY, AUTH -> PermissionDenied;
//   CORRUPT -> DataLoss; CONSTRAINT -> AlreadyExists; anything else -> Internal.
absl::StatusCode CodeForSqliteResult(int result_code);

// Converts an exception caught while doing `action` on database `file` into a status whose
// message names both, e.g. "/var/lib/inac.db: insert job: database or disk is full".
// SQLite::Exception is mapped with CodeForSqliteResult; std::bad_alloc -> ResourceExhausted;
// other std::exception -> Internal.
absl::Status StatusFromException(const std::exception& e, absl::string_view file,
                                 absl::string_view action);

// Status for a raw SQLite result code (used where the C API is called directly).
absl::Status StatusFromSqliteCode(int result_code, absl::string_view detail, absl::string_view file,
                                  absl::string_view action);

// Runs `fn` (returning absl::Status or absl::StatusOr<T>) and converts any exception it throws
// with StatusFromException.
template <typename Fn>
auto GuardSqlite(absl::string_view file, absl::string_view action, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return StatusFromException(e, file, action);
  }
}

}  // namespace inac::storage
