// Error-handling helpers shared by every layer: absl::Status / absl::StatusOr<T> with canonical
// codes (docs/architecture.md "Conventions"). No exceptions cross a layer boundary.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define INAC_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::absl::Status inac_status_ = (expr);        \
    if (!inac_status_.ok()) return inac_status_; \
  } while (0)

#define INAC_CONCAT_INNER_(a, b) a##b
#define INAC_CONCAT_(a, b) INAC_CONCAT_INNER_(a, b)

// `INAC_ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of a StatusOr or returns its status.
#define INAC_ASSIGN_OR_RETURN(lhs, expr) \
  INAC_ASSIGN_OR_RETURN_IMPL_(INAC_CONCAT_(inac_statusor_, __LINE__), lhs, expr)
#define INAC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

namespace inac::core {

// The request field a status is about (e.g. "jobs[0].workers[1]"), carried as a payload of the
// status, never parsed back out of its message: the REST layer puts it in the error body's
// `field`.
inline constexpr const char* kFieldPayloadUrl = "type.inac.dev/inac.Field";

inline absl::Status WithField(absl::Status status, const std::string& field) {
  if (!status.ok() && !field.empty()) status.SetPayload(kFieldPayloadUrl, absl::Cord(field));
  return status;
}

// The field of WithField, or "" when the status names none.
inline std::string FieldOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFieldPayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

}  // namespace inac::core
