// The bad-input suite: malformed and hostile requests against a live server,
// each with the HTTP status and the error body's code (and field where there is one). After the
// suite the server still answers /healthz.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

struct BadCase {
  std::string name;
  std::string method;
  std::string path;
  std::string body;
  int status;
  std::string code;
  std::string field = "";  // checked when non-empty
  std::string token = kAdminToken;
  std::multimap<std::string, std::string> headers = {};
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
    running_ = server_.Submit(SmallLeafSpineJob("running", "vision"));
    completed_ = server_.Submit(SmallLeafSpineJob("completed", "vision", 10));
    cancelled_ = server_.Submit(SmallLeafSpineJob("cancelled", "vision"));
    nlp_ = server_.Submit(SmallLeafSpineJob("nlp-job", "nlp"));
    ASSERT_GT(nlp_, 0);
    ASSERT_TRUE(server_.Sync().ok());
    ASSERT_EQ(server_.JobState(running_), "running");
    ASSERT_EQ(server_
                  .Call("POST", absl::StrCat("/api/v1/jobs/", completed_, "/progress"),
                        R"({"iterations_done": 10})")
                  .status,
              200);
    ASSERT_EQ(server_.Call("DELETE", absl::StrCat("/api/v1/jobs/", cancelled_)).status, 200);
    ASSERT_EQ(server_.JobState(completed_), "completed");
    ASSERT_EQ(server_.JobState(cancelled_), "cancelled");
  }

  void Expect(const BadCase& c) {
    SCOPED_TRACE(absl::StrCat(c.name, ": ", c.method, " ", c.path.substr(0, 120)));
    Reply r = server_.Call(c.method, c.path, c.body, c.token, c.headers);
    ExpectReply(c, r);
  }
  void ExpectReply(const BadCase& c, const Reply& r) {
    EXPECT_EQ(r.status, c.status) << r;
    EXPECT_TRUE(r.json.is_object()) << "error body is not JSON: " << r;
    EXPECT_EQ(r.code(), c.code) << r;
    if (!c.field.empty()) {
      EXPECT_EQ(r.field(), c.field) << r;
    }
    EXPECT_FALSE(r.message().empty()) << r;
    ++checked_;
  }

  std::string Job(int64_t id, const std::string& suffix = "") {
    return absl::StrCat("/api/v1/jobs/", id, suffix);
  }
  static std::string Spec(const std::function<void(Json&)>& edit) {
    Json spec = SmallLeafSpineJob("bad", "vision");
    edit(spec);
    return spec.dump();
  }

  TestServer server_;
  int64_t running_ = 0, completed_ = 0, cancelled_ = 0, nlp_ = 0;
  int checked_ = 0;
};

