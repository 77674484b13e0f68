// The fixture of the cluster-mode tests (docs/ha.md "Tests"): a 3-member etcd cluster
// (tests/ha/etcd_cluster.h, Debian's /usr/bin/etcd), `inac serve` nodes in cluster mode
// (--cluster-endpoints, --node-id, --lease-ttl-s 3) and one `inac switch` per switch of the system
// tests' leaf-spine with its write log (--write-log: every Write / SetForwardingPipelineConfig with
// its election id and arbitration result). Skips with a message when no etcd binary is installed.
// Shared by tests/ha/ha_test.cc and tests/ha/failover_test.cc. One test thread.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/json.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/system/harness.h"

namespace inac::systest {

inline constexpr int kLeaseTtlS = 3;

inline std::string Host(int index) { return absl::StrCat("h", index / 4, "_", index % 4); }

// Job i of a deterministic mix on the 16 hosts (as the system tests').
inline Json MixJob(int i, const std::string& prefix = "job-") {
  return LongRunningJob(absl::StrCat(prefix, i), {Host(i % 16), Host((i + 5) % 16)},
                        {Host((i + 10) % 16)}, i % 3);
}

struct Leader {
  std::string node_id;
  std::string url;  // http://127.0.0.1:PORT
  int64_t token = 0;
  int64_t epoch = 0;  // 0 until the leader has taken its epoch
};

// One line of a switch's write log.
struct LoggedWrite {
  std::string rpc;
  uint64_t election_high = 0;  // the leader's epoch
  uint64_t election_low = 0;   // the leader's token
  int result = -1;
};

inline std::vector<LoggedWrite> ReadWriteLog(const std::string& path) {
  std::vector<LoggedWrite> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 3) continue;
    LoggedWrite w;
    w.rpc = parts[0];
    std::string id = parts[1].substr(parts[1].find('=') + 1);
    std::vector<std::string> halves = absl::StrSplit(id, ':');
    if (halves.size() != 2 || !absl::SimpleAtoi(halves[0], &w.election_high) ||
        !absl::SimpleAtoi(halves[1], &w.election_low)) {
      continue;
    }
    if (!absl::SimpleAtoi(parts[2].substr(parts[2].find('=') + 1), &w.result)) continue;
    out.push_back(w);
  }
  return out;
}

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (inac::testing::FindEtcdBinary().empty()) {
      GTEST_SKIP() << "no etcd binary (apt-get install etcd-server, or set INAC_ETCD): the HA "
                      "tests need a real etcd cluster";
    }
    if (access(InacBinary(), X_OK) != 0) GTEST_SKIP() << "inac binary not built";
    dir_ = MakeTempDir("ha");
    ASSERT_FALSE(dir_.empty());
    absl::Status s = etcd_.Start(3);
    ASSERT_TRUE(s.ok()) << s;
    auto client = storage::etcd::EtcdClient::Create({etcd_.endpoint_list(), absl::Seconds(1)});
    ASSERT_TRUE(client.ok());
    etcd_client_ = std::move(*client);
    topology_ = LeafSpine(4, 2, 4);
    ASSERT_NO_FATAL_FAILURE(StartSwitches());
  }

  void TearDown() override {
    nodes_.clear();     // SIGKILL the controllers first
    switches_.clear();  // then the switches; etcd_ when the fixture goes
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::printf("[ info ] logs kept in %s\n", dir_.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  // One `inac switch` per switch, each with a write log.
  void StartSwitches() {
    uint64_t device = 1;
    for (core::Switch& sw : topology_.switches) {
      std::string log = absl::StrCat(dir_, "/switch-", sw.id, ".log");
      std::string writes = absl::StrCat(dir_, "/switch-", sw.id, ".writes");
      auto p = ChildProcess::Start({"switch", "--listen", "127.0.0.1:0", "--device-id",
                                    absl::StrCat(device), "--write-log", writes},
                                   log);
      ASSERT_TRUE(p.ok()) << p.status();
      auto address = (*p)->AwaitListening(absl::Seconds(20));
      ASSERT_TRUE(address.ok()) << address.status() << LogTail(log);
      sw.p4runtime = core::P4RuntimeEndpoint{*address, device};
      write_logs_[sw.id] = writes;
      switches_.push_back(std::move(*p));
      ++device;
    }
  }

  // Starts controller `id` (a fresh database unless it exists) in cluster mode.
  void StartNode(const std::string& id) {
    auto node = std::make_unique<ControllerProcess>();
    // ATP routing: planning is not what these tests are about, and it keeps them fast.
    Json config = {{"timer_ms", 500}, {"algorithm", "atp"}};
    absl::Status s =
        node->Start(dir_, "node-" + id, absl::StrCat(dir_, "/node-", id, ".db"), config,
                    {"--cluster-endpoints", etcd_.endpoints(), "--node-id", id, "--lease-ttl-s",
                     absl::StrCat(kLeaseTtlS)});
    ASSERT_TRUE(s.ok()) << s;
    nodes_[id] = std::move(node);
  }

  // The leader as etcd holds it; waits (bounded) until there is one other than `not_this`.
  std::optional<Leader> AwaitLeader(const std::string& not_this = "",
                                    absl::Duration timeout = absl::Seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
    while (std::chrono::steady_clock::now() < deadline) {
      etcdserverpb::RangeRequest r;
      r.set_key("/inac/leader");
      auto got = etcd_client_->Range(r);
      if (got.ok() && got->kvs_size() > 0) {
        Json v = Json::parse(got->kvs(0).value(), nullptr, false);
        // A key of a process that is gone (its lease not yet expired, or kept alive by etcd
        // across a loss of quorum: etcd renews every lease when it elects a new Raft leader)
        // does not count.
        std::string id = v.is_object() ? v.value("node_id", "") : "";
        auto node = nodes_.find(id);
        if (id != not_this && node != nodes_.end() &&
            node->second->base_url() == v.value("url", "") && node->second->process() &&
            !node->second->process()->Exited()) {
          return Leader{id, v.value("url", ""), got->kvs(0).create_revision(),
                        v.value("epoch", int64_t{0})};
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::nullopt;
  }

  // AwaitLeader, and then until the leader has published its epoch (it does before it writes).
  std::optional<Leader> AwaitLeaderWithEpoch(const std::string& not_this = "",
                                             absl::Duration timeout = absl::Seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
    while (std::chrono::steady_clock::now() < deadline) {
      auto leader = AwaitLeader(not_this, timeout);
      if (leader && leader->epoch > 0) return leader;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }

  // Every write-log line of every switch, by switch.
  std::map<std::string, std::vector<LoggedWrite>> WriteLogs() {
    std::map<std::string, std::vector<LoggedWrite>> out;
    for (const auto& [sw, path] : write_logs_) out[sw] = ReadWriteLog(path);
    return out;
  }

  ControllerProcess& Node(const std::string& id) { return *nodes_.at(id); }
  std::string Logs(const std::string& id) {
    auto it = nodes_.find(id);
    return it != nodes_.end() && it->second->process()
               ? LogTail(it->second->process()->log_path(), 5000)
               : "";
  }

  void PutTopology(const std::string& id) {
    Rest rest(Node(id).host_port());
    Response r = rest.Put("/topology", core::TopologyToJson(topology_));
    ASSERT_EQ(r.status, 200) << r.text;
  }

  std::string dir_;
  inac::testing::EtcdCluster etcd_;
  std::unique_ptr<storage::etcd::EtcdClient> etcd_client_;
  core::Topology topology_;
  std::vector<std::unique_ptr<ChildProcess>> switches_;
  std::map<std::string, std::string> write_logs_;  // switch id -> write log
  std::map<std::string, std::unique_ptr<ControllerProcess>> nodes_;
  SwitchReader reader_;
};

}  // namespace inac::systest
