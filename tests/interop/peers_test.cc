// The search order of tests/interop/peers.h (the same as scripts/find-p4-peers.sh): $INAC_BMV2 as
// a folder or a file, then PATH, then the peers folder beside the repository. Uses fake
// executables in a temporary folder; the environment is restored after each test.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace inac::interop {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string FakeTool(const std::string& dir, const std::string& name) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\nexit 0\n";
  chmod(path.c_str(), 0755);
  return std::filesystem::canonical(path).string();
}

class PeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = systest::MakeTempDir("peers");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string dir_;
};

TEST_F(PeersTest, TheEnvironmentVariableComesFirstAsFolderOrFile) {
  const std::string in_env = FakeTool(dir_ + "/env", "simple_switch_grpc");
  const std::string on_path = FakeTool(dir_ + "/path", "simple_switch_grpc");
  ScopedEnv path("PATH", dir_ + "/path");
  {
    ScopedEnv env("INAC_BMV2", dir_ + "/env");
    EXPECT_EQ(FindBmv2(), in_env);
  }
  {
    ScopedEnv env("INAC_BMV2", in_env);
    EXPECT_EQ(FindBmv2(), in_env);
  }
  {
    // Naming nothing usable: the search goes on to PATH (as the script does).
    ScopedEnv env("INAC_BMV2", dir_ + "/missing");
    EXPECT_EQ(FindBmv2(), on_path);
  }
  {
    ScopedEnv env("INAC_BMV2", std::nullopt);
    EXPECT_EQ(FindBmv2(), on_path);
  }
}

TEST_F(PeersTest, ANonExecutableFileDoesNotCount) {
  std::filesystem::create_directories(dir_ + "/path");
  std::ofstream(dir_ + "/path/p4c-bm2-ss") << "not a program\n";
  const std::string later = FakeTool(dir_ + "/later", "p4c-bm2-ss");
  ScopedEnv env("INAC_P4C", std::nullopt);
  ScopedEnv path("PATH", dir_ + "/path:" + dir_ + "/later");
  EXPECT_EQ(FindP4c(), later);
}

TEST_F(PeersTest, ThePeersFolderComesLastAndTheSearchIsDescribed) {
  ScopedEnv env("INAC_BMV2", std::nullopt);
  ScopedEnv path("PATH", dir_ + "/empty");
  const std::string peers = PeersBinDir();
  const std::string expected = peers + "/simple_switch_grpc";
  if (!peers.empty() && access(expected.c_str(), X_OK) == 0) {
    EXPECT_EQ(FindBmv2(), std::filesystem::canonical(expected).string());
  } else {
    EXPECT_EQ(FindBmv2(), std::nullopt);
  }
  const std::string described = Bmv2SearchDescription();
  EXPECT_NE(described.find("$INAC_BMV2 (unset)"), std::string::npos) << described;
  EXPECT_NE(described.find("PATH"), std::string::npos) << described;
  if (!peers.empty()) {
    EXPECT_NE(described.find(peers), std::string::npos) << described;
  }
}

}  // namespace
}  // namespace inac::interop
