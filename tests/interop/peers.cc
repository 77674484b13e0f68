#include "tests/interop/peers.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace inac::interop {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? path : p.string();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<std::string> Find(const char* env_name, const std::string& tool) {
  // 1. $ENV: a folder holding the tool, or the tool itself.
  const char* env = getenv(env_name);
  if (env != nullptr && *env != '\0') {
    const std::string value = env;
    if (IsDirectory(value)) {
      const std::string candidate = value + "/" + tool;
      if (IsExecutableFile(candidate)) return Canonical(candidate);
    } else if (IsExecutableFile(value)) {
      return Canonical(value);
    }
  }
  // 2. PATH (an empty element means the current directory, as for the shell).
  const char* path = getenv("PATH");
  if (path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':')) {
      const std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", tool);
      if (IsExecutableFile(candidate)) return Canonical(candidate);
    }
  }
  // 3. ../shared/peers/bin beside the repository.
  const std::string peers = PeersBinDir();
  if (!peers.empty()) {
    const std::string candidate = peers + "/" + tool;
    if (IsExecutableFile(candidate)) return Canonical(candidate);
  }
  return std::nullopt;
}

std::string Describe(const char* env_name, const std::string& tool) {
  const char* env = getenv(env_name);
  std::string peers = PeersBinDir();
  return absl::StrCat(tool, ": $", env_name, " (",
                      env != nullptr && *env != '\0' ? absl::StrCat("\"", env, "\"") : "unset",
                      "), PATH, ", peers.empty() ? "(no peers folder in this build)" : peers);
}

}  // namespace

std::string PeersBinDir() {
#ifdef INAC_PEERS_BIN
  // Normalise "<repo>/../shared/peers/bin" for messages; keep it as is when it does not exist.
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(INAC_PEERS_BIN, ec);
  return ec ? std::string(INAC_PEERS_BIN) : p.string();
#else
  return "";
#endif
}

std::optional<std::string> FindBmv2() { return Find("INAC_BMV2", "simple_switch_grpc"); }
std::optional<std::string> FindP4c() { return Find("INAC_P4C", "p4c-bm2-ss"); }

std::string Bmv2SearchDescription() { return Describe("INAC_BMV2", "simple_switch_grpc"); }
std::string P4cSearchDescription() { return Describe("INAC_P4C", "p4c-bm2-ss"); }

}  // namespace inac::interop
