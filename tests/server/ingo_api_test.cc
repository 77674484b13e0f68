// InGo in the controller (issue 16, docs/batch-size.md): `algorithm: ingo` chooses the batch size
// a worker reads from /config, progress reports carry the gradient statistics of the noise-scale
// refit (validated), and a refit that changes the best batch re-plans with a `job_batch_size`
// event. In-process server (tests/server/server_fixture.h), fake switches, port 0.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
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
}

}  // namespace
}  // namespace inac::server::testing
