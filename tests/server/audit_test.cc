// The audit log of API writes and the retention of finished jobs in the running controller
// (docs/controller.md "Audit log and retention"): every write that passed authentication is
// recorded with the token's name and the final status, reads are not, refusals at admission are
// counted instead, GET /audit is for admins only; finished jobs are pruned at start and by
// RunRetention with their events.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

// Every audit entry, through GET /audit (admin), oldest first.
std::vector<Json> AuditEntries(TestServer& server, const std::string& query = "") {
  std::vector<Json> entries;
  std::string after = "0";
  for (int page = 0; page < 100; ++page) {
    Reply r = server.Get(absl::StrCat("/api/v1/audit?limit=1000&after=", after, query));
    EXPECT_EQ(r.status, 200) << r;
    if (r.status != 200) break;
    for (const Json& e : r.json["entries"]) entries.push_back(e);
    if (r.json["next_after"].is_null()) break;
    after = std::to_string(r.json["next_after"].get<int64_t>());
  }
  return entries;
}

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
  }
  TestServer server_;
};

TEST_F(AuditTest, WriteWithANamedTokenIsAuditedWithItsNameAndStatus) {
  Reply submitted =
      server_.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("audited").dump(), kOperatorToken);
  ASSERT_EQ(submitted.status, 201) << submitted;
  const int64_t id = submitted.json["id"].get<int64_t>();

  std::vector<Json> entries = AuditEntries(server_);
  ASSERT_EQ(entries.size(), 2u);  // PUT /topology (SetUp), POST /jobs
  const Json& put = entries[0];
  EXPECT_EQ(put["actor"], "admin");
  EXPECT_EQ(put["role"], "admin");
  EXPECT_EQ(put["method"], "PUT");
  EXPECT_EQ(put["path"], "/api/v1/topology");
  EXPECT_EQ(put["status"], 200);
  EXPECT_TRUE(put["job_id"].is_null());
  const Json& post = entries[1];
  EXPECT_EQ(post["actor"], "operator");
  EXPECT_EQ(post["role"], "operator");
  EXPECT_EQ(post["method"], "POST");
  EXPECT_EQ(post["path"], "/api/v1/jobs");
  EXPECT_EQ(post["status"], 201);
  EXPECT_EQ(post["job_id"], id);  // the job it created
  EXPECT_EQ(post["remote_addr"], "127.0.0.1");
  EXPECT_GT(post["seq"].get<int64_t>(), put["seq"].get<int64_t>());
  EXPECT_GT(post["time_ms"].get<int64_t>(), 1'600'000'000'000);  // the controller's clock
  // Never a token or a body.
  const std::string dump = Json(entries).dump();
  EXPECT_EQ(dump.find(kOperatorToken), std::string::npos);
  EXPECT_EQ(dump.find("gradient_bytes"), std::string::npos);

  // The cancellation names its job; the replayed idempotent submission (200) names the first.
  Reply cancel = server_.Call("DELETE", absl::StrCat("/api/v1/jobs/", id), "", kAdminToken);
  ASSERT_EQ(cancel.status, 200) << cancel;
  entries = AuditEntries(server_);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[2]["method"], "DELETE");
  EXPECT_EQ(entries[2]["path"], absl::StrCat("/api/v1/jobs/", id));
  EXPECT_EQ(entries[2]["job_id"], id);
  EXPECT_EQ(entries[2]["actor"], "admin");
}

TEST_F(AuditTest, ReadsAreNotAudited) {
  const size_t before = AuditEntries(server_).size();
  for (const char* path : {"/api/v1/jobs", "/api/v1/topology", "/api/v1/switches", "/api/v1/plan",
                           "/api/v1/events", "/api/v1/healthz", "/api/v1/metrics"}) {
    Reply r = server_.Get(path, kViewerToken);
    EXPECT_NE(r.status, 0) << path;
  }
  Reply audit = server_.Get("/api/v1/audit");  // reading the log is a read too
  EXPECT_EQ(audit.status, 200);
  EXPECT_EQ(AuditEntries(server_).size(), before);
}

