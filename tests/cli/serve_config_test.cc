// The serve configuration of `inac serve` (cli/config.h): ParseServeConfig reads the tokens, the
// listen address, the HTTP limits, TLS, the retention and the controller's planner and counter
// options strictly (a bad value is a problem at its JSON path, the defaults are the service's), and
// CheckListenAllowed applies the REST adapter's listen rule (northbound::CheckListenRule) to a
// configuration. Pure parsing: no server runs here.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/config.h"
#include "http/http_server.h"
#include "northbound/http_api.h"
#include "server/retention_worker.h"
#include "tests/fixtures/temp_dir.h"
#include "tests/fixtures/tls_certs.h"

namespace inac::cli::testing {
namespace {

using fixtures::TempDir;
using server::ControllerOptions;
using server::RetentionOptions;

// One token of each role, as a configuration file would name them.
std::vector<northbound::ApiToken> SomeTokens() {
  return {
      northbound::ApiToken{"admin", "0123456789abcdef-admin", northbound::Role::kAdmin, ""},
      northbound::ApiToken{"viewer", "0123456789abcdef-viewer", northbound::Role::kViewer, ""},
      northbound::ApiToken{"worker", "0123456789abcdef-worker", northbound::Role::kWorker,
                           "vision"},
  };
}

// --- The configuration file's tokens.

std::optional<ServeConfig> Parse(const std::string& text, std::vector<core::Problem>* problems) {
  return ParseServeConfig(text, ServeConfig{}, problems);
}

bool HasProblemAt(const std::vector<core::Problem>& problems, const std::string& path) {
  for (const auto& p : problems) {
    if (p.path == path) return true;
  }
  return false;
}

TEST(ServeConfigTest, ReadsTokensAndRoles) {
  std::vector<core::Problem> problems;
  auto config = Parse(R"({
    "listen": "127.0.0.1:0",
    "tokens": [
      {"name": "ops", "token": "0123456789abcdef-admin", "role": "admin"},
      {"token": "0123456789abcdef-operator", "role": "operator"},
      {"name": "dash", "token": "0123456789abcdef-viewer", "role": "viewer"},
      {"name": "w", "token": "0123456789abcdef-worker", "role": "worker", "tenant": "vision"}
    ]})",
                      &problems);
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems);
  ASSERT_EQ(config->tokens.size(), 4u);
  EXPECT_EQ(config->tokens[0].role, northbound::Role::kAdmin);
  EXPECT_EQ(config->tokens[1].role, northbound::Role::kOperator);
  EXPECT_EQ(config->tokens[1].name, "token1");
  EXPECT_EQ(config->tokens[2].role, northbound::Role::kViewer);
  EXPECT_EQ(config->tokens[3].role, northbound::Role::kWorker);
  EXPECT_EQ(config->tokens[3].tenant, "vision");
}

TEST(ServeConfigTest, RefusesWeakOrAmbiguousTokens) {
  std::vector<core::Problem> problems;
  EXPECT_FALSE(Parse(R"({"tokens": [
      {"token": "short", "role": "admin"},
      {"token": "0123456789abcdef-x", "role": "root"},
      {"token": "0123456789abcdef-w", "role": "worker"},
      {"token": "0123456789abcdef-dup", "role": "viewer"},
      {"token": "0123456789abcdef-dup", "role": "admin"},
      {"token": "0123456789abcdef-y", "role": "viewer", "scope": "all"},
      {"role": "viewer"},
      "token"
    ]})",
                     &problems)
                   .has_value());
  EXPECT_TRUE(HasProblemAt(problems, "tokens[0].token")) << core::FormatProblems(problems);
  EXPECT_TRUE(HasProblemAt(problems, "tokens[1].role"));
  EXPECT_TRUE(HasProblemAt(problems, "tokens[2].tenant"));
  EXPECT_TRUE(HasProblemAt(problems, "tokens[4].token"));  // duplicate
  EXPECT_TRUE(HasProblemAt(problems, "tokens[5].scope"));
  EXPECT_TRUE(HasProblemAt(problems, "tokens[6].token"));
  EXPECT_TRUE(HasProblemAt(problems, "tokens[7]"));
}

TEST(ServeConfigTest, RefusesBadListenAndUnknownFields) {
  std::vector<core::Problem> problems;
  EXPECT_FALSE(Parse(R"({"listen": "127.0.0.1:99999", "colour": "blue"})", &problems));
  EXPECT_TRUE(HasProblemAt(problems, "listen")) << core::FormatProblems(problems);
  EXPECT_TRUE(HasProblemAt(problems, "colour"));
  problems.clear();
  EXPECT_FALSE(Parse(R"({"listen": "no-port"})", &problems));
  EXPECT_TRUE(HasProblemAt(problems, "listen"));
  problems.clear();
  EXPECT_FALSE(Parse(R"({"timer_ms": "fast", "seed": -1})", &problems));
  EXPECT_TRUE(HasProblemAt(problems, "timer_ms"));
  EXPECT_TRUE(HasProblemAt(problems, "seed"));
}

