// EtcdWatch (storage/etcd/etcd_watch.h) against a real etcd started by the test
// (tests/ha/etcd_cluster.h): events in order with their revisions, resumption across a member
// restart without loss or repetition, progress on request, and the end of a watch whose revision
// was compacted. Skipped when no etcd binary is installed.
#include "storage/etcd/etcd_watch.h"

#include <unistd.h>
#include <chrono>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/storage/etcd_fixture.h"

namespace inac::storage::etcd {
namespace {

// What a watch delivered, for the test thread to wait on.
struct Seen {
  absl::Mutex mu;
  std::vector<std::string> keys;  // "PUT key=value" / "DELETE key", in delivery order
  std::vector<int64_t> revisions;
  int64_t compacted = 0;

  EtcdWatchOptions Options(const std::string& key, const std::string& end, int64_t start) {
    EtcdWatchOptions o;
    o.key = key;
    o.range_end = end;
    o.start_revision = start;
    o.on_events = [this](const std::vector<mvccpb::Event>& events, int64_t revision) {
      absl::MutexLock l(&mu);
      for (const auto& e : events) {
        keys.push_back(e.type() == mvccpb::Event::PUT
                           ? absl::StrCat("PUT ", e.kv().key(), "=", e.kv().value())
                           : absl::StrCat("DELETE ", e.kv().key()));
      }
      revisions.push_back(revision);
    };
    o.on_compacted = [this](int64_t revision) {
      absl::MutexLock l(&mu);
      compacted = revision;
    };
    return o;
  }
  bool AwaitKeys(size_t n) {
    for (int i = 0; i < 200; ++i) {
      {
        absl::MutexLock l(&mu);
        if (keys.size() >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }
};

class EtcdWatchTest : public OneMemberEtcdTest {};

TEST_F(EtcdWatchTest, DeliversThePrefixInOrderAndNothingOutsideIt) {
  Seen seen;
  EtcdWatch watch(client_.get(), seen.Options("/w/", PrefixEnd("/w/"), 0));
  for (int i = 0; i < 100 && watch.revision() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(watch.revision(), 0) << "the creation of a watch from now reports its revision";
  Put("/w/a", "1");
  Put("/x/outside", "1");
  Put("/w/b", "2");
  int64_t last = Delete("/w/a");
  ASSERT_TRUE(seen.AwaitKeys(3));
  absl::MutexLock l(&seen.mu);
  EXPECT_EQ(seen.keys, (std::vector<std::string>{"PUT /w/a=1", "PUT /w/b=2", "DELETE /w/a"}));
  EXPECT_EQ(seen.revisions.back(), last);
  EXPECT_TRUE(std::is_sorted(seen.revisions.begin(), seen.revisions.end()));
}

TEST_F(EtcdWatchTest, ResumesAfterTheMemberRestartsWithoutLossOrRepetition) {
  int64_t first = Put("/w/k", "0");
  Seen seen;
  EtcdWatch watch(client_.get(), seen.Options("/w/", PrefixEnd("/w/"), first));
  ASSERT_TRUE(seen.AwaitKeys(1));
  cluster_.Kill(0);
  ASSERT_TRUE(cluster_.Restart(0).ok());
  for (int i = 1; i <= 5; ++i) Put("/w/k", absl::StrCat(i));
  ASSERT_TRUE(seen.AwaitKeys(6));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  absl::MutexLock l(&seen.mu);
  std::vector<std::string> want;
  for (int i = 0; i <= 5; ++i) want.push_back(absl::StrCat("PUT /w/k=", i));
  EXPECT_EQ(seen.keys, want);
}

TEST_F(EtcdWatchTest, AProgressRequestReportsARevisionOutsideTheRange) {
  Seen seen;
  EtcdWatch watch(client_.get(), seen.Options("/w/", PrefixEnd("/w/"), 0));
  for (int i = 0; i < 100 && watch.revision() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int64_t outside = Put("/x/elsewhere", "1");
  for (int i = 0; i < 100 && watch.revision() < outside; ++i) {
    watch.RequestProgress();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(watch.revision(), outside);
  absl::MutexLock l(&seen.mu);
  EXPECT_TRUE(seen.keys.empty());
}

TEST_F(EtcdWatchTest, EndsWhenItsRevisionWasCompacted) {
  int64_t first = Put("/w/k", "0");
  int64_t last = 0;
  for (int i = 1; i <= 3; ++i) last = Put("/w/k", absl::StrCat(i));
  std::string etcdctl = "/usr/bin/etcdctl";
  if (access(etcdctl.c_str(), X_OK) != 0)
    GTEST_SKIP() << "no etcdctl (apt-get install etcd-client)";
  std::string cmd = absl::StrCat("ETCDCTL_API=3 ", etcdctl, " --endpoints ", cluster_.endpoints(),
                                 " compact ", last, " >/dev/null 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Seen seen;
  EtcdWatch watch(client_.get(), seen.Options("/w/", PrefixEnd("/w/"), first));
  for (int i = 0; i < 100 && !watch.compacted(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(watch.compacted());
  absl::MutexLock l(&seen.mu);
  EXPECT_EQ(seen.compacted, last);
  EXPECT_TRUE(seen.keys.empty());
}

}  // namespace
}  // namespace inac::storage::etcd