TEST_F(AuditTest, FailedWritesAreAuditedWithTheirStatus) {
  const size_t before = AuditEntries(server_).size();
  // 404: an unknown job (the path names it); 400: a body that is not JSON; 409: a second cancel.
  EXPECT_EQ(server_.Call("DELETE", "/api/v1/jobs/999999", "", kOperatorToken).status, 404);
  EXPECT_EQ(server_.Call("POST", "/api/v1/jobs", "{not json", kOperatorToken).status, 400);
  const int64_t id = server_.Submit(SmallLeafSpineJob("twice"));
  ASSERT_GT(id, 0);
  EXPECT_EQ(server_.Call("DELETE", absl::StrCat("/api/v1/jobs/", id)).status, 200);
  EXPECT_EQ(server_.Call("DELETE", absl::StrCat("/api/v1/jobs/", id)).status, 409);
  // The query string is not recorded.
  EXPECT_EQ(server_.Call("POST", "/api/v1/plan/preview?secret=x", "{}", kOperatorToken).status,
            400);

  std::vector<Json> entries = AuditEntries(server_);
  ASSERT_EQ(entries.size(), before + 6);
  auto at = [&](size_t i) -> const Json& { return entries[before + i]; };
  EXPECT_EQ(at(0)["status"], 404);
  EXPECT_EQ(at(0)["job_id"], 999999);
  EXPECT_EQ(at(0)["actor"], "operator");
  EXPECT_EQ(at(1)["status"], 400);
  EXPECT_EQ(at(1)["path"], "/api/v1/jobs");
  EXPECT_TRUE(at(1)["job_id"].is_null());
  EXPECT_EQ(at(2)["status"], 201);
  EXPECT_EQ(at(3)["status"], 200);
  EXPECT_EQ(at(4)["status"], 409);
  EXPECT_EQ(at(4)["job_id"], id);
  EXPECT_EQ(at(5)["path"], "/api/v1/plan/preview");
  EXPECT_EQ(at(5)["status"], 400);
}

TEST_F(AuditTest, OnlyAdminsReadTheAuditLog) {
  EXPECT_EQ(server_.Get("/api/v1/audit", kAdminToken).status, 200);
  for (const char* token : {kViewerToken, kOperatorToken, kWorkerToken}) {
    Reply r = server_.Get("/api/v1/audit", token);
    EXPECT_EQ(r.status, 403) << token << " " << r;
    EXPECT_EQ(r.code(), "permission_denied");
  }
  Reply anonymous = server_.Get("/api/v1/audit", "");
  EXPECT_EQ(anonymous.status, 401) << anonymous;
}

TEST_F(AuditTest, RefusalsAtAdmissionAreCountedNotAudited) {
  const size_t before = AuditEntries(server_).size();
  const int64_t refusals = server_.controller().Metrics().auth_refusals;
  // 403: a viewer's write; 401: no token, an unknown token.
  EXPECT_EQ(
      server_.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("v").dump(), kViewerToken).status,
      403);
  EXPECT_EQ(server_.Call("PUT", "/api/v1/topology", "{}", "").status, 401);
  EXPECT_EQ(server_.Call("DELETE", "/api/v1/jobs/1", "", "not-a-token-0123456789").status, 401);
  EXPECT_EQ(AuditEntries(server_).size(), before);
  EXPECT_EQ(server_.controller().Metrics().auth_refusals, refusals + 3);
  Reply metrics = server_.Get("/api/v1/metrics");
  EXPECT_NE(metrics.body.find("inac_http_auth_refusals_total{code=\"401\"} 2"), std::string::npos)
      << metrics.body.substr(0, 2000);
  EXPECT_NE(metrics.body.find("inac_http_auth_refusals_total{code=\"403\"} 1"), std::string::npos);
}

