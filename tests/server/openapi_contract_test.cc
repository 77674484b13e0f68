// The OpenAPI contract: api/openapi.yaml names exactly the routes the server registers.
// The document side is parsed from the file (the `paths:` block: path keys indented two spaces,
// operation keys four); the server side is HttpApi::routes(), the list the registration loop
// itself fills. Then every documented (path, method) is requested on a live server and must not
// get the router's own "no route" answer.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

// "METHOD /path" for every operation of the document's `paths:` block.
std::set<std::string> ParseOpenApiRoutes(const std::string& text) {
  static const std::set<std::string> kMethods = {"get",     "put",  "post",  "delete",
                                                 "options", "head", "patch", "trace"};
  std::set<std::string> routes;
  std::istringstream in(text);
  std::string line;
  bool in_paths = false;
  std::string path;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    absl::string_view trimmed = absl::StripTrailingAsciiWhitespace(line);
    if (trimmed.empty() || absl::StripLeadingAsciiWhitespace(trimmed).front() == '#') continue;
    size_t indent = line.find_first_not_of(' ');
    if (indent == 0) {
      in_paths = trimmed == "paths:";
      path.clear();
      continue;
    }
    if (!in_paths || trimmed.back() != ':') continue;
    std::string key(trimmed.substr(indent, trimmed.size() - indent - 1));
    if (key.size() >= 2 && (key.front() == '\'' || key.front() == '"')) {
      key = key.substr(1, key.size() - 2);
    }
    if (indent == 2 && !key.empty() && key.front() == '/') {
      path = key;
    } else if (indent == 4 && !path.empty() && kMethods.count(key)) {
      routes.insert(absl::StrCat(absl::AsciiStrToUpper(key), " ", path));
    }
  }
  return routes;
}

std::string ReadOpenApi() {
  std::ifstream in(INAC_OPENAPI_PATH);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True when the answer is the router's own (no route for this path, or not for this method),
// as opposed to an answer of a handler.
bool IsRouterMiss(const Reply& r) {
  return (r.status == 404 || r.status == 405) && absl::StartsWith(r.message(), "no route ");
}

TEST(OpenApiParserTest, ReadsPathsAndOperationsOnly) {
  const std::string doc =
      "openapi: 3.1.0\n"
      "components:\n"
      "  schemas:\n"
      "    get:\n"  // not under paths
      "      type: object\n"
      "paths:\n"
      "  /a:\n"
      "    get:\n"
      "      summary: x\n"
      "      parameters:\n"
      "        - {name: get, in: query}\n"
      "    delete:\n"
      "      responses: {}\n"
      "  '/b/{id}':\n"
      "    # comment\n"
      "    patch:\n"
      "      description: |\n"
      "        post:\n"
      "    parameters: []\n"
      "tags:\n"
      "  /c:\n"
      "    put: {}\n";
  EXPECT_EQ(ParseOpenApiRoutes(doc),
            (std::set<std::string>{"GET /a", "DELETE /a", "PATCH /b/{id}"}));
}

TEST(OpenApiContractTest, DocumentNamesExactlyTheRegisteredRoutes) {
  std::string text = ReadOpenApi();
  ASSERT_FALSE(text.empty()) << "cannot read " << INAC_OPENAPI_PATH;
  std::set<std::string> documented = ParseOpenApiRoutes(text);

  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  // HttpApi::routes() is filled by the registration loop, so it is what the router serves.
  northbound::HttpApi api(server.controller().services(), northbound::HttpApiOptions{});
  std::set<std::string> served(api.routes().begin(), api.routes().end());
  EXPECT_EQ(served.size(), api.routes().size()) << "a route is registered twice";
  EXPECT_GE(served.size(), 15u);  // sanity: the table was read at all

  for (const std::string& r : served) {
    EXPECT_TRUE(documented.count(r)) << "served but missing from api/openapi.yaml: " << r;
  }
  for (const std::string& r : documented) {
    EXPECT_TRUE(served.count(r)) << "api/openapi.yaml names a route the server lacks: " << r;
  }
}

TEST(OpenApiContractTest, EveryDocumentedOperationReachesAHandler) {
  std::set<std::string> documented = ParseOpenApiRoutes(ReadOpenApi());
  ASSERT_FALSE(documented.empty());
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  core::Topology topology = SmallLeafSpine();
  ASSERT_EQ(server.PutTopology(topology), 200);
  int64_t job = server.Submit(SmallLeafSpineJob("contract"));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(server.Sync().ok());

  // The router's misses are recognised (so the check below can fail).
  EXPECT_TRUE(IsRouterMiss(server.Get("/api/v1/no-such-route")));
  EXPECT_TRUE(IsRouterMiss(server.Call("DELETE", "/api/v1/topology")));
  EXPECT_FALSE(IsRouterMiss(server.Get("/api/v1/jobs/424242")));  // a handler's 404

  for (const std::string& route : documented) {
    SCOPED_TRACE(route);
    auto space = route.find(' ');
    std::string method = route.substr(0, space);
    std::string path = route.substr(space + 1);
    if (absl::StartsWith(path, "/jobs/")) {
      path = absl::StrReplaceAll(path, {{"{id}", absl::StrCat(job)}});
    } else if (absl::StartsWith(path, "/links/")) {
      path = absl::StrReplaceAll(path, {{"{id}", topology.links[0].id}});
    } else if (absl::StartsWith(path, "/switches/")) {
      path = absl::StrReplaceAll(path, {{"{id}", topology.switches[0].id}});
    }
    ASSERT_EQ(path.find('{'), std::string::npos) << "no sample value for a parameter of " << path;
    std::string url = "/api/v1" + path;
    if (path == "/events/stream") {
      // A stream: read the first chunk, then hang up.
      std::string first;
      auto status =
          server.Client(kAdminToken)->Stream({.target = url}, nullptr, [&](std::string_view data) {
            first.assign(data);
            return false;
          });
      ASSERT_TRUE(status.ok()) << status.status();
      EXPECT_EQ(*status, 200);
      EXPECT_FALSE(first.empty());
      continue;
    }
    std::string body;
    if (method == "POST" || method == "PUT" || method == "PATCH") body = "{}";
    Reply r = server.Call(method, url, body);
    EXPECT_NE(r.status, 0) << r;
    EXPECT_FALSE(IsRouterMiss(r)) << r;
  }
}

}  // namespace
}  // namespace inac::server::testing
