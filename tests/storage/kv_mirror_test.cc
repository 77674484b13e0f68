// KvMirror (storage/etcd/kv_mirror.h) against a real etcd started by the test
// (tests/ha/etcd_cluster.h): list + watch equals a fresh read after random puts and deletes, the
// relist after the watch's revision was compacted, WaitFor of a revision outside the range, and
// the `include` filter. Skipped when no etcd binary is installed.
#include "storage/etcd/kv_mirror.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/storage/etcd_fixture.h"

namespace inac::storage::etcd {
namespace {

class KvMirrorTest : public OneMemberEtcdTest {
 protected:
  // key -> (value, mod revision) of every key with `prefix`, read directly.
  std::map<std::string, std::pair<std::string, int64_t>> Fresh(const std::string& prefix) {
    etcdserverpb::RangeRequest r;
    r.set_key(prefix);
    r.set_range_end(PrefixEnd(prefix));
    auto response = client_->Range(r);
    EXPECT_TRUE(response.ok()) << response.status();
    std::map<std::string, std::pair<std::string, int64_t>> out;
    if (!response.ok()) return out;
    for (const auto& kv : response->kvs()) out[kv.key()] = {kv.value(), kv.mod_revision()};
    return out;
  }
  static std::map<std::string, std::pair<std::string, int64_t>> Mirrored(const KvMirror& m) {
    std::map<std::string, std::pair<std::string, int64_t>> out;
    m.Read([&](const KvMirror::Map& state, int64_t) {
      for (const auto& [key, kv] : state) out[key] = {kv.value(), kv.mod_revision()};
    });
    return out;
  }
  static KvMirrorOptions Options(const std::string& prefix) {
    KvMirrorOptions o;
    o.key = prefix;
    o.range_end = PrefixEnd(prefix);
    return o;
  }
};

TEST_F(KvMirrorTest, ListPlusWatchEqualsAFreshReadAfterRandomPutsAndDeletes) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) Put(absl::StrCat("/m/k", i), "initial");
  Put("/n/outside", "x");
  KvMirror mirror(client_.get(), Options("/m/"));
  int64_t last = 0;
  for (int i = 0; i < 300; ++i) {
    std::string key = absl::StrCat("/m/k", rng() % 40);
    last = rng() % 4 == 0 ? Delete(key) : Put(key, absl::StrCat("v", i));
    if (i % 100 == 0) Put("/n/outside", absl::StrCat(i));  // outside: never mirrored
  }
  last = Put("/m/k0", "last");  // a change of the range at `last` (a delete may change nothing)
  ASSERT_TRUE(mirror.WaitForApplied(last, absl::Seconds(10)));
  EXPECT_GE(mirror.revision(), last);
  EXPECT_EQ(Mirrored(mirror), Fresh("/m/"));
  EXPECT_EQ(mirror.lists(), 1);
  EXPECT_GT(mirror.changes(), 1u);
}

TEST_F(KvMirrorTest, RelistsWhenItsWatchRevisionWasCompacted) {
  std::string etcdctl = "/usr/bin/etcdctl";
  if (access(etcdctl.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no etcdctl (apt-get install etcd-client)";
  Put("/m/a", "1");
  Put("/m/b", "1");
  KvMirrorOptions o = Options("/m/");
  int64_t compacted_to = 0;
  // After the first list, change the range and compact past the list's revision: the watch that
  // starts next cannot resume, so the mirror must relist to see the changes.
  o.on_listed = [&](int64_t revision) {
    if (compacted_to != 0) return;
    Put("/m/a", "2");
    Delete("/m/b");
    compacted_to = Put("/m/c", "3");
    std::string cmd = absl::StrCat("ETCDCTL_API=3 ", etcdctl, " --endpoints ", cluster_.endpoints(),
                                   " compact ", compacted_to, " >/dev/null 2>&1");
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_LT(revision, compacted_to);
  };
  KvMirror mirror(client_.get(), std::move(o));
  for (int i = 0; i < 200 && mirror.lists() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_GE(mirror.lists(), 2);
  ASSERT_TRUE(mirror.WaitForApplied(compacted_to, absl::Seconds(10)));
  int64_t after = Put("/m/d", "4");  // and the new watch runs
  ASSERT_TRUE(mirror.WaitForApplied(after, absl::Seconds(10)));
  EXPECT_EQ(Mirrored(mirror), Fresh("/m/"));
  EXPECT_EQ(Mirrored(mirror).count("/m/b"), 0u);
}

TEST_F(KvMirrorTest, WaitForReachesARevisionOutsideTheRange) {
  Put("/m/a", "1");
  KvMirror mirror(client_.get(), Options("/m/"));
  ASSERT_TRUE(mirror.WaitFor(1, absl::Seconds(10)));
  uint64_t changes = mirror.changes();
  int64_t outside = 0;
  for (int i = 0; i < 5; ++i) outside = Put(absl::StrCat("/other/", i), "x");
  EXPECT_TRUE(mirror.WaitFor(outside, absl::Seconds(5)));
  EXPECT_GE(mirror.revision(), outside);
  EXPECT_EQ(mirror.changes(), changes);  // nothing of the range changed
  // A revision nobody wrote yet is not reached.
  EXPECT_FALSE(mirror.WaitFor(outside + 1000, absl::Milliseconds(300)));
  EXPECT_FALSE(mirror.WaitForApplied(outside, absl::Milliseconds(300)));  // no event of the range
}

TEST_F(KvMirrorTest, IncludeKeepsOnlyItsSubPrefixes) {
  Put("/m/jobs/1", "j");
  Put("/m/events/1", "e");
  KvMirrorOptions o = Options("/m/");
  o.include = {"/m/jobs/", "/m/meta/"};
  KvMirror mirror(client_.get(), std::move(o));
  Put("/m/events/2", "e");
  int64_t last = Put("/m/meta/x", "m");
  ASSERT_TRUE(mirror.WaitForApplied(last, absl::Seconds(10)));
  EXPECT_GE(mirror.applied_revision(), last);
  auto state = Mirrored(mirror);
  EXPECT_EQ(state.size(), 2u);
  EXPECT_EQ(state.count("/m/jobs/1"), 1u);
  EXPECT_EQ(state.count("/m/meta/x"), 1u);
  mirror.Stop();
  EXPECT_FALSE(mirror.WaitFor(last + 1, absl::Milliseconds(10)));
}

}  // namespace
}  // namespace inac::storage::etcd