TEST_F(AuditTest, WorkerRefusedForAnotherTenantIsAudited) {
  // Admitted (a worker may call the route), refused by the handler thread's tenant check.
  const int64_t nlp = server_.Submit(SmallLeafSpineJob("nlp-job", "nlp"));
  ASSERT_GT(nlp, 0);
  Reply r = server_.Call("POST", absl::StrCat("/api/v1/jobs/", nlp, "/progress"),
                         R"({"iterations_done": 1})", kWorkerToken);
  EXPECT_EQ(r.status, 403) << r;
  std::vector<Json> entries = AuditEntries(server_);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.back()["actor"], "worker-vision");
  EXPECT_EQ(entries.back()["role"], "worker");
  EXPECT_EQ(entries.back()["status"], 403);
  EXPECT_EQ(entries.back()["job_id"], nlp);
}

TEST_F(AuditTest, PagesByCursorAndFiltersByActor) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_GT(server_.Submit(SmallLeafSpineJob(absl::StrCat("j", i))), 0);  // admin
    Reply r =
        server_.Call("POST", "/api/v1/plan/preview", SmallLeafSpineJob("p").dump(), kOperatorToken);
    ASSERT_EQ(r.status, 200) << r;
  }
  Reply first = server_.Get("/api/v1/audit?limit=4");
  ASSERT_EQ(first.status, 200) << first;
  ASSERT_EQ(first.json["entries"].size(), 4u);
  ASSERT_TRUE(first.json["next_after"].is_number_integer());
  EXPECT_EQ(first.json["next_after"], first.json["entries"][3]["seq"]);
  Reply second = server_.Get(
      absl::StrCat("/api/v1/audit?limit=4&after=", first.json["next_after"].get<int64_t>()));
  ASSERT_EQ(second.status, 200);
  EXPECT_GT(second.json["entries"][0]["seq"].get<int64_t>(),
            first.json["entries"][3]["seq"].get<int64_t>());

  std::vector<Json> operators = AuditEntries(server_, "&actor=operator");
  ASSERT_EQ(operators.size(), 5u);
  for (const Json& e : operators) EXPECT_EQ(e["path"], "/api/v1/plan/preview");
  EXPECT_EQ(AuditEntries(server_, "&actor=admin").size(), 6u);  // PUT /topology + 5 jobs
  EXPECT_TRUE(AuditEntries(server_, "&actor=nobody").empty());

  for (const char* bad : {"limit=0", "limit=1001", "after=-1", "after=x", "actor="}) {
    Reply r = server_.Get(absl::StrCat("/api/v1/audit?", bad));
    EXPECT_EQ(r.status, 400) << bad << " " << r;
    EXPECT_EQ(r.code(), "invalid_argument") << bad;
  }
}

TEST(AuditWithoutTokensTest, WritesAreAuditedAsAnonymous) {
  TestServerOptions options;
  options.tokens = {};
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  std::vector<Json> entries = AuditEntries(server);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["actor"], "anonymous");
  EXPECT_EQ(entries[0]["role"], "none");
}

// An AuditService whose appends fail: the storage of the audit log is down.
class FailingAudit : public AuditService {
 public:
  absl::Status RecordAudit(core::AuditEntry) override {
    ++calls;
    return absl::UnavailableError("audit storage down");
  }
  absl::StatusOr<core::AuditPage> ListAudit(const core::AuditFilter&) override {
    return absl::UnavailableError("audit storage down");
  }
  std::atomic<int> calls{0};
};

