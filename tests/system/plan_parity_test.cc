// `inac plan` prints what the controller plans: both call scheduler::ComputePlan with
// the same defaults. A controller (no switches) gets a topology and two jobs; once it has planned
// both, its plan (GET /plan) must equal `inac plan` on the same topology and jobs file, job by job:
// shares, flows, aggregator paths, aggregator grants, evaluated rates, batch sizes, generations.
// Priorities are left out: they age with the controller's clock (whole 10 s periods), and a job
// submitted just before a period boundary is planned one period older than `inac plan` assumes.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "core/generators.h"
#include "core/json.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

TEST(PlanParityTest, InacPlanEqualsTheControllersPlan) {
  const std::string dir = MakeTempDir("parity");
  ASSERT_FALSE(dir.empty());
  ControllerProcess controller;
  ASSERT_TRUE(controller.Start(dir, "c", dir + "/inac.db", Json::object()).ok());
  const core::Topology t = LeafSpine(2, 2, 4, {.ina = core::InaPlacement::Kind::kAll});
  const std::string topology = WriteFile(dir + "/topo.json", core::TopologyToJson(t).dump());
  auto job = [](const std::string& name, std::vector<std::string> workers, const std::string& ps,
                int64_t bytes) -> Json {
    return fixtures::JobJson({.name = name,
                              .workers = std::move(workers),
                              .parameter_servers = {ps},
                              .gradient_bytes = bytes,
                              .compute_ms = 10});
  };
  const Json jobs = {{"jobs",
                      {job("a", {"h0_0", "h0_1", "h1_0", "h1_1"}, "h1_3", 4000000),
                       job("b", {"h0_2", "h0_3", "h1_2"}, "h0_1", 1000000)}}};
  const std::string jobs_file = WriteFile(dir + "/jobs.json", jobs.dump());
  const std::string server = " --server " + controller.base_url();
  CliRun r = RunInac("topo apply " + topology + server, dir);
  ASSERT_EQ(r.exit, 0) << r.out;
  r = RunInac("job submit " + jobs_file + server, dir);
  ASSERT_EQ(r.exit, 0) << r.out;

  Rest rest(controller.host_port());
  Json served;
  for (int i = 0; i < 300 && !served.is_object(); ++i) {  // bounded: 30 s
    Response p = rest.Get("/plan");
    if (p.status == 200 && p.body["jobs"].size() == 2)
      served = p.body;
    else
      absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(served.is_object()) << "the controller did not plan both jobs";

  r = RunInac("plan --topology " + topology + " --jobs " + jobs_file + " --compact", dir);
  ASSERT_EQ(r.exit, 0) << r.out;
  const Json offline = Json::parse(r.out.substr(0, r.out.find("--stderr--")), nullptr, false);
  ASSERT_TRUE(offline.is_object()) << r.out;
  EXPECT_EQ(offline["algorithm"], served["algorithm"]);
  EXPECT_EQ(offline["memory_policy"], served["memory_policy"]);
  ASSERT_EQ(offline["jobs"].size(), 2u);
  for (size_t j = 0; j < 2; ++j) {
    const Json& a = offline["jobs"][j];
    const Json& b = served["jobs"][j];
    SCOPED_TRACE("job " + a["job_id"].dump());
    EXPECT_EQ(a["job_id"], b["job_id"]);
    for (const char* key : {"ps_shares", "flows", "aggregator_paths", "aggregators", "rate_gbps",
                            "comm_ms", "iteration_ms", "batch_size"}) {
      EXPECT_EQ(a.value(key, Json()), b.value(key, Json())) << key;
    }
    EXPECT_EQ(a.value("generation", 0), b.value("generation", 0));
    EXPECT_FALSE(a["flows"].empty());
  }
  // Something was aggregated in the network (the comparison is not between two empty plans).
  bool aggregated = false;
  for (const Json& f : offline["jobs"][0]["flows"]) aggregated |= f["aggregation_node"] != "h1_3";
  EXPECT_TRUE(aggregated);
  controller.Terminate();
  std::error_code ignored;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace inac::systest
