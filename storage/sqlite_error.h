// The one place where exceptions from SQLiteCpp (and anything else thrown while talking to
// SQLite) become absl::Status (docs/architecture.md "Conventions": one conversion per edge).
#pragma once

#include <exception>
#include <type_traits>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace inac::storage {

// What the database is being used for when SQLite reports an error; it decides what the error
// means to the caller.
enum class SqliteUse {
  // Opening a database (SqliteDatabase::Open) and the offline maintenance commands: the file is
  // the operator's input, and a refusal says what is wrong with it.
  kOpen,
  // A database the running controller serves from (every store call after Open): no SQLite error
  // is the caller's fault, so every fault of the file or the disk is Unavailable (503 at the REST
  // edge, never a 4xx).
  kServing,
};

// Maps an SQLite result code (primary or extended) to a canonical status code.
//   both uses:  FULL, NOMEM -> ResourceExhausted; BUSY, LOCKED, IOERR*, PROTOCOL -> Unavailable;
//               CONSTRAINT -> AlreadyExists (the stores check every caller error -- idempotency
//               conflicts, versions, state transitions -- before they write, so no request
//               reaches it); anything else (ERROR, MISUSE, SCHEMA, ...) -> Internal.
//   kOpen:      NOTADB, CANTOPEN -> FailedPrecondition; PERM, READONLY*, AUTH -> PermissionDenied;
//               CORRUPT* -> DataLoss.
//   kServing:   NOTADB, CANTOPEN*, PERM, READONLY*, CORRUPT*, NOLFS -> Unavailable.
absl::StatusCode CodeForSqliteResult(int result_code, SqliteUse use = SqliteUse::kOpen);

// True for the results that mean the database file itself is damaged (CORRUPT*, NOTADB): a
// property of the file that does not go away by retrying.
bool IsCorruption(int result_code);

// Converts an exception caught while doing `action` on database `file` into a status whose
// message names both, e.g. "/var/lib/inac.db: insert job: database or disk is full".
// SQLite::Exception is mapped with CodeForSqliteResult; std::bad_alloc -> ResourceExhausted;
// other std::exception -> Internal.
absl::Status StatusFromException(const std::exception& e, absl::string_view file,
                                 absl::string_view action, SqliteUse use = SqliteUse::kOpen);

// Status for a raw SQLite result code (used where the C API is called directly).
absl::Status StatusFromSqliteCode(int result_code, absl::string_view detail, absl::string_view file,
                                  absl::string_view action, SqliteUse use = SqliteUse::kOpen);

// Runs `fn` (returning absl::Status or absl::StatusOr<T>) and converts any exception it throws
// with StatusFromException.
template <typename Fn>
auto GuardSqlite(absl::string_view file, absl::string_view action, Fn&& fn,
                 SqliteUse use = SqliteUse::kOpen) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return StatusFromException(e, file, action, use);
  }
}

}  // namespace inac::storage
