#include "storage/sqlite_error.h"

#include <new>
#include <string>

#include <SQLiteCpp/Exception.h>
#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace inac::storage {

absl::StatusCode CodeForSqliteResult(int result_code, SqliteUse use) {
  const bool serving = use == SqliteUse::kServing;
  switch (result_code & 0xff) {
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
      return serving ? absl::StatusCode::kUnavailable : absl::StatusCode::kFailedPrecondition;
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return serving ? absl::StatusCode::kUnavailable : absl::StatusCode::kPermissionDenied;
    case SQLITE_AUTH:
      return serving ? absl::StatusCode::kInternal : absl::StatusCode::kPermissionDenied;
    case SQLITE_CORRUPT:
      return serving ? absl::StatusCode::kUnavailable : absl::StatusCode::kDataLoss;
    case SQLITE_NOLFS:
      return serving ? absl::StatusCode::kUnavailable : absl::StatusCode::kInternal;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kAlreadyExists;
    default:
      return absl::StatusCode::kInternal;
  }
}

bool IsCorruption(int result_code) {
  return (result_code & 0xff) == SQLITE_CORRUPT || (result_code & 0xff) == SQLITE_NOTADB;
}

absl::Status StatusFromSqliteCode(int result_code, absl::string_view detail, absl::string_view file,
                                  absl::string_view action, SqliteUse use) {
  std::string message = absl::StrCat(file, ": ", action, ": ", detail);
  if ((result_code & 0xff) == SQLITE_NOTADB) {
    message = absl::StrCat(file, ": ", action, ": file is not a SQLite database");
  } else if ((result_code & 0xff) == SQLITE_FULL) {
    absl::StrAppend(&message, " (disk or size limit full; the change was not written)");
  }
  if (use == SqliteUse::kServing && IsCorruption(result_code)) {
    absl::StrAppend(&message,
                    " (the database file is damaged; stop the controller and check it with "
                    "`inac db check`)");
  } else if (use == SqliteUse::kServing && (result_code & 0xff) == SQLITE_READONLY) {
    absl::StrAppend(&message, " (the database can no longer be written)");
  }
  return absl::Status(CodeForSqliteResult(result_code, use), message);
}

absl::Status StatusFromException(const std::exception& e, absl::string_view file,
                                 absl::string_view action, SqliteUse use) {
  if (const auto* sqlite = dynamic_cast<const SQLite::Exception*>(&e)) {
    int code = sqlite->getErrorCode();
    if (code == -1) return absl::InternalError(absl::StrCat(file, ": ", action, ": ", e.what()));
    return StatusFromSqliteCode(sqlite->getExtendedErrorCode(), e.what(), file, action, use);
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(file, ": ", action, ": out of memory"));
  }
  return absl::InternalError(absl::StrCat(file, ": ", action, ": ", e.what()));
}

}  // namespace inac::storage