TEST_F(BadInputTest, EveryHostileRequestGetsItsStatusAndCode) {
  const std::string deep(200000, '[');
  std::string huge_header(16 * 1024, 'x');
  std::vector<BadCase> cases = {
      // --- Malformed bodies
      {"truncated JSON", "POST", "/api/v1/jobs", R"({"name": "x")", 400, "invalid_argument"},
      {"empty body", "POST", "/api/v1/jobs", "", 400, "invalid_argument"},
      {"array body", "POST", "/api/v1/jobs", "[1, 2]", 400, "invalid_argument"},
      {"null body", "POST", "/api/v1/jobs", "null", 400, "invalid_argument"},
      {"NaN literal", "POST", "/api/v1/jobs", R"({"name": "x", "iterations": NaN})", 400,
       "invalid_argument"},
      {"number overflowing a double", "POST", "/api/v1/jobs",
       Spec([](Json& s) { s.erase("iterations"); }).insert(1, R"("iterations": 1e999,)"), 400,
       "invalid_argument"},
      {"invalid UTF-8 in a string", "POST", "/api/v1/jobs", "{\"name\": \"\xff\xfe\"}", 400,
       "invalid_argument"},
      {"200k nested arrays", "POST", "/api/v1/jobs", deep, 400, "invalid_argument"},
      {"trailing garbage", "POST", "/api/v1/jobs", SmallLeafSpineJob("x").dump() + " {}", 400,
       "invalid_argument"},
      // --- Wrong fields, types and values
      {"unknown field", "POST", "/api/v1/jobs", Spec([](Json& s) { s["gpus"] = 8; }), 400,
       "invalid_argument", "gpus"},
      {"name of the wrong type", "POST", "/api/v1/jobs", Spec([](Json& s) { s["name"] = 5; }), 400,
       "invalid_argument", "name"},
      {"iterations as a string", "POST", "/api/v1/jobs",
       Spec([](Json& s) { s["iterations"] = "100"; }), 400, "invalid_argument", "iterations"},
      {"negative iterations", "POST", "/api/v1/jobs", Spec([](Json& s) { s["iterations"] = -5; }),
       400, "invalid_argument", "iterations"},
      {"huge batch size", "POST", "/api/v1/jobs", Spec([](Json& s) { s["batch_size"] = 1e300; }),
       400, "invalid_argument", "batch_size"},
      {"priority beyond int32", "POST", "/api/v1/jobs",
       Spec([](Json& s) { s["priority"] = 99999999999LL; }), 400, "invalid_argument", "priority"},
      {"unknown worker host", "POST", "/api/v1/jobs", Spec([](Json& s) {
         s["workers"] = {"h9_9", "h0_1"};
       }),
       400, "invalid_argument", "workers[0]"},
      {"unknown model", "POST", "/api/v1/jobs", Spec([](Json& s) { s["model"] = "GPT-9"; }), 400,
       "invalid_argument", "model"},
      {"missing required name", "POST", "/api/v1/jobs", Spec([](Json& s) { s.erase("name"); }), 400,
       "invalid_argument", "name"},
      {"preview of a bad spec", "POST", "/api/v1/plan/preview",
       Spec([](Json& s) { s["batch_size"] = "big"; }), 400, "invalid_argument", "batch_size"},
      // --- Unknown ids and routes
      {"unknown job id", "GET", "/api/v1/jobs/999999", "", 404, "not_found"},
      {"18-digit job id", "GET", "/api/v1/jobs/999999999999999999", "", 404, "not_found"},
      {"job id beyond int64", "GET", "/api/v1/jobs/99999999999999999999999", "", 404, "not_found"},
      {"negative job id", "GET", "/api/v1/jobs/-1", "", 404, "not_found"},
      {"path traversal in a job id", "GET", "/api/v1/jobs/..%2F..%2Ftopology", "", 404,
       "not_found"},
      {"dot-dot segments", "GET", "/api/v1/jobs/../topology", "", 404, "not_found"},
      {"progress of an unknown job", "POST", "/api/v1/jobs/777777/progress",
       R"({"iterations_done": 1})", 404, "not_found"},
      {"config of an unknown job", "GET", "/api/v1/jobs/777777/config", "", 404, "not_found"},
      {"unknown switch", "GET", "/api/v1/switches/nope", "", 404, "not_found"},
      {"invalid UTF-8 switch id", "GET", "/api/v1/switches/%FF%FE", "", 404, "not_found"},
      {"unknown link", "PATCH", "/api/v1/links/lf0~nowhere", R"({"status": "down"})", 404,
       "not_found"},
      {"invalid UTF-8 link id", "PATCH", "/api/v1/links/%C3%28", R"({"status": "down"})", 404,
       "not_found"},
      {"unknown route", "GET", "/api/v1/jobz", "", 404, "not_found"},
      {"outside the API", "GET", "/etc/passwd", "", 404, "not_found"},
      {"wrong method on a known path", "DELETE", "/api/v1/topology", "", 405, "method_not_allowed"},
      // --- Illegal state transitions
      {"cancel a completed job", "DELETE", Job(completed_), "", 409, "failed_precondition"},
      {"cancel a cancelled job", "DELETE", Job(cancelled_), "", 409, "failed_precondition"},
      {"progress on a cancelled job", "POST", Job(cancelled_, "/progress"),
       R"({"iterations_done": 5})", 409, "failed_precondition"},
      {"progress on a completed job", "POST", Job(completed_, "/progress"),
       R"({"iterations_done": 10})", 409, "failed_precondition"},
      // --- Progress bodies
      {"progress: unknown field", "POST", Job(running_, "/progress"),
       R"({"iterations_done": 1, "eta": 3})", 400, "invalid_argument", "eta"},
      {"progress: negative", "POST", Job(running_, "/progress"), R"({"iterations_done": -1})", 400,
       "invalid_argument", "iterations_done"},
      {"progress: fractional", "POST", Job(running_, "/progress"), R"({"iterations_done": 1.5})",
       400, "invalid_argument", "iterations_done"},
      {"progress: missing", "POST", Job(running_, "/progress"), R"({"loss": 0.5})", 400,
       "invalid_argument", "iterations_done"},
      {"progress: loss as a string", "POST", Job(running_, "/progress"),
       R"({"iterations_done": 1, "loss": "low"})", 400, "invalid_argument", "loss"},
      {"progress: beyond the job's iterations", "POST", Job(running_, "/progress"),
       R"({"iterations_done": 1000000})", 400, "invalid_argument", "iterations_done"},
      // --- Query parameters
      {"bad cursor", "GET", "/api/v1/jobs?after=abc", "", 400, "invalid_argument", "after"},
      {"negative cursor", "GET", "/api/v1/jobs?after=-3", "", 400, "invalid_argument", "after"},
      {"limit 0", "GET", "/api/v1/jobs?limit=0", "", 400, "invalid_argument", "limit"},
      {"limit too large", "GET", "/api/v1/jobs?limit=1000001", "", 400, "invalid_argument",
       "limit"},
      {"limit beyond int64", "GET", "/api/v1/jobs?limit=99999999999999999999", "", 400,
       "invalid_argument", "limit"},
      {"bad state filter", "GET", "/api/v1/jobs?state=sleeping", "", 400, "invalid_argument",
       "state"},
      {"empty state in a list", "GET", "/api/v1/jobs?state=running,", "", 400, "invalid_argument",
       "state"},
      {"invalid UTF-8 state", "GET", "/api/v1/jobs?state=%FF", "", 400, "invalid_argument",
       "state"},
      {"bad events cursor", "GET", "/api/v1/events?since=yesterday", "", 400, "invalid_argument",
       "since"},
      {"negative events cursor", "GET", "/api/v1/events?since=-1", "", 400, "invalid_argument",
       "since"},
      {"bad events limit", "GET", "/api/v1/events?limit=-1", "", 400, "invalid_argument", "limit"},
      {"bad stream cursor", "GET", "/api/v1/events/stream?since=x", "", 400, "invalid_argument",
       "since"},
      // --- Links
      {"bad link status", "PATCH", "/api/v1/links/sp0~lf0", R"({"status": "sideways"})", 400,
       "invalid_argument", "status"},
      {"link status of the wrong type", "PATCH", "/api/v1/links/sp0~lf0", R"({"status": 0})", 400,
       "invalid_argument", "status"},
      {"link: unknown field", "PATCH", "/api/v1/links/sp0~lf0", R"({"status": "down", "gbps": 1})",
       400, "invalid_argument", "gbps"},
      // --- Topology
      {"topology: link to an unknown node", "PUT", "/api/v1/topology",
       [] {
         Json t = core::TopologyToJson(SmallLeafSpine());
         t["links"][0]["b"] = "ghost";
         return t.dump();
       }(),
       400, "invalid_argument", "links[0].b"},
      {"topology: switches not an array", "PUT", "/api/v1/topology", R"({"switches": "many"})", 400,
       "invalid_argument", "switches"},
      {"topology: unknown field", "PUT", "/api/v1/topology",
       [] {
         Json t = core::TopologyToJson(SmallLeafSpine());
         t["routers"] = Json::array();
         return t.dump();
       }(),
       400, "invalid_argument", "routers"},
      // --- Headers
      {"Idempotency-Key over 255 characters",
       "POST",
       "/api/v1/jobs",
       SmallLeafSpineJob("k").dump(),
       400,
       "invalid_argument",
       "Idempotency-Key",
       kAdminToken,
       {{"Idempotency-Key", std::string(300, 'k')}}},
      {"headers over 16 KiB",
       "GET",
       "/api/v1/jobs",
       "",
       431,
       "request_header_fields_too_large",
       "",
       kAdminToken,
       {{"X-Padding", huge_header}}},
      {"URI over 8 KiB", "GET", "/api/v1/jobs?tenant=" + std::string(9000, 'a'), "", 414,
       "uri_too_long"},
      // --- Auth
      {"no token", "GET", "/api/v1/jobs", "", 401, "unauthenticated", "", ""},
      {"unknown token", "GET", "/api/v1/jobs", "", 401, "unauthenticated", "",
       "not-a-token-0123456789"},
      {"token prefix", "GET", "/api/v1/jobs", "", 401, "unauthenticated", "", "admin-token"},
      {"Basic scheme",
       "GET",
       "/api/v1/jobs",
       "",
       401,
       "unauthenticated",
       "",
       "",
       {{"Authorization", "Basic YWRtaW46YWRtaW4="}}},
      {"viewer submits a job", "POST", "/api/v1/jobs", SmallLeafSpineJob("v").dump(), 403,
       "permission_denied", "", kViewerToken},
      {"operator replaces the topology", "PUT", "/api/v1/topology",
       core::TopologyToJson(SmallLeafSpine()).dump(), 403, "permission_denied", "", kOperatorToken},
      {"operator sets a link down", "PATCH", "/api/v1/links/sp0~lf0", R"({"status": "down"})", 403,
       "permission_denied", "", kOperatorToken},
      {"worker reads another tenant's config", "GET", Job(nlp_, "/config"), "", 403,
       "permission_denied", "", kWorkerToken},
      {"worker reports progress of another tenant's job", "POST", Job(nlp_, "/progress"),
       R"({"iterations_done": 1})", 403, "permission_denied", "", kWorkerToken},
      {"worker lists jobs", "GET", "/api/v1/jobs", "", 403, "permission_denied", "", kWorkerToken},
      {"worker cancels its own job", "DELETE", Job(running_), "", 403, "permission_denied", "",
       kWorkerToken},
  };
  for (const BadCase& c : cases) Expect(c);
  EXPECT_GE(checked_, 30);

  // Nothing above changed state: the running job still runs, no job was added.
  EXPECT_EQ(server_.JobState(running_), "running");
  Reply list = server_.Get("/api/v1/jobs");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json["jobs"].size(), 4u);
  EXPECT_EQ(server_.Get("/api/v1/healthz", "").status, 200);
}

