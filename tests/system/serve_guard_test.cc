// Two controllers on one address: a second `inac serve` on an address another
// one listens on must fail with a clear message and exit 1, before its loop touches a switch
// (cpp-httplib's SO_REUSEPORT let it start, and the kernel split clients between the two).
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

TEST(ServeGuardTest, ASecondControllerOnATakenAddressExits1) {
  const std::string dir = MakeTempDir("serve-guard");
  ControllerProcess first;
  ASSERT_TRUE(first.Start(dir, "first", dir + "/first.db", Json::object()).ok());
  CliRun second =
      RunInac("serve --listen " + first.host_port() + " --db " + dir + "/second.db", dir);
  EXPECT_EQ(second.exit, 1) << second.out;
  EXPECT_TRUE(absl::StrContains(second.out, "cannot bind")) << second.out;
  EXPECT_TRUE(absl::StrContains(second.out, "in use")) << second.out;
  // The first one still answers.
  Rest rest(first.host_port());
  EXPECT_EQ(rest.Get("/healthz").status, 200);
}

// The "http" limits of the configuration file reach the running server (limits are
// configurable): with max_headers 8, a request with more header lines is refused 431.
TEST(ServeGuardTest, TheConfigFilesHttpLimitsApply) {
  const std::string dir = MakeTempDir("serve-http-limits");
  ControllerProcess controller;
  ASSERT_TRUE(controller
                  .Start(dir, "limits", dir + "/limits.db",
                         Json{{"http", {{"max_headers", 8}, {"threads", 4}}}})
                  .ok());
  Rest rest(controller.host_port());
  EXPECT_EQ(rest.Get("/healthz").status, 200);
  std::map<std::string, std::string> padding;
  for (int i = 0; i < 12; ++i) padding.emplace(absl::StrCat("X-Pad-", i), std::string(1, 'x'));
  Response r = rest.Post("/jobs", Json::object(), padding);
  EXPECT_EQ(r.status, 431) << r.text;
  Rest again(controller.host_port());
  EXPECT_EQ(again.Get("/healthz").status, 200);
}

// SIGTERM with many jobs (it took 5 s with 1,000 jobs, waiting for the solve in
// progress). The process now waits at most shutdown_grace_ms for the loop's current step and
// then exits without it. Whichever way this run goes (between passes or inside a solve), it exits
// 0, and a restart has every acknowledged job.
TEST(ServeGuardTest, SigtermDuringASolveExitsAndLosesNoAcknowledgedJob) {
  const std::string dir = MakeTempDir("serve-sigterm");
  const std::string db = dir + "/sigterm.db";
  std::set<int64_t> acknowledged;
  {
    ControllerProcess controller;
    ASSERT_TRUE(
        controller.Start(dir, "first", db, Json{{"shutdown_grace_ms", 100}, {"debounce_ms", 0}})
            .ok());
    Rest rest(controller.host_port());
    ASSERT_EQ(rest.Put("/topology", core::TopologyToJson(fixtures::SmallLeafSpine())).status, 200);
    for (int i = 0; i < 300; ++i) {
      Response r = rest.Post("/jobs", fixtures::SmallLeafSpineJob(absl::StrCat("j", i)));
      ASSERT_EQ(r.status, 201) << r.text;
      acknowledged.insert(r.body["id"].get<int64_t>());
    }
    EXPECT_EQ(controller.Terminate(), 0) << LogTail(controller.process()->log_path());
    EXPECT_TRUE(absl::StrContains(LogTail(controller.process()->log_path()), "event=stopped"))
        << LogTail(controller.process()->log_path());
  }
  ControllerProcess again;
  ASSERT_TRUE(again.Start(dir, "again", db, Json::object()).ok());
  Rest rest(again.host_port());
  std::set<int64_t> stored;
  int64_t after = 0;
  while (true) {
    Response r = rest.Get(absl::StrCat("/jobs?limit=1000&after=", after));
    ASSERT_EQ(r.status, 200) << r.text;
    for (const auto& job : r.body["jobs"]) stored.insert(job["id"].get<int64_t>());
    if (r.body["next_after"].is_null()) break;
    after = r.body["next_after"].get<int64_t>();
  }
  EXPECT_EQ(stored, acknowledged);
  EXPECT_EQ(again.Terminate(), 0);
}

}  // namespace
}  // namespace inac::systest