TEST(ServeConfigTest, ReadsHttpLimitsAndRefusesUnworkableOnes) {
  std::vector<core::Problem> problems;
  auto config = Parse(R"({"http": {"threads": 4, "max_connections": 100,
      "max_connections_per_client": 10, "max_headers": 20, "max_body_bytes": 4096,
      "header_timeout_ms": 2000, "idle_timeout_ms": 5000, "max_pipelined": 4}})",
                      &problems);
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems);
  EXPECT_EQ(config->http.workers, 4);
  EXPECT_EQ(config->http.max_connections, 100u);
  EXPECT_EQ(config->http.max_connections_per_client, 10u);
  EXPECT_EQ(config->http.max_headers, 20u);
  EXPECT_EQ(config->http.max_body_bytes, 4096u);
  EXPECT_EQ(config->http.header_timeout_ms, 2000);
  EXPECT_EQ(config->http.idle_timeout_ms, 5000);
  EXPECT_EQ(config->http.max_pipelined, 4u);
  EXPECT_EQ(config->http.write_timeout_ms,
            http::HttpServerOptions{}.write_timeout_ms);  // default kept
  problems.clear();
  EXPECT_FALSE(Parse(R"({"http": {"threads": 0, "header_timeout_ms": 0, "max_body_bytes": "1M",
      "max_connections": 100, "max_connections_per_client": 101, "keepalive": true}})",
                     &problems)
                   .has_value());
  for (const char* path : {"http.threads", "http.header_timeout_ms", "http.max_body_bytes",
                           "http.max_connections_per_client", "http.keepalive"}) {
    EXPECT_TRUE(HasProblemAt(problems, path)) << path << ": " << core::FormatProblems(problems);
  }
  problems.clear();
  EXPECT_FALSE(Parse(R"({"http": 5})", &problems).has_value());
  EXPECT_TRUE(HasProblemAt(problems, "http"));
}

TEST(ServeConfigTest, NoTokensMeansLoopbackOnly) {
  std::vector<core::Problem> problems;
  // A file that listens on every interface without tokens is refused...
  EXPECT_FALSE(Parse(R"({"listen": "0.0.0.0:8080"})", &problems).has_value());
  EXPECT_TRUE(HasProblemAt(problems, "listen")) << core::FormatProblems(problems);
  problems.clear();
  // ... and accepted with a token (plus TLS or, here, the plain-HTTP override), or on loopback.
  EXPECT_TRUE(Parse(R"({"listen": "0.0.0.0:8080", "allow_insecure_http": true,
                        "tokens": [{"token": "0123456789abcdef", "role": "admin"}]})",
                    &problems)
                  .has_value())
      << core::FormatProblems(problems);
  EXPECT_TRUE(Parse(R"({"listen": "[::1]:8080"})", &problems).has_value())
      << core::FormatProblems(problems);
  ServeConfig config;
  config.listen = "10.1.2.3:8080";
  EXPECT_EQ(CheckListenAllowed(config).code(), absl::StatusCode::kFailedPrecondition);
  config.tokens = SomeTokens();
  EXPECT_EQ(CheckListenAllowed(config).code(),
            absl::StatusCode::kFailedPrecondition);  // no TLS
  config.allow_insecure_http = true;
  EXPECT_TRUE(CheckListenAllowed(config).ok());
}

// CheckListenAllowed agrees with the REST adapter's rule on every combination of address, tokens,
// TLS and the plain-HTTP override (tests/server/tls_test.cc checks the rule itself).
TEST(ServeConfigTest, CheckListenAllowedAppliesTheListenRule) {
  struct Case {
    const char* host;
    bool tokens, tls, allow_insecure, allowed;
  };
  const Case cases[] = {
      // Loopback: always (no token means every request is allowed, but only from this machine).
      {"127.0.0.1", false, false, false, true},
      {"127.0.0.1", false, true, false, true},
      {"::1", true, false, false, true},
      {"localhost", true, true, true, true},
      // Not loopback without tokens: never, whatever TLS or the override say.
      {"0.0.0.0", false, false, false, false},
      {"0.0.0.0", false, true, false, false},
      {"0.0.0.0", false, false, true, false},
      {"10.1.2.3", false, true, true, false},
      // Not loopback with tokens: TLS, or the explicit override.
      {"0.0.0.0", true, false, false, false},
      {"0.0.0.0", true, true, false, true},
      {"0.0.0.0", true, false, true, true},
      {"::", true, true, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.host, " tokens=", c.tokens, " tls=", c.tls,
                              " allow_insecure_http=", c.allow_insecure));
    EXPECT_EQ(northbound::CheckListenRule(c.host, c.tokens, c.tls, c.allow_insecure).ok(),
              c.allowed);
    ServeConfig config;
    config.listen = absl::StrCat(absl::StrContains(c.host, ":") ? "[" : "", c.host,
                                 absl::StrContains(c.host, ":") ? "]" : "", ":8443");
    if (c.tokens) config.tokens = SomeTokens();
    if (c.tls) {
      config.http.tls_cert_file = "cert.pem";
      config.http.tls_key_file = "key.pem";
    }
    config.allow_insecure_http = c.allow_insecure;
    EXPECT_EQ(CheckListenAllowed(config).ok(), c.allowed) << CheckListenAllowed(config);
  }
}

