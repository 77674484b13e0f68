// Small helpers shared by the CLI verbs: reading files, printing problems.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/topology.h"
#include "core/validation.h"

namespace CLI {
class App;
}  // namespace CLI

namespace inac::cli {

// Writes "<path>: <problem>" lines to stderr, one per problem.
void PrintProblems(const std::string& file, const std::vector<core::Problem>& problems);

// Adds `--ca-cert FILE` (default $INAC_CA_CERT) to a command that calls the REST API: the PEM CA
// certificates (or self-signed certificate) an https:// --server's certificate must chain to
// (ApiClientOptions::ca_cert_file). Every client command declares it through this one function.
void AddCaCertOption(CLI::App* cmd, std::string* ca_cert);

// Reads and validates a topology file. On failure prints every problem and returns nullopt.
std::optional<core::Topology> LoadTopologyFile(const std::string& path);

}  // namespace inac::cli