TEST_F(BadInputTest, BodyOverOneMebibyteIs413) {
  std::string big = SmallLeafSpineJob("big").dump();
  big.insert(1, absl::StrCat("\"pad\": \"", std::string(1 << 20, 'p'), "\", "));
  Expect({"Content-Length body over 1 MiB", "POST", "/api/v1/jobs", big, 413, "payload_too_large"});
  // The same as a chunked body (no Content-Length).
  std::string raw =
      absl::StrCat("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", kAdminToken,
                   "\r\nTransfer-Encoding: chunked\r\nContent-Type: "
                   "application/json\r\nConnection: close\r\n\r\n");
  for (size_t i = 0; i < big.size(); i += 65536) {
    std::string chunk = big.substr(i, 65536);
    absl::StrAppend(&raw, absl::Hex(chunk.size()), "\r\n", chunk, "\r\n");
  }
  raw += "0\r\n\r\n";
  ExpectReply({"chunked body over 1 MiB", "POST", "", "", 413, "payload_too_large"},
              server_.Raw(raw));
  EXPECT_EQ(server_.Get("/api/v1/healthz", "").status, 200);
}

TEST_F(BadInputTest, IdempotencyKeyReusedWithAnotherBodyIs409) {
  std::multimap<std::string, std::string> key = {{"Idempotency-Key", "launch-42"}};
  Reply first =
      server_.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("idem").dump(), kAdminToken, key);
  ASSERT_EQ(first.status, 201) << first;
  Reply again =
      server_.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("idem").dump(), kAdminToken, key);
  EXPECT_EQ(again.status, 200) << again;
  EXPECT_EQ(again.json["id"], first.json["id"]);
  Expect({"same key, other body", "POST", "/api/v1/jobs", SmallLeafSpineJob("idem-2").dump(), 409,
          "already_exists", "", kAdminToken, key});
}