// --- TLS.

class ServeConfigTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto files = fixtures::WriteTlsTestFiles(dir_.path());
    ASSERT_TRUE(files.ok()) << files.status();
  }
  std::optional<ServeConfig> Parse(const std::string& text) {
    problems_.clear();
    return ParseServeConfig(text, ServeConfig{}, &problems_, dir_.path());
  }
  bool HasProblemAt(const std::string& path) const {
    for (const core::Problem& p : problems_) {
      if (p.path == path) return true;
    }
    return false;
  }
  TempDir dir_;
  std::vector<core::Problem> problems_;
};

constexpr char kTokens[] = R"("tokens": [{"token": "0123456789abcdef", "role": "admin"}])";

TEST_F(ServeConfigTlsTest, TlsPathsAreResolvedAgainstTheConfigDirectory) {
  auto config = Parse(absl::StrCat(R"({"listen": "0.0.0.0:8443", )", kTokens,
                                   R"(, "tls": {"cert": "server.pem", "key": "server-key.pem"}})"));
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems_);
  EXPECT_EQ(config->http.tls_cert_file, dir_.File("server.pem"));
  EXPECT_EQ(config->http.tls_key_file, dir_.File("server-key.pem"));
  EXPECT_FALSE(config->allow_insecure_http);
  // Absolute paths stay as they are.
  config = Parse(absl::StrCat(R"({"tls": {"cert": ")", dir_.File("server.pem"), R"(", "key": ")",
                              dir_.File("server-key.pem"), R"("}})"));
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems_);
  EXPECT_EQ(config->http.tls_cert_file, dir_.File("server.pem"));
}

TEST_F(ServeConfigTlsTest, TlsIsValidatedStrictly) {
  EXPECT_FALSE(Parse(R"({"tls": {"cert": "nowhere.pem", "key": "server-key.pem"}})"));
  EXPECT_TRUE(HasProblemAt("tls.cert")) << core::FormatProblems(problems_);
  EXPECT_TRUE(absl::StrContains(core::FormatProblems(problems_), dir_.File("nowhere.pem")))
      << core::FormatProblems(problems_);
  EXPECT_FALSE(Parse(R"({"tls": {"cert": "server.pem"}})"));
  EXPECT_TRUE(HasProblemAt("tls.key")) << core::FormatProblems(problems_);
  EXPECT_FALSE(Parse(R"({"tls": {"cert": "server.pem", "key": "server-key.pem", "ca": "x"}})"));
  EXPECT_TRUE(HasProblemAt("tls.ca")) << core::FormatProblems(problems_);
  EXPECT_FALSE(Parse(R"({"tls": {"cert": 1, "key": ""}})"));
  EXPECT_TRUE(HasProblemAt("tls.cert"));
  EXPECT_TRUE(HasProblemAt("tls.key"));
  EXPECT_FALSE(Parse(R"({"tls": "server.pem"})"));
  EXPECT_TRUE(HasProblemAt("tls"));
  EXPECT_FALSE(Parse(R"({"allow_insecure_http": "yes"})"));
  EXPECT_TRUE(HasProblemAt("allow_insecure_http"));
}

TEST_F(ServeConfigTlsTest, TokensBeyondLoopbackNeedTlsOrTheOverride) {
  EXPECT_FALSE(Parse(absl::StrCat(R"({"listen": "0.0.0.0:8443", )", kTokens, "}")));
  EXPECT_TRUE(HasProblemAt("listen")) << core::FormatProblems(problems_);
  auto config = Parse(
      absl::StrCat(R"({"listen": "0.0.0.0:8080", "allow_insecure_http": true, )", kTokens, "}"));
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems_);
  EXPECT_TRUE(config->allow_insecure_http);
  // Without tokens neither TLS nor the override opens a non-loopback address.
  EXPECT_FALSE(Parse(R"({"listen": "0.0.0.0:8443", "allow_insecure_http": true,
                         "tls": {"cert": "server.pem", "key": "server-key.pem"}})"));
  EXPECT_TRUE(HasProblemAt("listen")) << core::FormatProblems(problems_);
  // Loopback needs neither.
  EXPECT_TRUE(Parse(absl::StrCat(R"({"listen": "127.0.0.1:8080", )", kTokens, "}")));
}