TEST(AuditFailureTest, TheAnswerStandsAndTheFailureIsCounted) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  FailingAudit failing;
  ApiServices services = server.controller().services();
  services.audit = &failing;
  northbound::HttpApiOptions options;
  options.tokens = DefaultTokens();
  northbound::HttpApi api(services, options);
  auto port = api.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  std::thread serve([&] { api.Serve(); });
  auto client = northbound::ApiClient::Create(
      {.server = absl::StrCat("http://127.0.0.1:", *port), .token = kAdminToken});
  ASSERT_TRUE(client.ok());
  northbound::RawRequest put;
  put.method = "PUT";
  put.target = "/api/v1/topology";
  put.body = core::TopologyToJson(SmallLeafSpine()).dump();
  auto reply = (*client)->SendRaw(put);
  api.Stop();
  serve.join();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->http_status, 200) << reply->body;  // the write committed and is answered
  EXPECT_TRUE(server.controller().topology().GetTopology()->has_value());
  EXPECT_EQ(failing.calls.load(), 1);
  EXPECT_EQ(server.controller().Metrics().audit_failures, 1);
}

// --- retention in the controller ---

TEST(RetentionTest, FinishedJobsArePrunedWithTheirEventsActiveOnesKept) {
  TestServerOptions options;
  options.controller.retention.finished_jobs_ms = 1;  // anything finished before the last ms
  options.controller.retention.audit_ms = 0;          // the audit log is kept
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  const int64_t active = server.Submit(SmallLeafSpineJob("active"));
  const int64_t done = server.Submit(SmallLeafSpineJob("done"));
  ASSERT_GT(done, 0);
  ASSERT_EQ(server.Call("DELETE", absl::StrCat("/api/v1/jobs/", done)).status, 200);
  ASSERT_TRUE(server.Sync().ok());
  ASSERT_FALSE(server.storage().events().List({.job_id = done})->empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the cancellation is > 1 ms old

  auto pruned = server.controller().RunRetention();
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->jobs, 1);
  EXPECT_EQ(pruned->audit, 0);
  EXPECT_EQ(server.Get(absl::StrCat("/api/v1/jobs/", done)).status, 404);
  EXPECT_EQ(server.Get(absl::StrCat("/api/v1/jobs/", active)).status, 200);
  EXPECT_TRUE(server.storage().events().List({.job_id = done})->empty());
  EXPECT_FALSE(server.storage().events().List({.job_id = active})->empty());
  // Said in an event and in the metrics; the audit log is untouched (audit_ms = 0).
  auto said = server.storage().events().List({.kind = "retention_pruned"});
  ASSERT_EQ(said->size(), 1u);
  EXPECT_NE((*said)[0].message.find("removed 1 finished job"), std::string::npos)
      << (*said)[0].message;
  EXPECT_EQ(server.controller().Metrics().pruned_jobs, 1);
  EXPECT_EQ(AuditEntries(server).size(), 4u);  // PUT, POST, POST, DELETE
  // Nothing left to prune: no event.
  EXPECT_EQ(server.controller().RunRetention()->jobs, 0);
  EXPECT_EQ(server.storage().events().List({.kind = "retention_pruned"})->size(), 1u);
}

TEST(RetentionTest, ControllerPrunesAtStart) {
  TestServerOptions options;
  options.controller.retention.finished_jobs_ms = 1;
  options.controller.retention.audit_ms = 1;
  TestServer server(options);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  const int64_t done = server.Submit(SmallLeafSpineJob("done"));
  ASSERT_GT(done, 0);
  ASSERT_EQ(server.Call("DELETE", absl::StrCat("/api/v1/jobs/", done)).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(server.Restart().ok());
  // The retention thread's first run, at start: poll (bounded) until it is done.
  bool gone = false;
  for (int i = 0; i < 600 && !gone; ++i) {
    gone = server.Get(absl::StrCat("/api/v1/jobs/", done)).status == 404 &&
           server.storage().events().List({.kind = "retention_pruned"})->size() == 1;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone);
  // The audit entries written before the restart went too (those of the polling GETs are none).
  EXPECT_TRUE(AuditEntries(server).empty());
}

TEST(RetentionTest, InvalidOptionsAreRefusedAtStart) {
  TestServerOptions options;
  options.controller.retention.period_ms = 0;
  TestServer server(options);
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::server::testing
