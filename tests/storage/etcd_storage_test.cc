// EtcdStorage beyond the shared contract (store_contract_test.cc): the leader fence of every
// write, and updates larger than one etcd transaction. Against a one-member etcd started by the
// test (tests/ha/etcd_cluster.h); skipped when no etcd binary is installed.
#include "storage/etcd/etcd_storage.h"

#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/leader_election.h"
#include "storage/sqlite_storage.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/storage/test_util.h"

namespace inac::storage::etcd {
namespace {

class EtcdStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (inac::testing::FindEtcdBinary().empty()) GTEST_SKIP() << "no etcd binary";
    absl::Status s = cluster_.Start(1);
    ASSERT_TRUE(s.ok()) << s;
    auto client = EtcdClient::Create({cluster_.endpoint_list()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  std::unique_ptr<EtcdStorage> Open(std::function<std::optional<int64_t>()> token) {
    auto local = SqliteStorage::Open(":memory:");
    EXPECT_TRUE(local.ok());
    EtcdStorageOptions options;
    options.leader_token = std::move(token);
    return std::make_unique<EtcdStorage>(client_.get(), std::move(*local), options);
  }

  inac::testing::EtcdCluster cluster_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdStorageTest, OnlyTheHolderOfTheLeaderKeyCanWrite) {
  std::atomic<int64_t> elected{0};
  LeaderElectionOptions options;
  options.value = R"({"node_id":"a","url":"http://a"})";
  options.ttl_s = 5;
  options.on_elected = [&](int64_t token) { elected = token; };
  LeaderElection election(client_.get(), options);
  election.Start();
  for (int i = 0; i < 100 && elected == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(elected.load(), 0);
  ASSERT_EQ(election.LeaderToken(), elected.load());
  EXPECT_EQ(election.LeaderValue(), options.value);

  auto leader = Open([&] { return election.LeaderToken(); });
  auto created = leader->jobs().Create(testing::SampleSpec("a"), 1);
  ASSERT_TRUE(created.ok()) << created.status();

  // A follower (no token) and a deposed leader (an older token) cannot commit anything.
  auto follower = Open([] { return std::optional<int64_t>(); });
  auto stale = Open([&] { return std::optional<int64_t>(elected.load() - 1); });
  for (EtcdStorage* s : {follower.get(), stale.get()}) {
    auto r = s->jobs().Create(testing::SampleSpec("b"), 2);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_EQ(s->jobs().Update(created->job.id, {.iterations_done = 5}, 3).status().code(),
              absl::StatusCode::kUnavailable);
    // Reads work on every node.
    auto got = s->jobs().Get(created->job.id);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->spec.name, "a");
  }
  auto page = leader->jobs().List({});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 1u);
  // Stop revokes the lease: the key is gone and the old token no longer commits.
  election.Stop();
  EXPECT_FALSE(election.LeaderToken().has_value());
  auto after = Open([&] { return std::optional<int64_t>(elected.load()); });
  EXPECT_EQ(after->jobs().Create(testing::SampleSpec("c"), 4).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(EtcdStorageTest, UpdateManyLargerThanOneTransactionAppliesEverything) {
  auto storage = Open(nullptr);
  std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
  std::vector<core::Event> events;
  for (int i = 0; i < 250; ++i) {
    auto r = storage->jobs().Create(testing::SampleSpec(absl::StrCat("j", i)), 1);
    ASSERT_TRUE(r.ok()) << r.status();
    updates.push_back({r->job.id, {.state = core::JobState::kScheduled}});
    core::Event e;
    e.kind = "job_state";
    e.job_id = r->job.id;
    events.push_back(e);
  }
  // 250 job puts and 250 events: well over etcd's 128 operations per transaction.
  absl::Status s = storage->jobs().UpdateMany(updates, 2, events);
  ASSERT_TRUE(s.ok()) << s;
  auto counts = storage->jobs().CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ((*counts)[core::JobState::kScheduled], 250);
  EXPECT_EQ(*storage->events().LastSeq(), 250);
  auto listed = storage->events().List({.kind = "job_state", .limit = 1000});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 250u);
  // An illegal transition anywhere writes nothing.
  updates.back().second.state = core::JobState::kCompleted;  // scheduled -> completed: illegal
  EXPECT_EQ(storage->jobs().UpdateMany(updates, 3, {}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*storage->jobs().CountByState())[core::JobState::kScheduled], 250);
}

}  // namespace
}  // namespace inac::storage::etcd
