// A whole fat-tree held by one leader, on real processes (the small sibling of bench/ha_fabric.h):
// a fat-tree k=8 (80 switches, 128 hosts) emulated by one `inac switch --devices 80`
// (EmulatedFabric::StartShared), a 2-node cluster (`inac serve --cluster-endpoints`, lease TTL
// 3 s) on a 3-member etcd (tests/ha/etcd_cluster.h), 16 jobs planned with ATP routing.
//  - Cold start: with the jobs stored before the topology, PUT /topology; every switch ends
//    reconciled by the leader and holds exactly the plan's entries (full P4Runtime read-back).
//  - Failover: kill -9 of the leader; the other node takes over and reconciles every switch in a
//    visit made after the kill (GET /switches: primary, applied version == its plan's, no error,
//    contacted after the kill), and every switch holds exactly its plan's entries.
// No timing is asserted (bench/ha_fabric.h measures); every wait is bounded. Skipped with a
// message when no etcd binary is installed. Label `ha`.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "core/json.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

constexpr int kK = 8;
constexpr int kJobs = 16;
constexpr int kLeaseTtlS = 3;

// Host `index` of edge switch `edge` in pod `pod` (core/generators.h names).
std::string Host(int pod, int edge, int index) {
  return absl::StrCat("h", pod, "_", edge, "_", index);
}

// Job i: workers and PS in three different pods, each host used by one job only.
Json FabricJob(int i) {
  const int row = i / kK;
  return LongRunningJob(
      absl::StrCat("fabric-", i),
      {Host(i % kK, row % (kK / 2), 0), Host((i + 3) % kK, (row + 1) % (kK / 2), 1)},
      {Host((i + 5) % kK, (row + 2) % (kK / 2), 2)}, i % 3);
}

class FabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (inac::testing::FindEtcdBinary().empty()) {
      GTEST_SKIP() << "no etcd binary (apt-get install etcd-server, or set INAC_ETCD): the HA "
                      "tests need a real etcd cluster";
    }
    if (access(InacBinary(), X_OK) != 0) GTEST_SKIP() << "inac binary not built";
    dir_ = MakeTempDir("ha-fabric");
    ASSERT_FALSE(dir_.empty());
    absl::Status s = etcd_.Start(3);
    ASSERT_TRUE(s.ok()) << s;
    auto client = storage::etcd::EtcdClient::Create({etcd_.endpoint_list(), absl::Seconds(1)});
    ASSERT_TRUE(client.ok());
    etcd_client_ = std::move(*client);
    auto topology = core::GenerateFatTree(kK, core::GeneratorOptions{});
    ASSERT_TRUE(topology.ok()) << topology.status();
    topology_ = std::move(*topology);
    ASSERT_EQ(topology_.switches.size(), 80u);
    s = fabric_.StartShared(&topology_, dir_);
    ASSERT_TRUE(s.ok()) << s;
  }

  void TearDown() override {
    nodes_.clear();  // SIGKILL the controllers first; the switches and etcd go with the fixture
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::printf("[ info ] logs kept in %s\n", dir_.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  void StartNode(const std::string& id) {
    auto node = std::make_unique<ControllerProcess>();
    Json config = {{"timer_ms", 500}, {"algorithm", "atp"}};
    absl::Status s =
        node->Start(dir_, "node-" + id, absl::StrCat(dir_, "/node-", id, ".db"), config,
                    {"--cluster-endpoints", etcd_.endpoints(), "--node-id", id, "--lease-ttl-s",
                     absl::StrCat(kLeaseTtlS)});
    ASSERT_TRUE(s.ok()) << s;
    nodes_[id] = std::move(node);
  }

  // The node holding etcd's leader key, once it is `want` (any node when empty); "" after 30 s.
  std::string AwaitLeader(const std::string& want = "") {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      etcdserverpb::RangeRequest r;
      r.set_key("/inac/leader");
      auto got = etcd_client_->Range(r);
      if (got.ok() && got->kvs_size() > 0) {
        Json v = Json::parse(got->kvs(0).value(), nullptr, false);
        std::string id = v.is_object() ? v.value("node_id", "") : "";
        if (nodes_.count(id) && (want.empty() || id == want)) return id;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

  std::string Logs(const std::string& id) {
    auto it = nodes_.find(id);
    return it != nodes_.end() && it->second->process()
               ? LogTail(it->second->process()->log_path(), 5000)
               : "";
  }

  // Every switch reconciled by the controller at `host_port` since `since_ms`, then read back.
  void ExpectFabricReconciled(const std::string& node, int64_t since_ms) {
    Rest rest(nodes_.at(node)->host_port(), absl::Seconds(30));
    auto report = AwaitFleetReconciled(rest, since_ms, absl::Seconds(60), kJobs);
    ASSERT_TRUE(report.ok()) << report.status() << Logs(node);
    EXPECT_EQ(report->managed, 80);
    auto view = FetchView(rest);
    ASSERT_TRUE(view.has_value());
    EXPECT_EQ(view->plan.jobs.size(), static_cast<size_t>(kJobs));
    EXPECT_EQ(CompareFabricParallel(view->topology, IntentsBySwitch(view->topology, view->plan), 4),
              "");
  }

  std::string dir_;
  inac::testing::EtcdCluster etcd_;
  std::unique_ptr<storage::etcd::EtcdClient> etcd_client_;
  core::Topology topology_;
  EmulatedFabric fabric_;
  std::map<std::string, std::unique_ptr<ControllerProcess>> nodes_;
};

TEST_F(FabricTest, ColdStartThenFailoverReconcileTheWholeFatTree) {
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  const std::string leader = AwaitLeader();
  ASSERT_FALSE(leader.empty()) << "no leader elected";
  const std::string other = leader == "a" ? "b" : "a";
  {
    Rest rest(nodes_.at(leader)->host_port(), absl::Seconds(30));
    for (int i = 0; i < kJobs; ++i) {
      // The leader key can be seen in etcd a moment before its holder answers as the leader (503
      // until then): retry for a while.
      Response r;
      for (int attempt = 0; attempt < 100; ++attempt) {
        r = rest.Post("/jobs", FabricJob(i));
        if (r.status != 503) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ASSERT_EQ(r.status, 201) << r.text;
    }
    const int64_t put_ms = UnixMs();
    Response r = rest.Put("/topology", core::TopologyToJson(topology_));
    ASSERT_EQ(r.status, 200) << r.text;
    ASSERT_NO_FATAL_FAILURE(ExpectFabricReconciled(leader, put_ms));
  }

  const int64_t kill_ms = UnixMs();
  nodes_.at(leader)->Kill9();
  ASSERT_EQ(AwaitLeader(other), other) << Logs(other);
  ASSERT_NO_FATAL_FAILURE(ExpectFabricReconciled(other, kill_ms));
}

}  // namespace
}  // namespace inac::systest
