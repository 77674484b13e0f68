// The CLI's client verbs (cli/cmd_client.h) against a real `inac serve` process: each verb is
// run as its own `inac` process, its stdout and exit code checked, and the effect read back over
// REST. No switches: the topology has no p4runtime endpoints (planning only).
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

class CliClientTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("cli");
    absl::Status s = controller_.Start(dir_, "c", dir_ + "/inac.db", Json::object());
    ASSERT_TRUE(s.ok()) << s;
    server_ = "--server " + controller_.base_url();
  }
  void TearDown() override {
    controller_.Terminate();
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  std::string server_;
  ControllerProcess controller_;
};

TEST_F(CliClientTest, AppliesTopologySubmitsListsAndCancels) {
  core::Topology t = LeafSpine(2, 1, 3);
  std::string topo = WriteFile(dir_ + "/topo.json", core::TopologyToJson(t).dump());
  CliRun r = RunInac("topo apply " + topo + " " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  EXPECT_NE(r.out.find("applied, version 1"), std::string::npos) << r.out;

  r = RunInac("topo show " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  EXPECT_NE(r.out.find(t.hosts[0].id), std::string::npos);

  Json job = fixtures::JobJson({.name = "j",
                                .tenant = "team-a",
                                .workers = {t.hosts[0].id, t.hosts[3].id},
                                .parameter_servers = {t.hosts[1].id},
                                .gradient_bytes = 1000000,
                                .compute_ms = 10});
  Json second = job;
  second["name"] = "k";
  second["tenant"] = "team+b";
  std::string jobs = WriteFile(dir_ + "/jobs.json", Json{{"jobs", {job, second}}}.dump());
  r = RunInac("job submit " + jobs + " --idempotency-key launch-1 " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  // A retry with the same key creates nothing new.
  r = RunInac("job submit " + jobs + " --idempotency-key launch-1 " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;

  r = RunInac("job list --json --all --limit 1 " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  Json listed = Json::parse(r.out.substr(0, r.out.find("--stderr--")));
  ASSERT_EQ(listed.size(), 2u) << r.out;
  EXPECT_EQ(listed[0]["spec"]["name"], "j");
  EXPECT_EQ(listed[1]["spec"]["name"], "k");

  // The tenant filter, with a value that needs URL encoding.
  r = RunInac("job list --json --tenant 'team+b' " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  listed = Json::parse(r.out.substr(0, r.out.find("--stderr--")));
  ASSERT_EQ(listed.size(), 1u) << r.out;
  EXPECT_EQ(listed[0]["spec"]["name"], "k");

  int64_t id = listed[0]["id"].get<int64_t>();
  r = RunInac("job cancel " + std::to_string(id) + " " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  EXPECT_NE(r.out.find("\"cancelled\""), std::string::npos) << r.out;
  // Cancelling again is an illegal transition: the server's 409 becomes exit 2.
  r = RunInac("job cancel " + std::to_string(id) + " " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("HTTP 409"), std::string::npos) << r.out;

  r = RunInac("job list --state cancelled " + server_, dir_);
  ASSERT_EQ(r.exit, 0) << r.out;
  EXPECT_NE(r.out.find("cancelled"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" j\n"), std::string::npos) << r.out;
}

TEST_F(CliClientTest, RefusalsAndUnreachableServersHaveTheirExitCodes) {
  CliRun r = RunInac("job get 424242 " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("HTTP 404 not_found"), std::string::npos) << r.out;

  r = RunInac("job list --state bogus " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("[field state]"), std::string::npos) << r.out;

  std::string bad = WriteFile(dir_ + "/bad.json", R"({"jobs": [{"name": "x"}]})");
  r = RunInac("job submit " + bad + " " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("jobs[0]: HTTP 400 invalid_argument"), std::string::npos) << r.out;

  std::string notjson = WriteFile(dir_ + "/notjson.json", "{");
  r = RunInac("topo apply " + notjson + " " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("not valid JSON"), std::string::npos) << r.out;

  r = RunInac("job list --server ftp://example", dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  r = RunInac("job get 0 " + server_, dir_);  // ids are positive
  EXPECT_EQ(r.exit, 2) << r.out;
  r = RunInac("job cancel abc " + server_, dir_);
  EXPECT_EQ(r.exit, 2) << r.out;
  EXPECT_NE(r.out.find("a job id is a positive integer, not \"abc\""), std::string::npos) << r.out;
  EXPECT_LT(r.out.size(), 400u) << r.out;  // not a range with a 309-digit bound

  // Nobody listens on port 1: the operation failed (1), it was not bad input.
  r = RunInac("job list --server http://127.0.0.1:1", dir_);
  EXPECT_EQ(r.exit, 1) << r.out;
  EXPECT_NE(r.out.find("cannot reach"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("could not connect"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace inac::systest
