// HTTPS end to end (docs/controller.md "TLS (HTTPS)"): the real `inac serve --config` with "tls"
// and tokens on 127.0.0.1, and the real CLI client (`inac job list --server https://...`) trusting
// the throwaway CA with --ca-cert or $INAC_CA_CERT, failing verification without it; and the listen
// rule at start: tokens on a non-loopback address without TLS exit with the fix named, before
// anything is bound (no test binds a non-loopback address). Certificates:
// tests/fixtures/tls_certs.h.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/fixtures/tls_certs.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

constexpr char kToken[] = "tls-admin-token-0123456789";

Json TokensConfig() {
  return Json{{"tokens", Json::array({{{"name", "ops"}, {"token", kToken}, {"role", "admin"}}})}};
}

// Restores an environment variable on scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(TlsSystemTest, ServeHttpsAndTheCliVerifiesTheServer) {
  const std::string dir = MakeTempDir("tls");
  auto files = fixtures::WriteTlsTestFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  // Paths relative to the config file (written into `dir`).
  Json config = TokensConfig();
  config["tls"] = {{"cert", "server.pem"}, {"key", "server-key.pem"}};
  ControllerProcess controller;
  ASSERT_TRUE(controller.Start(dir, "serve", dir + "/inac.db", config).ok())
      << LogTail(dir + "/serve.log");
  const std::string https = absl::StrCat("https://", controller.host_port());
  const std::string token = absl::StrCat(" --token ", kToken);

  // Trusting the CA: the call goes through.
  CliRun ok = RunInac(
      absl::StrCat("job list --json --server ", https, " --ca-cert ", files->ca_cert, token), dir);
  EXPECT_EQ(ok.exit, 0) << ok.out;
  // $INAC_CA_CERT does the same.
  {
    ScopedEnv env("INAC_CA_CERT", files->ca_cert);
    CliRun via_env = RunInac(absl::StrCat("job list --json --server ", https, token), dir);
    EXPECT_EQ(via_env.exit, 0) << via_env.out;
  }
  // Without it: certificate verify failed, exit 1.
  CliRun untrusted = RunInac(absl::StrCat("job list --server ", https, token), dir);
  EXPECT_EQ(untrusted.exit, 1) << untrusted.out;
  EXPECT_TRUE(absl::StrContains(untrusted.out, "certificate verify failed")) << untrusted.out;
  // The wrong CA: the same.
  CliRun wrong = RunInac(
      absl::StrCat("job list --server ", https, " --ca-cert ", files->other_ca_cert, token), dir);
  EXPECT_EQ(wrong.exit, 1) << wrong.out;
  EXPECT_TRUE(absl::StrContains(wrong.out, "certificate verify failed")) << wrong.out;
  // Plain HTTP to the HTTPS port: the server says so (a 400: exit 2).
  CliRun plain =
      RunInac(absl::StrCat("job list --server http://", controller.host_port(), token), dir);
  EXPECT_EQ(plain.exit, 2) << plain.out;
  EXPECT_TRUE(absl::StrContains(plain.out, "serves HTTPS")) << plain.out;
  // A CA file that is not PEM: a clear error.
  CliRun bad_ca =
      RunInac(absl::StrCat("job list --server ", https, " --ca-cert ", files->not_pem, token), dir);
  EXPECT_NE(bad_ca.exit, 0) << bad_ca.out;
  EXPECT_TRUE(absl::StrContains(bad_ca.out, "--ca-cert")) << bad_ca.out;

  EXPECT_EQ(controller.Terminate(), 0);
  // The log says https://.
  EXPECT_TRUE(absl::StrContains(LogTail(dir + "/serve.log", 1 << 20), "api=https://"))
      << LogTail(dir + "/serve.log");
}

TEST(TlsSystemTest, TokensBeyondLoopbackWithoutTlsAreRefusedAtStart) {
  const std::string dir = MakeTempDir("tls-refuse");
  auto files = fixtures::WriteTlsTestFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string config = WriteFile(dir + "/c.json", TokensConfig().dump());
  const std::string serve = absl::StrCat("serve --config ", config, " --db ", dir, "/inac.db");

  // Tokens, 0.0.0.0, no TLS: refused before anything is opened or bound, naming the fixes.
  CliRun refused = RunInac(absl::StrCat(serve, " --listen 0.0.0.0:0"), dir);
  EXPECT_EQ(refused.exit, 2) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out, "over plain HTTP")) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out, "--tls-cert")) << refused.out;
  EXPECT_TRUE(absl::StrContains(refused.out, "--allow-insecure-http")) << refused.out;
  EXPECT_FALSE(absl::StrContains(refused.out, "listening on")) << refused.out;
  EXPECT_FALSE(std::ifstream(dir + "/inac.db").good()) << "the database was opened";

  // Unusable TLS files on the command line: refused at start with the file named.
  CliRun mismatch = RunInac(absl::StrCat(serve, " --listen 127.0.0.1:0 --tls-cert ",
                                         files->server_cert, " --tls-key ", files->other_key),
                            dir);
  EXPECT_EQ(mismatch.exit, 2) << mismatch.out;
  EXPECT_TRUE(absl::StrContains(mismatch.out, "does not match")) << mismatch.out;
  EXPECT_TRUE(absl::StrContains(mismatch.out, files->other_key)) << mismatch.out;
  CliRun half =
      RunInac(absl::StrCat(serve, " --listen 127.0.0.1:0 --tls-cert ", files->server_cert), dir);
  EXPECT_EQ(half.exit, 2) << half.out;
  EXPECT_TRUE(absl::StrContains(half.out, "--tls-key")) << half.out;
  // A config file whose "tls" names a missing file: the problem and its path.
  const std::string missing = WriteFile(
      dir + "/missing.json", R"({"tls": {"cert": "nowhere.pem", "key": "server-key.pem"}})");
  CliRun no_file = RunInac(
      absl::StrCat("serve --config ", missing, " --db ", dir, "/inac.db --listen 127.0.0.1:0"),
      dir);
  EXPECT_EQ(no_file.exit, 2) << no_file.out;
  EXPECT_TRUE(absl::StrContains(no_file.out, "tls.cert")) << no_file.out;
  EXPECT_TRUE(absl::StrContains(no_file.out, dir + "/nowhere.pem")) << no_file.out;
  EXPECT_FALSE(std::ifstream(dir + "/inac.db").good()) << "the database was opened";
}

}  // namespace
}  // namespace inac::systest
