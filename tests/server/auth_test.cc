// Auth: bearer tokens from the configuration with roles admin / operator / viewer /
// worker, compared in constant time; with no token configured only loopback addresses may be
// served. The configuration file's token and listen checks are in tests/cli/serve_config_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "http/address.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

TEST(ConstantTimeEqualsTest, ComparesWholeStrings) {
  EXPECT_TRUE(northbound::ConstantTimeEquals("", ""));
  EXPECT_TRUE(northbound::ConstantTimeEquals("secret-token", "secret-token"));
  EXPECT_FALSE(northbound::ConstantTimeEquals("secret-token", "secret-tokeN"));
  EXPECT_FALSE(northbound::ConstantTimeEquals("secret-token", "Secret-token"));
  EXPECT_FALSE(northbound::ConstantTimeEquals("secret-token", "secret-token2"));
  EXPECT_FALSE(northbound::ConstantTimeEquals("secret-token", "secret"));
  EXPECT_FALSE(northbound::ConstantTimeEquals("", "x"));
  // A shorter string padded with NULs is still different.
  EXPECT_FALSE(northbound::ConstantTimeEquals(std::string("ab\0", 3), "ab"));
}

TEST(LoopbackTest, OnlyLoopbackLiteralsAndLocalhost) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(http::IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "10.0.0.1", "::", "128.0.0.1", "127.evil.example",
                           "127.0.0.1.nip.io", "", "::ffff:10.0.0.1", "localhost.example"}) {
    EXPECT_FALSE(http::IsLoopbackHost(host)) << host;
  }
}

TEST(BindTest, WithoutTokensOnlyLoopbackIsServed) {
  TestServerOptions options;
  options.tokens = {};
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  {
    northbound::HttpApi api(server.controller().services(), northbound::HttpApiOptions{});
    auto bound = api.Bind("0.0.0.0", 0);
    EXPECT_EQ(bound.status().code(), absl::StatusCode::kFailedPrecondition) << bound.status();
  }
  {
    northbound::HttpApi api(server.controller().services(), northbound::HttpApiOptions{});
    EXPECT_EQ(api.Bind("127.evil.example", 0).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  {
    // Tokens configured: any address, over TLS or with the explicit override (tls_test.cc has
    // the whole rule; without either the tokens would cross the network in the clear).
    northbound::HttpApiOptions with_tokens;
    with_tokens.tokens = DefaultTokens();
    with_tokens.allow_insecure_http = true;
    northbound::HttpApi api(server.controller().services(), with_tokens);
    EXPECT_TRUE(api.Bind("0.0.0.0", 0).ok());
  }
  // The test server itself listens on 127.0.0.1 without tokens: every request is allowed.
  EXPECT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  Reply r = server.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("open").dump(), "");
  EXPECT_EQ(r.status, 201) << r;
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
    vision_ = server_.Submit(SmallLeafSpineJob("vision-job", "vision"));
    nlp_ = server_.Submit(SmallLeafSpineJob("nlp-job", "nlp"));
    ASSERT_GT(nlp_, 0);
    ASSERT_TRUE(server_.Sync().ok());
  }
  int Status(const std::string& method, const std::string& path, const std::string& token,
             const std::string& body = "") {
    Reply r = server_.Call(method, path, body, token);
    if (r.status == 401 || r.status == 403) {
      EXPECT_EQ(r.code(), r.status == 401 ? "unauthenticated" : "permission_denied") << r;
    }
    return r.status;
  }
  std::string Job(int64_t id, const std::string& suffix = "") {
    return absl::StrCat("/api/v1/jobs/", id, suffix);
  }

  TestServer server_;
  int64_t vision_ = 0, nlp_ = 0;
};

TEST_F(AuthTest, HealthNeedsNoTokenEverythingElseDoes) {
  EXPECT_EQ(Status("GET", "/api/v1/healthz", ""), 200);
  EXPECT_EQ(Status("GET", "/api/v1/readyz", ""), 200);
  for (const char* path : {"/api/v1/metrics", "/api/v1/jobs", "/api/v1/topology",
                           "/api/v1/switches", "/api/v1/plan", "/api/v1/events"}) {
    EXPECT_EQ(Status("GET", path, ""), 401) << path;
  }
  Reply r = server_.Get("/api/v1/jobs", "");
  EXPECT_EQ(r.headers.count("WWW-Authenticate"), 1u);
  // The scheme is case-insensitive; the token is not.
  Reply lower = server_.Call("GET", "/api/v1/jobs", "", "",
                             {{"Authorization", absl::StrCat("bearer ", kViewerToken)}});
  EXPECT_EQ(lower.status, 200) << lower;
  std::string upper = kViewerToken;
  upper[0] = 'V';
  EXPECT_EQ(Status("GET", "/api/v1/jobs", upper), 401);
}

