// Small helpers shared by the CLI verbs: reading files, printing problems.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/topology.h"
#include "core/validation.h"

namespace inac::server {

// Whole file as a string; NotFound / PermissionDenied / Internal naming the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes "<path>: <problem>" lines to stderr, one per problem.
void PrintProblems(const std::string& file, const std::vector<core::Problem>& problems);

// Reads and validates a topology file. On failure prints every problem and returns nullopt.
std::optional<core::Topology> LoadTopologyFile(const std::string& path);

}  // namespace inac::server
