// The dashboard's files (northbound/web_assets.h): compiled into the binary, served at /
// and /ui/ without a token (they hold no data), with their media type, an ETag that revalidates
// to 304, and a policy that keeps the page to its origin; the API still needs the token. Also
// GET /whoami, which the page reads to show write actions only to roles that may use them, and
// GET /events?tail=N, its first screen of events.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "northbound/web_assets.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

std::string Header(const Reply& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (absl::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

TEST(WebAssetsTest, EveryFileOfTheDashboardIsEmbedded) {
  for (const char* path :
       {"index.html", "app.js", "api.js", "fabric.js", "jobs.js", "plan.js", "events.js",
        "charts.js", "topology.js", "util.js", "style.css", "vendor/cytoscape.min.js",
        "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css"}) {
    const northbound::WebAsset* asset = northbound::FindWebAsset(absl::StrCat("/ui/", path));
    ASSERT_NE(asset, nullptr) << path;
    EXPECT_FALSE(asset->body.empty()) << path;
    EXPECT_EQ(asset->etag.front(), '"');
  }
  EXPECT_EQ(northbound::FindWebAsset("/")->path, "index.html");
  EXPECT_EQ(northbound::FindWebAsset("/ui/")->path, "index.html");
  EXPECT_EQ(northbound::FindWebAsset("/ui/nope.js"), nullptr);
  EXPECT_EQ(northbound::FindWebAsset("/api/v1/jobs"), nullptr);
  EXPECT_TRUE(northbound::IsDashboardPath("/"));
  EXPECT_TRUE(northbound::IsDashboardPath("/ui/x"));
  EXPECT_FALSE(northbound::IsDashboardPath("/uix"));
  EXPECT_FALSE(northbound::IsDashboardPath("/api/v1/jobs"));
}

TEST(DashboardTest, FilesAreServedWithoutATokenAndRevalidate) {
  TestServer server;  // with tokens
  ASSERT_TRUE(server.Start().ok());
  Reply index = server.Get("/", "");
  ASSERT_EQ(index.status, 200) << index;
  EXPECT_EQ(Header(index, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_TRUE(absl::StrContains(index.body, "/ui/app.js"));
  EXPECT_TRUE(absl::StrContains(Header(index, "Content-Security-Policy"), "script-src 'self'"));
  EXPECT_EQ(Header(index, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(Header(index, "Cache-Control"), "no-cache");
  const std::string etag = Header(index, "ETag");
  ASSERT_FALSE(etag.empty());

  Reply again = server.Call("GET", "/", "", "", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304) << again;
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(server.Call("GET", "/", "", "", {{"If-None-Match", "\"other\""}}).status, 200);

  Reply js = server.Get("/ui/app.js", "");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(Header(js, "Content-Type"), "text/javascript; charset=utf-8");
  Reply lib = server.Get("/ui/vendor/cytoscape.min.js", "");
  ASSERT_EQ(lib.status, 200);
  EXPECT_GT(lib.body.size(), 100000u);
  EXPECT_EQ(Header(server.Get("/ui/vendor/uPlot.min.css", ""), "Content-Type"),
            "text/css; charset=utf-8");

  Reply missing = server.Get("/ui/nope.js", "");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.code(), "not_found");
  Reply post = server.Call("POST", "/", "{}", "");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(Header(post, "Allow"), "GET");
  // The data stays behind the token.
  EXPECT_EQ(server.Get("/api/v1/switches", "").status, 401);
}

TEST(DashboardTest, WhoamiNamesTheTokensRole) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  Reply viewer = server.Get("/api/v1/whoami", kViewerToken);
  ASSERT_EQ(viewer.status, 200) << viewer;
  EXPECT_EQ(viewer.json["role"], "viewer");
  EXPECT_EQ(viewer.json["auth"], true);
  EXPECT_FALSE(absl::StrContains(viewer.body, kViewerToken));
  EXPECT_EQ(server.Get("/api/v1/whoami", kOperatorToken).json["role"], "operator");
  EXPECT_EQ(server.Get("/api/v1/whoami", kAdminToken).json["role"], "admin");
  EXPECT_EQ(server.Get("/api/v1/whoami", "").status, 401);
  EXPECT_EQ(server.Get("/api/v1/whoami", "not-a-token-0123456789").status, 401);
  EXPECT_EQ(server.Get("/api/v1/whoami", kWorkerToken).status, 403);

  TestServerOptions open;
  open.tokens = {};
  TestServer anonymous(open);
  ASSERT_TRUE(anonymous.Start().ok());
  Reply me = anonymous.Get("/api/v1/whoami", "");
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(me.json["auth"], false);
  EXPECT_EQ(me.json["role"], "admin");
  EXPECT_EQ(anonymous.Get("/", "").status, 200);
}

TEST(DashboardTest, EventsTailIsTheNewestEvents) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  for (int i = 0; i < 3; ++i) ASSERT_GT(server.Submit(SmallLeafSpineJob(absl::StrCat("t", i))), 0);
  ASSERT_TRUE(server.Sync().ok());
  Reply all = server.Get("/api/v1/events?limit=1000", kViewerToken);
  ASSERT_EQ(all.status, 200);
  ASSERT_GE(all.json["events"].size(), 4u);
  const int64_t newest = all.json["last_seq"].get<int64_t>();
  Reply tail = server.Get("/api/v1/events?tail=2", kViewerToken);
  ASSERT_EQ(tail.status, 200) << tail;
  ASSERT_EQ(tail.json["events"].size(), 2u);
  EXPECT_EQ(tail.json["events"][1]["seq"], newest);
  EXPECT_EQ(tail.json["events"][0]["seq"], newest - 1);
  EXPECT_EQ(server.Get("/api/v1/events?tail=0", kViewerToken).status, 400);
  EXPECT_EQ(server.Get("/api/v1/events?tail=2&since=1", kViewerToken).status, 400);
}

}  // namespace
}  // namespace inac::server::testing