TEST_F(AuthTest, AdminMayDoEverything) {
  std::string topo = core::TopologyToJson(SmallLeafSpine()).dump();
  EXPECT_EQ(Status("PUT", "/api/v1/topology", kAdminToken, topo), 200);
  EXPECT_EQ(Status("PATCH", "/api/v1/links/sp0~lf0", kAdminToken, R"({"status": "down"})"), 200);
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kAdminToken, SmallLeafSpineJob("a").dump()), 201);
  EXPECT_EQ(Status("GET", Job(nlp_, "/config"), kAdminToken), 200);
  EXPECT_EQ(Status("DELETE", Job(nlp_), kAdminToken), 200);
}

TEST_F(AuthTest, OperatorRunsJobsButNotTheFabric) {
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kOperatorToken, SmallLeafSpineJob("op").dump()), 201);
  EXPECT_EQ(
      Status("POST", "/api/v1/plan/preview", kOperatorToken, SmallLeafSpineJob("what-if").dump()),
      200);
  EXPECT_EQ(Status("POST", Job(vision_, "/progress"), kOperatorToken, R"({"iterations_done": 3})"),
            200);
  EXPECT_EQ(Status("DELETE", Job(vision_), kOperatorToken), 200);
  for (const char* path : {"/api/v1/topology", "/api/v1/switches", "/api/v1/links", "/api/v1/plan",
                           "/api/v1/metrics", "/api/v1/jobs"}) {
    EXPECT_EQ(Status("GET", path, kOperatorToken), 200) << path;
  }
  EXPECT_EQ(Status("PUT", "/api/v1/topology", kOperatorToken,
                   core::TopologyToJson(SmallLeafSpine()).dump()),
            403);
  EXPECT_EQ(Status("PATCH", "/api/v1/links/sp0~lf0", kOperatorToken, R"({"status": "down"})"), 403);
}

TEST_F(AuthTest, ViewerOnlyReads) {
  for (const char* path :
       {"/api/v1/topology", "/api/v1/switches", "/api/v1/switches/lf0", "/api/v1/links",
        "/api/v1/plan", "/api/v1/metrics", "/api/v1/jobs", "/api/v1/events"}) {
    EXPECT_EQ(Status("GET", path, kViewerToken), 200) << path;
  }
  EXPECT_EQ(Status("GET", Job(nlp_, "/config"), kViewerToken), 200);
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kViewerToken, SmallLeafSpineJob("v").dump()), 403);
  EXPECT_EQ(Status("POST", "/api/v1/plan/preview", kViewerToken, SmallLeafSpineJob("v").dump()),
            403);
  EXPECT_EQ(Status("DELETE", Job(nlp_), kViewerToken), 403);
  EXPECT_EQ(Status("POST", Job(nlp_, "/progress"), kViewerToken, R"({"iterations_done": 1})"), 403);
  EXPECT_EQ(server_.JobState(nlp_), "running");
}

TEST_F(AuthTest, WorkerTouchesOnlyItsTenantsJobs) {
  EXPECT_EQ(Status("GET", Job(vision_), kWorkerToken), 200);
  EXPECT_EQ(Status("GET", Job(vision_, "/config"), kWorkerToken), 200);
  EXPECT_EQ(Status("POST", Job(vision_, "/progress"), kWorkerToken, R"({"iterations_done": 7})"),
            200);
  EXPECT_EQ(Status("GET", Job(nlp_), kWorkerToken), 403);
  EXPECT_EQ(Status("GET", Job(nlp_, "/config"), kWorkerToken), 403);
  EXPECT_EQ(Status("POST", Job(nlp_, "/progress"), kWorkerToken, R"({"iterations_done": 7})"), 403);
  // The other tenant's worker, the other way round.
  EXPECT_EQ(Status("GET", Job(nlp_, "/config"), kOtherWorkerToken), 200);
  EXPECT_EQ(Status("GET", Job(vision_, "/config"), kOtherWorkerToken), 403);
  // Nothing else.
  EXPECT_EQ(Status("GET", "/api/v1/jobs", kWorkerToken), 403);
  EXPECT_EQ(Status("POST", "/api/v1/jobs", kWorkerToken, SmallLeafSpineJob("w").dump()), 403);
  EXPECT_EQ(Status("DELETE", Job(vision_), kWorkerToken), 403);
  EXPECT_EQ(Status("GET", "/api/v1/topology", kWorkerToken), 403);
  EXPECT_EQ(Status("GET", "/api/v1/plan", kWorkerToken), 403);
  // An unknown job is 404 (not 403): the route answers.
  EXPECT_EQ(Status("GET", "/api/v1/jobs/999999/config", kWorkerToken), 404);
  Reply progress = server_.Get(Job(vision_), kAdminToken);
  EXPECT_EQ(progress.json["iterations_done"], 7);
  EXPECT_EQ(server_.JobState(nlp_), "running");
}

}  // namespace
}  // namespace inac::server::testing
