// Reading a whole file, with the errors every INAC tool reports the same way.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace inac::core {

// The whole file as a string; NotFound / PermissionDenied / Internal naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace inac::core
