// What the API refuses before reading a body: without tokens, a request whose
// Host is not a loopback name (DNS rebinding) or whose Origin is another site's page is refused,
// and bodies must be application/json (415 otherwise: a cross-site form or text/plain POST).
#include <gtest/gtest.h>

#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

class ApiGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServerOptions o;
    o.tokens = {};  // the token-less mode a web page could otherwise drive
    server_ = std::make_unique<TestServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_EQ(server_->PutTopology(SmallLeafSpine()), 200);
  }
  std::unique_ptr<TestServer> server_;
};

TEST_F(ApiGuardTest, ARebindingHostIsRefused) {
  Reply r = server_->Call("GET", "/api/v1/jobs", "", "", {{"Host", "rebind.evil.example"}});
  EXPECT_EQ(r.status, 403) << r;
  EXPECT_EQ(r.code(), "permission_denied") << r;
  EXPECT_EQ(r.field(), "Host") << r;
  for (const char* host : {"localhost", "127.0.0.1:8080", "[::1]:8080", "localhost:1"}) {
    EXPECT_EQ(server_->Call("GET", "/api/v1/jobs", "", "", {{"Host", host}}).status, 200) << host;
  }
}

TEST_F(ApiGuardTest, ACrossSitePostIsRefusedAndNothingIsCreated) {
  const std::string job = SmallLeafSpineJob("csrf").dump();
  Reply r =
      server_->Call("POST", "/api/v1/jobs", job, "",
                    {{"Origin", "https://evil.example"}, {"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 403) << r;
  EXPECT_EQ(r.field(), "Origin") << r;
  // A simple cross-site request needs no preflight: text/plain is refused as a media type.
  r = server_->Call("POST", "/api/v1/jobs", job, "", {{"Content-Type", "text/plain"}});
  EXPECT_EQ(r.status, 415) << r;
  EXPECT_EQ(r.code(), "unsupported_media_type") << r;
  r = server_->Call("POST", "/api/v1/jobs", job, "",
                    {{"Content-Type", "application/x-www-form-urlencoded"}});
  EXPECT_EQ(r.status, 415) << r;
  EXPECT_EQ(server_->Get("/api/v1/jobs", "").json["jobs"].size(), 0u);
  // The same request from a loopback page, as JSON, is served.
  r = server_->Call(
      "POST", "/api/v1/jobs", job, "",
      {{"Origin", "http://localhost:3000"}, {"Content-Type", "application/json; charset=utf-8"}});
  EXPECT_EQ(r.status, 201) << r;
}

}  // namespace
}  // namespace inac::server::testing
