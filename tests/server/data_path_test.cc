// The workers' data-path reports (server/data_path.h): POST /jobs/{id}/data-path stores each
// worker's latest report in memory, GET /jobs/{id} and GET /jobs answer the job's `data_path`
// (state, summary, sums, workers). The endpoint follows POST /jobs/{id}/progress: operators and
// the job's tenant's workers, 400 with `field` for a bad body or a worker not in the job, 404 for
// an unknown job, 409 unless the job is scheduled or running, audited. Reports are not persisted
// and leave with their job.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/data_path.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

Json Report(const std::string& worker, const std::string& path, int64_t allreduces,
            int64_t fallbacks, const std::string& reason = "") {
  Json j = {
      {"worker", worker}, {"path", path}, {"allreduces", allreduces}, {"fallbacks", fallbacks}};
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

class DataPathApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
    job_ = server_.Submit(SmallLeafSpineJob("ddp", "vision"));  // workers h0_0, h0_1; PS h1_0
    ASSERT_GT(job_, 0);
    ASSERT_TRUE(server_.Sync().ok());
    ASSERT_EQ(server_.JobState(job_), "running");
  }

  std::string Path(int64_t id, const std::string& suffix = "") {
    return absl::StrCat("/api/v1/jobs/", id, suffix);
  }
  Reply Post(int64_t id, const std::string& body, const std::string& token = kAdminToken) {
    return server_.Call("POST", Path(id, "/data-path"), body, token);
  }
  Reply Post(const Json& body, const std::string& token = kAdminToken) {
    return Post(job_, body.dump(), token);
  }
  // The job as GET /jobs lists it.
  Json Listed(int64_t id) {
    Reply list = server_.Get("/api/v1/jobs");
    EXPECT_EQ(list.status, 200) << list;
    for (const Json& j : list.json["jobs"]) {
      if (j["id"] == id) return j;
    }
    ADD_FAILURE() << "job " << id << " not listed";
    return Json::object();
  }

  TestServer server_;
  int64_t job_ = 0;
};

TEST_F(DataPathApiTest, AbsentBeforeAnyReport) {
  Reply job = server_.Get(Path(job_));
  ASSERT_EQ(job.status, 200) << job;
  EXPECT_FALSE(job.json.contains("data_path")) << job;
  EXPECT_FALSE(Listed(job_).contains("data_path"));
  EXPECT_FALSE(server_.controller().jobs().DataPath(job_).has_value());
}

TEST_F(DataPathApiTest, OneWorkerInaOneFallingBackIsMixed) {
  Reply ina = Post(Report("h0_0", "ina", 10, 0));
  ASSERT_EQ(ina.status, 200) << ina;
  EXPECT_EQ(ina.json["state"], "ina");
  EXPECT_EQ(ina.json["summary"], "INA active");

  Reply fb = Post(Report("h0_1", "fallback", 8, 3, "no aggregator grant"));
  ASSERT_EQ(fb.status, 200) << fb;
  EXPECT_EQ(fb.json["state"], "mixed");
  EXPECT_EQ(fb.json["summary"], "mixed (1 INA, 1 fallback); fallback: no aggregator grant");
  EXPECT_EQ(fb.json["allreduces"], 18);
  EXPECT_EQ(fb.json["fallbacks"], 3);

  // GET /jobs/{id} answers the same object, workers sorted by id.
  Reply job = server_.Get(Path(job_));
  ASSERT_EQ(job.status, 200) << job;
  ASSERT_TRUE(job.json.contains("data_path")) << job;
  const Json& dp = job.json["data_path"];
  EXPECT_EQ(dp, fb.json);
  ASSERT_EQ(dp["workers"].size(), 2u);
  const Json& w0 = dp["workers"][0];
  const Json& w1 = dp["workers"][1];
  EXPECT_EQ(w0["worker"], "h0_0");
  EXPECT_EQ(w0["path"], "ina");
  EXPECT_EQ(w0["reason"], "");
  EXPECT_EQ(w0["allreduces"], 10);
  EXPECT_EQ(w0["fallbacks"], 0);
  EXPECT_GT(w0["updated_ms"].get<int64_t>(), 0);
  EXPECT_EQ(w1["worker"], "h0_1");
  EXPECT_EQ(w1["path"], "fallback");
  EXPECT_EQ(w1["reason"], "no aggregator grant");
  EXPECT_EQ(w1["allreduces"], 8);
  EXPECT_EQ(w1["fallbacks"], 3);
  // And GET /jobs.
  EXPECT_EQ(Listed(job_)["data_path"], fb.json);

  // A newer report replaces its worker's: one entry per worker, sums of the latest.
  Reply again = Post(Report("h0_0", "ina", 20, 0));
  ASSERT_EQ(again.status, 200) << again;
  EXPECT_EQ(again.json["workers"].size(), 2u);
  EXPECT_EQ(again.json["allreduces"], 28);
  // Both back on INA.
  Reply back = Post(Report("h0_1", "ina", 12, 3));
  ASSERT_EQ(back.status, 200) << back;
  EXPECT_EQ(back.json["state"], "ina");
  EXPECT_EQ(back.json["summary"], "INA active");
  EXPECT_EQ(back.json["fallbacks"], 3);
}