TEST_F(BadInputTest, MalformedHttpIsRefusedAndTheServerLives) {
  auto auth = absl::StrCat("Authorization: Bearer ", kAdminToken, "\r\n");
  ExpectReply({"garbage request line", "", "", "", 400, "invalid_argument"},
              server_.Raw("HELLO\r\n\r\n"));
  ExpectReply({"Content-Length not a number", "", "", "", 400, "invalid_argument"},
              server_.Raw(absl::StrCat("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n", auth,
                                       "Content-Length: lots\r\nConnection: close\r\n\r\n{}")));
  // A body cut short by the end of the stream: not handled as a request (no answer, or 400).
  Reply cut = server_.Raw(absl::StrCat("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n", auth,
                                       "Content-Type: application/json\r\nContent-Length: 500\r\n"
                                       "Connection: close\r\n\r\n{\"a\""),
                          /*half_close=*/true);
  EXPECT_TRUE(cut.status == 0 || cut.status == 400) << cut;
  EXPECT_NE(cut.status, 201);
  std::string many_headers = "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n" + auth;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&many_headers, "X-H", i, ": ", i, "\r\n");
  many_headers += "Connection: close\r\n\r\n";
  Reply r = server_.Raw(many_headers);
  EXPECT_EQ(r.status, 431) << r;  // at most 100 header lines (http/http_server.h)
  EXPECT_EQ(r.code(), "request_header_fields_too_large") << r;
  EXPECT_EQ(server_.Get("/api/v1/healthz", "").status, 200);
  EXPECT_EQ(server_.Get("/api/v1/readyz", "").status, 200);
}

}  // namespace
}  // namespace inac::server::testing
