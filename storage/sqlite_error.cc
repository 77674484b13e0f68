#include "storage/sqlite_error.h"

#include <new>
#include <string>

#include <SQLiteCpp/Exception.h>
#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace inac::storage {

absl::StatusCode CodeForSqliteResult(int result_code) {
  switch (result_code & 0xff) {
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kAlreadyExists;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status StatusFromSqliteCode(int result_code, absl::string_view detail, absl::string_view file,
                                  absl::string_view action) {
  std::string message = absl::StrCat(file, ": ", action, ": ", detail);
  if ((result_code & 0xff) == SQLITE_NOTADB) {
    message = absl::StrCat(file, ": ", action, ": file is not a SQLite database");
  } else if ((result_code & 0xff) == SQLITE_FULL) {
    absl::StrAppend(&message, " (disk or size limit full; the change was not written)");
  }
  return absl::Status(CodeForSqliteResult(result_code), message);
}

absl::Status StatusFromException(const std::exception& e, absl::string_view file,
                                 absl::string_view action) {
  if (const auto* sqlite = dynamic_cast<const SQLite::Exception*>(&e)) {
    int code = sqlite->getErrorCode();
    if (code == -1) return absl::InternalError(absl::StrCat(file, ": ", action, ": ", e.what()));
    return StatusFromSqliteCode(sqlite->getExtendedErrorCode(), e.what(), file, action);
  }
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(file, ": ", action, ": out of memory"));
  }
  return absl::InternalError(absl::StrCat(file, ": ", action, ": ", e.what()));
}

}  // namespace inac::storage