TEST_F(DataPathApiTest, AllFallingBackNamesTheMostRecentReason) {
  ASSERT_EQ(Post(Report("h0_1", "fallback", 5, 5, "timeout after 30000 ms")).status, 200);
  Reply r = Post(Report("h0_0", "fallback", 5, 5, "controller unreachable"));
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.json["state"], "fallback");
  EXPECT_EQ(r.json["summary"], "fallback: controller unreachable");
  r = Post(Report("h0_1", "fallback", 6, 6, "switch lf0 gone"));
  EXPECT_EQ(r.json["summary"], "fallback: switch lf0 gone");
  // PS only; a null reason is no reason.
  ASSERT_EQ(Post(Report("h0_0", "ps", 7, 5)).status, 200);
  Json ps = Report("h0_1", "ps", 7, 6);
  ps["reason"] = nullptr;
  r = Post(ps);
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.json["state"], "ps");
  EXPECT_EQ(r.json["summary"], "PS only");
  EXPECT_EQ(r.json["workers"][1]["reason"], "");
}

TEST_F(DataPathApiTest, BadBodiesAre400WithTheirField) {
  struct Case {
    std::string name;
    std::string body;
    std::string field;
  };
  auto with = [](const std::function<void(Json&)>& edit) {
    Json j = Report("h0_0", "ina", 1, 0);
    edit(j);
    return j.dump();
  };
  const std::vector<Case> cases = {
      {"empty body", "", ""},
      {"not an object", "[1]", ""},
      {"malformed JSON", R"({"worker": )", ""},
      {"unknown field", with([](Json& j) { j["bucket"] = 3; }), "bucket"},
      {"worker missing", with([](Json& j) { j.erase("worker"); }), "worker"},
      {"worker not a string", with([](Json& j) { j["worker"] = 5; }), "worker"},
      {"worker not in the job (the PS)", with([](Json& j) { j["worker"] = "h1_0"; }), "worker"},
      {"worker not in the topology", with([](Json& j) { j["worker"] = "h9_9"; }), "worker"},
      {"empty worker", with([](Json& j) { j["worker"] = ""; }), "worker"},
      {"path missing", with([](Json& j) { j.erase("path"); }), "path"},
      {"unknown path", with([](Json& j) { j["path"] = "gloo"; }), "path"},
      {"path in capitals", with([](Json& j) { j["path"] = "INA"; }), "path"},
      {"path not a string", with([](Json& j) { j["path"] = 1; }), "path"},
      {"reason not a string", with([](Json& j) { j["reason"] = 5; }), "reason"},
      {"reason over 256 characters", with([](Json& j) { j["reason"] = std::string(257, 'r'); }),
       "reason"},
      {"reason with a newline", with([](Json& j) { j["reason"] = "no grant\nforged log line"; }),
       "reason"},
      {"reason with a C1 control", with([](Json& j) { j["reason"] = "a\xc2\x85z"; }), "reason"},
      {"allreduces missing", with([](Json& j) { j.erase("allreduces"); }), "allreduces"},
      {"allreduces negative", with([](Json& j) { j["allreduces"] = -1; }), "allreduces"},
      {"allreduces fractional", with([](Json& j) { j["allreduces"] = 1.5; }), "allreduces"},
      {"allreduces as a string", with([](Json& j) { j["allreduces"] = "3"; }), "allreduces"},
      {"allreduces beyond 2^53 - 1", with([](Json& j) { j["allreduces"] = kMaxDataPathCount + 1; }),
       "allreduces"},
      {"allreduces beyond int64", with([](Json& j) { j["allreduces"] = UINT64_MAX; }),
       "allreduces"},
      {"fallbacks missing", with([](Json& j) { j.erase("fallbacks"); }), "fallbacks"},
      {"fallbacks negative", with([](Json& j) { j["fallbacks"] = -2; }), "fallbacks"},
      {"fallbacks null", with([](Json& j) { j["fallbacks"] = nullptr; }), "fallbacks"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Reply r = Post(job_, c.body);
    EXPECT_EQ(r.status, 400) << r;
    EXPECT_EQ(r.code(), "invalid_argument") << r;
    if (!c.field.empty()) {
      EXPECT_EQ(r.field(), c.field) << r;
    }
    EXPECT_FALSE(r.message().empty()) << r;
  }
  // Nothing was stored; the limits themselves are accepted (256 characters of two bytes each).
  EXPECT_FALSE(server_.controller().jobs().DataPath(job_).has_value());
  Json edge = Report("h0_0", "fallback", kMaxDataPathCount, kMaxDataPathCount);
  std::string reason;
  for (int i = 0; i < 256; ++i) reason += "\xc3\xa9";  // U+00E9
  edge["reason"] = reason;
  Reply ok = Post(edge);
  ASSERT_EQ(ok.status, 200) << ok;
  EXPECT_EQ(ok.json["workers"][0]["reason"], reason);
  EXPECT_EQ(ok.json["allreduces"], kMaxDataPathCount);
}

TEST_F(DataPathApiTest, UnknownJobIs404) {
  Reply r = Post(777777, Report("h0_0", "ina", 1, 0).dump());
  EXPECT_EQ(r.status, 404) << r;
  EXPECT_EQ(r.code(), "not_found") << r;
}

TEST_F(DataPathApiTest, JobNotScheduledOrRunningIs409) {
  // Completed (its last progress report), cancelled, and pending again (unplaceable: lf0's
  // uplinks went down).
  const int64_t completed = server_.Submit(SmallLeafSpineJob("short", "vision", 10));
  const int64_t cancelled = server_.Submit(SmallLeafSpineJob("gone", "vision"));
  const int64_t pending = server_.Submit(SmallLeafSpineJob("stuck", "vision"));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.Call("POST", Path(completed, "/progress"), R"({"iterations_done": 10})").status,
            200);
  ASSERT_EQ(server_.Call("DELETE", Path(cancelled)).status, 200);
  for (const char* link : {"sp0~lf0", "sp1~lf0"}) {
    ASSERT_EQ(
        server_.Call("PATCH", absl::StrCat("/api/v1/links/", link), R"({"status": "down"})").status,
        200);
  }
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(completed), "completed");
  ASSERT_EQ(server_.JobState(cancelled), "cancelled");
  ASSERT_EQ(server_.JobState(pending), "pending");
  for (int64_t id : {completed, cancelled, pending}) {
    SCOPED_TRACE(server_.JobState(id));
    Reply r = Post(id, Report("h0_0", "ina", 1, 0).dump());
    EXPECT_EQ(r.status, 409) << r;
    EXPECT_EQ(r.code(), "failed_precondition") << r;
    EXPECT_TRUE(absl::StrContains(r.message(), "scheduled or running")) << r;
    EXPECT_FALSE(server_.controller().jobs().DataPath(id).has_value());
  }
}

