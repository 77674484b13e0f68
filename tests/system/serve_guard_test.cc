// Two controllers on one address (issue 14, item 2): a second `inac serve` on an address another
// one listens on must fail with a clear message and exit 1, before its loop touches a switch
// (cpp-httplib's SO_REUSEPORT let it start, and the kernel split clients between the two).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
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

}  // namespace
}  // namespace inac::systest
