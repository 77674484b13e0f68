#include "cli/cli_util.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/files.h"
#include "core/json.h"

namespace inac::cli {

void PrintProblems(const std::string& file, const std::vector<core::Problem>& problems) {
  for (const core::Problem& p : problems) {
    std::cerr << file << ": " << core::FormatProblem(p) << "\n";
  }
}

void AddCaCertOption(CLI::App* cmd, std::string* ca_cert) {
  const char* env = std::getenv("INAC_CA_CERT");
  if (env != nullptr && *env != '\0') *ca_cert = env;
  cmd->add_option("--ca-cert", *ca_cert,
                  "PEM file of the CA (or self-signed) certificate an https:// --server must "
                  "present (default $INAC_CA_CERT; otherwise the system's trust store)");
}

std::optional<core::Topology> LoadTopologyFile(const std::string& path) {
  auto text = core::ReadFile(path);
  if (!text.ok()) {
    std::cerr << "inac: " << text.status().message() << "\n";
    return std::nullopt;
  }
  std::vector<core::Problem> problems;
  auto topology = core::ParseTopology(*text, &problems);
  if (!topology) PrintProblems(path, problems);
  return topology;
}

}  // namespace inac::cli