TEST_F(DataPathApiTest, DroppedWhenTheJobIsCancelled) {
  ASSERT_EQ(Post(Report("h0_0", "ina", 3, 0)).status, 200);
  ASSERT_EQ(Post(Report("h0_1", "fallback", 3, 1, "timeout")).status, 200);
  ASSERT_TRUE(server_.Get(Path(job_)).json.contains("data_path"));
  Reply cancel = server_.Call("DELETE", Path(job_));
  ASSERT_EQ(cancel.status, 200) << cancel;
  Reply job = server_.Get(Path(job_));
  ASSERT_EQ(job.status, 200) << job;
  EXPECT_EQ(job.json["state"], "cancelled");
  EXPECT_FALSE(job.json.contains("data_path")) << job;
  EXPECT_FALSE(Listed(job_).contains("data_path"));
  EXPECT_FALSE(server_.controller().jobs().DataPath(job_).has_value());
  EXPECT_EQ(Post(Report("h0_0", "ina", 4, 0)).status, 409);
}

TEST_F(DataPathApiTest, DroppedWhenTheJobCompletesOrFails) {
  // Completed by its last progress report.
  ASSERT_EQ(Post(Report("h0_0", "ina", 3, 0)).status, 200);
  ASSERT_EQ(server_.Call("POST", Path(job_, "/progress"), R"({"iterations_done": 100})").status,
            200);
  EXPECT_FALSE(server_.controller().jobs().DataPath(job_).has_value());
  EXPECT_FALSE(server_.Get(Path(job_)).json.contains("data_path"));

  // Failed by the loop: its worker h0_1 left the topology.
  const int64_t other = server_.Submit(SmallLeafSpineJob("fails", "vision"));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(other), "running");
  ASSERT_EQ(Post(other, Report("h0_1", "ps", 1, 0).dump()).status, 200);
  core::Topology smaller = SmallLeafSpine();
  std::erase_if(smaller.hosts, [](const core::Host& h) { return h.id == "h0_1"; });
  std::erase_if(smaller.links, [](const core::Link& l) { return l.a == "h0_1" || l.b == "h0_1"; });
  ASSERT_EQ(server_.PutTopology(smaller), 200);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(other), "failed");
  EXPECT_FALSE(server_.controller().jobs().DataPath(other).has_value());
  EXPECT_FALSE(server_.Get(Path(other)).json.contains("data_path"));
}

