#include "server/cli_util.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/json.h"

namespace inac::server {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string msg = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("cannot read ", path));
  return buf.str();
}

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
  auto text = ReadFile(path);
  if (!text.ok()) {
    std::cerr << "inac: " << text.status().message() << "\n";
    return std::nullopt;
  }
  std::vector<core::Problem> problems;
  auto topology = core::ParseTopology(*text, &problems);
  if (!topology) PrintProblems(path, problems);
  return topology;
}

}  // namespace inac::server