// --- Retention.

TEST(RetentionConfigTest, DaysAreParsedStrictly) {
  std::vector<core::Problem> problems;
  auto config = ParseServeConfig(R"({"retention": {"finished_jobs_days": 3, "audit_days": 0}})",
                                 ServeConfig{}, &problems);
  ASSERT_TRUE(config) << core::FormatProblems(problems);
  EXPECT_EQ(config->controller.retention.finished_jobs_ms, 3 * RetentionOptions::kDayMs);
  EXPECT_EQ(config->controller.retention.audit_ms, 0);  // kept forever
  // Defaults: 7 and 90 days.
  auto defaults = ParseServeConfig("{}", ServeConfig{}, &problems);
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->controller.retention.finished_jobs_ms, 7 * RetentionOptions::kDayMs);
  EXPECT_EQ(defaults->controller.retention.audit_ms, 90 * RetentionOptions::kDayMs);
  for (const auto& [text, path] : std::vector<std::pair<std::string, std::string>>{
           {R"({"retention": {"finished_jobs_days": -1}})", "retention.finished_jobs_days"},
           {R"({"retention": {"finished_jobs_days": 3651}})", "retention.finished_jobs_days"},
           {R"({"retention": {"audit_days": 1.5}})", "retention.audit_days"},
           {R"({"retention": {"audit_days": "90"}})", "retention.audit_days"},
           {R"({"retention": {"events_days": 1}})", "retention.events_days"},
           {R"({"retention": 7})", "retention"}}) {
    problems.clear();
    EXPECT_FALSE(ParseServeConfig(text, ServeConfig{}, &problems)) << text;
    ASSERT_FALSE(problems.empty()) << text;
    EXPECT_EQ(problems[0].path, path) << text;
  }
}

// --- The controller's options.

// Planner options in the controller's config: a good value is taken, the default is the
// planner's, and a bad value is one problem at the key's path.
template <typename T>
void ExpectPlannerKey(const std::string& key, const std::string& good, T ControllerOptions::*field,
                      T want, T default_value, const std::vector<std::string>& bad_values) {
  std::vector<core::Problem> problems;
  auto config = ParseServeConfig("{\"" + key + "\": " + good + "}", ServeConfig{}, &problems);
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems);
  EXPECT_EQ(config->controller.*field, want) << key;
  EXPECT_EQ(ServeConfig{}.controller.*field, default_value) << key;
  for (const std::string& bad : bad_values) {
    const std::string text = "{\"" + key + "\": " + bad + "}";
    problems.clear();
    EXPECT_FALSE(ParseServeConfig(text, ServeConfig{}, &problems)) << text;
    ASSERT_EQ(problems.size(), 1u) << text;
    EXPECT_EQ(problems[0].path, key);
  }
}

// Spread candidates (scheduler::PlannerOptions::spread_min_columns).
TEST(PlannerConfigTest, SpreadMinColumnsIsAConfigOption) {
  ExpectPlannerKey<int64_t>("spread_min_columns", "0", &ControllerOptions::spread_min_columns, 0,
                            20000, {"-2", "\"all\""});
}

// grid-split's range cap (scheduler::PlannerOptions::split_max_ranges).
TEST(PlannerConfigTest, SplitMaxRangesIsAConfigOption) {
  ExpectPlannerKey<int>("split_max_ranges", "16", &ControllerOptions::split_max_ranges, 16, 0,
                        {"-1", "65", "\"few\""});
}

TEST(InaCountersConfigTest, PeriodIsAConfigOption) {
  std::vector<core::Problem> problems;
  auto config = ParseServeConfig(R"({"counters_period_ms": 500})", ServeConfig{}, &problems);
  ASSERT_TRUE(config.has_value()) << core::FormatProblems(problems);
  EXPECT_EQ(config->controller.counters_period_ms, 500);
  EXPECT_EQ(ServeConfig{}.controller.counters_period_ms, 2000);
  problems.clear();
  EXPECT_FALSE(ParseServeConfig(R"({"counters_period_ms": -1})", ServeConfig{}, &problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "counters_period_ms");
}

}  // namespace
}  // namespace inac::cli::testing