TEST_F(DataPathApiTest, NotPersistedAcrossARestart) {
  ASSERT_EQ(Post(Report("h0_0", "ina", 3, 0)).status, 200);
  ASSERT_TRUE(server_.Restart().ok());
  ASSERT_TRUE(server_.Sync().ok());
  Reply job = server_.Get(Path(job_));
  ASSERT_EQ(job.status, 200) << job;
  EXPECT_EQ(job.json["state"], "running");
  EXPECT_FALSE(job.json.contains("data_path")) << job;
  EXPECT_EQ(Post(Report("h0_0", "ina", 4, 0)).status, 200);  // the workers report again
}

TEST_F(DataPathApiTest, AccessAsProgressAndAudited) {
  const int64_t nlp = server_.Submit(SmallLeafSpineJob("nlp-job", "nlp"));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(nlp), "running");
  const std::string body = Report("h0_0", "ina", 1, 0).dump();
  EXPECT_EQ(Post(job_, body, kOperatorToken).status, 200);
  EXPECT_EQ(Post(job_, body, kWorkerToken).status, 200);  // its tenant's job
  Reply other = Post(nlp, body, kWorkerToken);            // another tenant's
  EXPECT_EQ(other.status, 403) << other;
  EXPECT_EQ(other.code(), "permission_denied");
  EXPECT_EQ(Post(nlp, body, kOtherWorkerToken).status, 200);
  EXPECT_EQ(Post(job_, body, kViewerToken).status, 403);
  Reply anonymous = Post(job_, body, "");
  EXPECT_EQ(anonymous.status, 401) << anonymous;
  EXPECT_EQ(anonymous.code(), "unauthenticated");
  // A worker reads its job's data path.
  Reply read = server_.Get(Path(job_), kWorkerToken);
  ASSERT_EQ(read.status, 200) << read;
  EXPECT_EQ(read.json["data_path"]["state"], "ina");
  // Media type and size, as every body.
  Reply text = server_.Call("POST", Path(job_, "/data-path"), body, kAdminToken,
                            {{"Content-Type", "text/plain"}});
  EXPECT_EQ(text.status, 415) << text;
  Json big = Report("h0_0", "ina", 1, 0);
  big["pad"] = std::string(1 << 20, 'p');
  Reply large = Post(big);
  EXPECT_EQ(large.status, 413) << large;
  EXPECT_EQ(large.code(), "payload_too_large");

  // Audited as every write: the worker's accepted report, with the job it named.
  Reply audit = server_.Get("/api/v1/audit?actor=worker-vision");
  ASSERT_EQ(audit.status, 200) << audit;
  bool found = false;
  for (const Json& e : audit.json["entries"]) {
    if (e["method"] == "POST" && e["path"] == Path(job_, "/data-path") && e["status"] == 200) {
      EXPECT_EQ(e["job_id"], job_);
      found = true;
    }
  }
  EXPECT_TRUE(found) << audit;
}

