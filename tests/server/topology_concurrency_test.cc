// Optimistic concurrency on the topology: GET /topology returns the version as
// an ETag; PUT /topology and PATCH /links/{id} with If-Match write only when the topology is still
// at that version, else 412 and nothing written. Two operators editing from the same read cannot
// silently overwrite each other.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

class TopologyConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
  }
  std::string Etag() {
    Reply r = server_.Get("/api/v1/topology");
    EXPECT_EQ(r.status, 200) << r;
    auto it = r.headers.find("ETag");
    return it == r.headers.end() ? "" : it->second;
  }
  int64_t Version() {
    auto record = server_.storage().topology().Get();
    EXPECT_TRUE(record.ok() && record->has_value());
    return record.ok() && record->has_value() ? (*record)->version : -1;
  }
  std::string FirstLink() { return SmallLeafSpine().links.front().id; }
  Reply Put(const std::string& if_match) {
    return server_.Call("PUT", "/api/v1/topology", core::TopologyToJson(SmallLeafSpine()).dump(),
                        kAdminToken, {{"If-Match", if_match}});
  }
  Reply Patch(const std::string& status, const std::string& if_match) {
    return server_.Call("PATCH", absl::StrCat("/api/v1/links/", FirstLink()),
                        core::Json{{"status", status}}.dump(), kAdminToken,
                        {{"If-Match", if_match}});
  }
  TestServer server_;
};

TEST_F(TopologyConcurrencyTest, GetReturnsTheVersionAsAStrongEtag) {
  EXPECT_EQ(Etag(), absl::StrCat("\"", Version(), "\""));
}

TEST_F(TopologyConcurrencyTest, PutWithTheCurrentEtagWritesAndReturnsTheNewOne) {
  const std::string etag = Etag();
  Reply r = Put(etag);
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.headers.find("ETag")->second, absl::StrCat("\"", Version(), "\""));
  EXPECT_NE(r.headers.find("ETag")->second, etag);
  EXPECT_EQ(Etag(), r.headers.find("ETag")->second);
}

TEST_F(TopologyConcurrencyTest, PutWithAStaleEtagIs412AndWritesNothing) {
  const std::string stale = Etag();
  ASSERT_EQ(Patch("down", stale).status, 200);  // another operator's change
  const int64_t before = Version();
  Reply r = Put(stale);
  EXPECT_EQ(r.status, 412) << r;
  EXPECT_EQ(r.code(), "precondition_failed") << r;
  EXPECT_EQ(r.field(), "If-Match") << r;
  EXPECT_NE(r.message().find(std::to_string(before)), std::string::npos) << r;
  EXPECT_EQ(Version(), before);
  // The link another operator set down is still down: the stale PUT did not restore it.
  auto record = server_.storage().topology().Get();
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ((*record)->topology.FindLink(FirstLink())->status, core::LinkStatus::kDown);
}

TEST_F(TopologyConcurrencyTest, PatchWithAStaleEtagIs412) {
  const std::string stale = Etag();
  ASSERT_EQ(Put(stale).status, 200);
  const int64_t before = Version();
  Reply r = Patch("down", stale);
  EXPECT_EQ(r.status, 412) << r;
  EXPECT_EQ(Version(), before);
  r = Patch("down", Etag());
  EXPECT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.headers.find("ETag")->second, absl::StrCat("\"", Version(), "\""));
}

TEST_F(TopologyConcurrencyTest, StarListsAndWeakTagsFollowRfc9110) {
  const std::string current = Etag();
  EXPECT_EQ(Put("*").status, 200);                                // any existing version
  EXPECT_EQ(Put(absl::StrCat("\"999\", ", Etag())).status, 200);  // a list matches any member
  EXPECT_EQ(Put(absl::StrCat("W/", Etag())).status, 412);         // weak tags never match
  EXPECT_EQ(Put(current).status, 412);                            // long gone
  for (const char* bad : {"7", "\"abc\"", "\"-1\"", "\"", "\"1\" junk"}) {
    Reply r = Put(bad);
    EXPECT_EQ(r.status, 400) << bad << " " << r;
    EXPECT_EQ(r.field(), "If-Match") << r;
  }
}

TEST_F(TopologyConcurrencyTest, WithoutIfMatchWritesAreUnconditionalAsBefore) {
  const std::string stale = Etag();
  ASSERT_EQ(Put(stale).status, 200);
  Reply r = server_.Call("PUT", "/api/v1/topology", core::TopologyToJson(SmallLeafSpine()).dump());
  EXPECT_EQ(r.status, 200) << r;
}

TEST_F(TopologyConcurrencyTest, OfConcurrentWritersWithOneEtagExactlyOneWins) {
  const std::string etag = Etag();
  const int64_t before = Version();
  std::atomic<int> won{0}, lost{0}, other{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&, i] {
      Reply r = i % 2 ? Put(etag) : Patch(i % 4 ? "down" : "up", etag);
      if (r.status == 200) {
        won++;
      } else if (r.status == 412) {
        lost++;
      } else {
        other++;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(other.load(), 0);
  // A PATCH that sets a link to the status it has writes nothing and matches; every writer that
  // changed something bumped the version past `etag`, so at most one change was made.
  EXPECT_LE(Version(), before + 1);
  EXPECT_GE(won.load(), 1);
  EXPECT_EQ(won.load() + lost.load(), 8);
}

}  // namespace
}  // namespace inac::server::testing
