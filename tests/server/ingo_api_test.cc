// InGo in the controller (docs/batch-size.md): `algorithm: ingo` chooses the batch size
// a worker reads from /config, progress reports carry the gradient statistics of the noise-scale
// refit (validated), and a refit that changes the best batch re-plans with a `job_batch_size`
// event. In-process server (tests/server/server_fixture.h), fake switches, port 0.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "server/batch_refit.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

class IngoApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServerOptions options;
    options.controller.algorithm = "ingo";
    options.controller.batch_min_interval_ms = 0;  // the refit may change the batch at once
    server_ = std::make_unique<TestServer>(options);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_EQ(server_->PutTopology(SmallLeafSpine()), 200);
    ASSERT_TRUE(server_->Sync().ok());
  }
  Reply Progress(int64_t id, const Json& body) {
    return server_->Call("POST", absl::StrCat("/api/v1/jobs/", id, "/progress"), body.dump());
  }
  int ConfigBatch(int64_t id) {
    Reply r = server_->Get(absl::StrCat("/api/v1/jobs/", id, "/config"));
    EXPECT_EQ(r.status, 200) << r;
    return r.status == 200 ? r.json["batch_size"].get<int>() : -1;
  }
  std::unique_ptr<TestServer> server_;
};

TEST_F(IngoApiTest, ChoosesTheBatchRefitsTheNoiseScaleAndAnnouncesTheChange) {
  // ResNet50 on 2 workers with a noise scale of 10^6: the steps fall as 1/B, so the largest
  // batch wins.
  Json spec = SmallLeafSpineJob("ingo", "vision", 1000);
  spec["batch_size"] = 32;
  spec["batch_sizes"] = {32, 64, 128, 256};
  spec["noise_scale"] = 1e6;
  const int64_t id = server_->Submit(spec);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_->Sync().ok());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(ConfigBatch(id), 256);

  // Bad statistics: 400 with the field, nothing recorded.
  Reply r = Progress(id, {{"iterations_done", 1}, {"grad_sqr_local", 1.0}});
  EXPECT_EQ(r.status, 400) << r;
  EXPECT_EQ(r.field(), "grad_sqr_global");
  r = Progress(id, {{"iterations_done", 1}, {"grad_sqr_local", -1.0}, {"grad_sqr_global", 1.0}});
  EXPECT_EQ(r.status, 400) << r;
  EXPECT_EQ(r.field(), "grad_sqr_local");

  // Reports of a true noise scale of 10 (|G|^2 = 1, tr(S) = 10 at b = 256, B = 512): the steps
  // hardly depend on the batch any more, so the compute of a large batch is wasted: 32 wins.
  r = Progress(id, {{"iterations_done", 2},
                    {"grad_sqr_local", 1 + 10.0 / 256},
                    {"grad_sqr_global", 1 + 10.0 / 512}});
  ASSERT_EQ(r.status, 200) << r;
  ASSERT_TRUE(server_->Sync().ok());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(ConfigBatch(id), 32);
  Reply events = server_->Get(absl::StrCat("/api/v1/events?job=", id, "&kind=job_batch_size"));
  ASSERT_EQ(events.status, 200) << events;
  int changes = 0;
  for (const Json& e : events.json["events"]) {
    if (e["kind"] == "job_batch_size") {
      ++changes;
      EXPECT_EQ(e["message"], "batch size 256 -> 32 per worker");
    }
  }
  EXPECT_EQ(changes, 1) << server_->Get("/api/v1/events").body;

  // The refit is an event, and a restart restores it: the job stays at 32 (from the spec's noise
  // scale alone the planner would go back to 256) and no second batch change is announced.
  Reply refits = server_->Get(absl::StrCat("/api/v1/events?job=", id, "&kind=noise_scale_refit"));
  ASSERT_EQ(refits.status, 200) << refits;
  ASSERT_EQ(refits.json["events"].size(), 1u) << refits;
  EXPECT_NEAR(refits.json["events"][0]["data"]["noise_scale"].get<double>(), 10.0, 0.5) << refits;
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(server_->Sync().ok());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(ConfigBatch(id), 32);
  events = server_->Get(absl::StrCat("/api/v1/events?job=", id, "&kind=job_batch_size"));
  ASSERT_EQ(events.status, 200) << events;
  EXPECT_EQ(events.json["events"].size(), 1u) << events;
}

TEST_F(IngoApiTest, ARefitOfAOneWorkerJobIs409AndRecordsNothing) {
  Json spec = SmallLeafSpineJob("solo", "vision", 1000);
  spec["workers"] = {"h0_0"};
  const int64_t id = server_->Submit(spec);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_->Sync().ok());
  ASSERT_TRUE(server_->Sync().ok());
  Reply r =
      Progress(id, {{"iterations_done", 7}, {"grad_sqr_local", 2.0}, {"grad_sqr_global", 1.0}});
  EXPECT_EQ(r.status, 409) << r;
  EXPECT_NE(r.body.find("at least two workers"), std::string::npos) << r;
  Reply job = server_->Get(absl::StrCat("/api/v1/jobs/", id));
  ASSERT_EQ(job.status, 200) << job;
  EXPECT_EQ(job.json["iterations_done"], 0) << job;
  r = Progress(id, {{"iterations_done", 7}});
  EXPECT_EQ(r.status, 200) << r;
}

TEST(BatchRefitRestoreTest, ReplaysRefitsAndChangesAndSkipsMalformedData) {
  BatchRefit refit;
  auto event = [](int64_t seq, const char* kind, core::JobId job, const char* data) {
    core::Event e;
    e.seq = seq;
    e.time_ms = 1000 * seq;
    e.kind = kind;
    e.job_id = job;
    e.data_json = data;
    return e;
  };
  refit.Restore({event(1, "noise_scale_refit", 7, R"({"noise_scale": 120.5})"),
                 event(2, "noise_scale_refit", 7, R"({"noise_scale": 80})"),
                 event(3, "noise_scale_refit", 8, R"({"noise_scale": "x"})"),
                 event(4, "noise_scale_refit", 9, "not json"),
                 event(5, "noise_scale_refit", 10, R"({"noise_scale": -3})"),
                 event(6, "job_batch_size", 7, "{}"), event(7, "job_state", 11, "{}")});
  EXPECT_EQ(refit.Published(7), 80.0);  // the newest wins
  EXPECT_EQ(refit.Published(8), std::nullopt);
  EXPECT_EQ(refit.Published(9), std::nullopt);
  EXPECT_EQ(refit.Published(10), std::nullopt);
  EXPECT_EQ(refit.ChangedMs(), (std::map<core::JobId, int64_t>{{7, 6000}}));
}

}  // namespace
}  // namespace inac::server::testing