// --- DataPathBook alone.

DataPathReport R(const std::string& worker, DataPathKind path, int64_t allreduces = 0,
                 int64_t fallbacks = 0, const std::string& reason = "") {
  DataPathReport r;
  r.worker = worker;
  r.path = path;
  r.allreduces = allreduces;
  r.fallbacks = fallbacks;
  r.reason = reason;
  return r;
}

TEST(DataPathBookTest, SummariesOfEveryMix) {
  DataPathBook book;
  EXPECT_FALSE(book.Get(1).has_value());
  EXPECT_EQ(book.Record(1, R("w1", DataPathKind::kPs)).summary, "PS only");
  JobDataPath d = book.Record(1, R("w0", DataPathKind::kIna));
  EXPECT_EQ(d.state, "mixed");
  EXPECT_EQ(d.summary, "mixed (1 INA, 1 PS)");
  ASSERT_EQ(d.workers.size(), 2u);
  EXPECT_EQ(d.workers[0].worker, "w0");  // by worker id
  d = book.Record(1, R("w2", DataPathKind::kFallback));
  EXPECT_EQ(d.summary, "mixed (1 INA, 1 PS, 1 fallback); fallback (no reason given)");
  // The most recently received fallback report names the reason, whatever the worker order.
  book.Record(1, R("w2", DataPathKind::kFallback, 0, 0, "late"));
  d = book.Record(1, R("w0", DataPathKind::kFallback, 0, 0, "latest"));
  EXPECT_EQ(d.summary, "mixed (1 PS, 2 fallback); fallback: latest");
  d = book.Record(1, R("w2", DataPathKind::kFallback, 0, 0, "newest"));
  EXPECT_EQ(d.summary, "mixed (1 PS, 2 fallback); fallback: newest");
  d = book.Record(1, R("w1", DataPathKind::kFallback));
  EXPECT_EQ(d.state, "fallback");
  EXPECT_EQ(d.summary, "fallback (no reason given)");
  EXPECT_EQ(book.size(), 3u);
}

TEST(DataPathBookTest, SumsSaturate) {
  DataPathBook book;
  const int64_t big = std::numeric_limits<int64_t>::max() - 1;
  book.Record(1, R("a", DataPathKind::kIna, big, big));
  JobDataPath d = book.Record(1, R("b", DataPathKind::kIna, 5, 5));
  EXPECT_EQ(d.allreduces, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(d.fallbacks, std::numeric_limits<int64_t>::max());
}

TEST(DataPathBookTest, DropAndRetain) {
  DataPathBook book;
  book.Record(1, R("a", DataPathKind::kIna));
  book.Record(2, R("a", DataPathKind::kIna));
  book.Record(2, R("b", DataPathKind::kPs));
  book.Record(3, R("a", DataPathKind::kIna));
  EXPECT_EQ(book.size(), 4u);
  book.Drop(1);
  EXPECT_FALSE(book.Get(1).has_value());
  core::Job running;
  running.id = 2;
  running.state = core::JobState::kRunning;
  core::Job ended;
  ended.id = 3;
  ended.state = core::JobState::kCancelled;
  book.Retain({running, ended});
  EXPECT_TRUE(book.Get(2).has_value());
  EXPECT_FALSE(book.Get(3).has_value());
  EXPECT_EQ(book.size(), 2u);
}

}  // namespace
}  // namespace inac::server::testing
