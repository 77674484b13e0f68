// Cluster mode on etcd (docs/ha.md), with real processes on loopback: a 3-member etcd
// cluster (tests/ha/etcd_cluster.h, /usr/bin/etcd or $INAC_ETCD), `inac serve` nodes and one
// `inac switch` per switch of the system tests' leaf-spine (4 leaves, 2 spines, 16 hosts).
// Prints one JSON line per figure:
//  - ha_submit: durable REST submissions per second and latency percentiles (8 clients, 1,000
//    POST /jobs with Idempotency-Keys), for a single node on SQLite (synchronous=FULL) and for
//    the leader of a 2-node cluster (every 201 after etcd's majority commit), and again while
//    the leader plans and programs the fabric concurrently (store "etcd_while_planning": the
//    1,000 jobs of the failover scenario);
//  - ha_failover: with 1,000 jobs programmed, kill -9 of the leader, then the time until the new
//    leader is elected (etcd leader key) and until it has reconciled every switch (every switch's
//    read-back equals the new leader's final plan: systest::AwaitConverged), for the default
//    lease TTL (10 s) and for 3 s; planning with ATP routing (the LP's solve time is
//    planning_bench's figure, not failover's).
// Without an etcd binary it prints a line saying so and the SQLite figure only.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/ha_fabric.h"
#include "core/json.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/system/harness.h"

namespace {

namespace systest = inac::systest;
using Clock = std::chrono::steady_clock;
using systest::Json;

constexpr int kJobs = 1000;
constexpr int kClients = 8;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Host(int index) { return absl::StrCat("h", index / 4, "_", index % 4); }

Json MixJob(int i, const std::string& prefix) {
  return systest::LongRunningJob(absl::StrCat(prefix, i), {Host(i % 16), Host((i + 5) % 16)},
                                 {Host((i + 10) % 16)}, i % 3);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// `kJobs` submissions from kClients threads; prints ha_submit. Returns false on an error.
bool Submit(const std::string& host_port, const std::string& mode, const std::string& prefix) {
  std::atomic<int> next{0}, errors{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      systest::Rest rest(host_port, absl::Seconds(30));
      std::vector<double> mine;
      for (int i = next++; i < kJobs; i = next++) {
        auto t0 = Clock::now();
        auto r = rest.Post("/jobs", MixJob(i, prefix),
                           {{"Idempotency-Key", absl::StrCat(prefix, "key-", i)}});
        mine.push_back(Seconds(Clock::now() - t0) * 1000);
        if (r.status != 201) errors++;
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  double s = Seconds(Clock::now() - start);
  std::printf(
      "{\"bench\":\"ha_submit\",\"store\":\"%s\",\"jobs\":%d,\"clients\":%d,\"per_s\":%.0f,"
      "\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f,\"errors\":%d}\n",
      mode.c_str(), kJobs, kClients, kJobs / s, Percentile(latencies_ms, 0.5),
      Percentile(latencies_ms, 0.99), Percentile(latencies_ms, 1.0), errors.load());
  std::fflush(stdout);
  return errors == 0;
}

struct LeaderInfo {
  std::string node_id;
  int64_t token = 0;
};

std::optional<LeaderInfo> LeaderOf(inac::storage::etcd::EtcdClient& client) {
  etcdserverpb::RangeRequest r;
  r.set_key("/inac/leader");
  auto got = client.Range(r);
  if (!got.ok() || got->kvs_size() == 0) return std::nullopt;
  Json v = Json::parse(got->kvs(0).value(), nullptr, false);
  if (!v.is_object()) return std::nullopt;
  return LeaderInfo{v.value("node_id", ""), got->kvs(0).create_revision()};
}

// The leader key's holder once one is elected, polling for up to 30 s; nullopt after that.
std::optional<LeaderInfo> AwaitLeader(inac::storage::etcd::EtcdClient& client) {
  for (int i = 0; i < 300; ++i) {
    if (auto leader = LeaderOf(client)) return leader;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "ha_bench: %s\n", what.c_str());
  return 1;
}

// One failover measurement with `ttl_s`.
int Failover(int ttl_s, const std::string& base_dir) {
  std::string dir = absl::StrCat(base_dir, "/failover-", ttl_s);
  std::filesystem::create_directories(dir);
  inac::testing::EtcdCluster etcd;
  if (auto s = etcd.Start(3); !s.ok()) return Fail(s.ToString());
  auto client = inac::storage::etcd::EtcdClient::Create({etcd.endpoint_list(), absl::Seconds(1)});
  if (!client.ok()) return Fail(client.status().ToString());
  inac::core::Topology topology = systest::LeafSpine(4, 2, 4);
  systest::EmulatedFabric fabric;
  if (auto s = fabric.Start(&topology, dir); !s.ok()) return Fail(s.ToString());
  std::map<std::string, std::unique_ptr<systest::ControllerProcess>> nodes;
  for (const char* id : {"a", "b"}) {
    auto node = std::make_unique<systest::ControllerProcess>();
    // ATP routing: the figure is the failover, not the LP's solve time.
    auto s = node->Start(dir, absl::StrCat("node-", id), absl::StrCat(dir, "/node-", id, ".db"),
                         Json{{"algorithm", "atp"}},
                         {"--cluster-endpoints", etcd.endpoints(), "--node-id", id, "--lease-ttl-s",
                          absl::StrCat(ttl_s)});
    if (!s.ok()) return Fail(s.ToString());
    nodes[id] = std::move(node);
  }
  std::optional<LeaderInfo> leader = AwaitLeader(**client);
  if (!leader) return Fail("no leader");
  systest::Rest rest(nodes[leader->node_id]->host_port(), absl::Seconds(60));
  if (rest.Put("/topology", inac::core::TopologyToJson(topology)).status != 200) {
    return Fail("topology refused");
  }
  if (!Submit(nodes[leader->node_id]->host_port(), "etcd_while_planning", "f-"))
    return Fail("submit");
  systest::SwitchReader reader;
  auto converged = systest::AwaitConverged(rest, reader, absl::Seconds(300), kJobs);
  if (!converged.ok()) return Fail(converged.status().ToString());
  const std::string old = leader->node_id;
  const std::string next = old == "a" ? "b" : "a";
  auto killed = Clock::now();
  nodes[old]->Kill9();
  std::optional<LeaderInfo> elected;
  while (Seconds(Clock::now() - killed) < 120) {
    elected = LeaderOf(**client);
    if (elected && elected->node_id == next) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!elected || elected->node_id != next) return Fail("no new leader");
  double elected_s = Seconds(Clock::now() - killed);
  systest::Rest next_rest(nodes[next]->host_port(), absl::Seconds(60));
  auto view = systest::AwaitConverged(next_rest, reader, absl::Seconds(300), kJobs);
  if (!view.ok()) return Fail(view.status().ToString());
  double reconciled_s = Seconds(Clock::now() - killed);
  std::printf(
      "{\"bench\":\"ha_failover\",\"jobs\":%d,\"switches\":%zu,\"lease_ttl_s\":%d,"
      "\"new_leader_s\":%.2f,\"reconciled_s\":%.2f,\"plan_jobs\":%zu}\n",
      kJobs, topology.switches.size(), ttl_s, elected_s, reconciled_s, view->plan.jobs.size());
  std::fflush(stdout);
  return 0;
}

}  // namespace

// Flags: --only NAME (submit, failover or fabric; repeatable; default: all) and --runs N (the
// failover scenarios' repetitions; default 1).
int main(int argc, char** argv) {
  std::set<std::string> only;
  int runs = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--only" && i + 1 < argc) {
      only.insert(argv[++i]);
    } else if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: ha_bench [--only submit|failover|fabric]... [--runs N]\n");
      return 2;
    }
  }
  auto wanted = [&](const char* name) { return only.empty() || only.count(name) > 0; };
  if (access(systest::InacBinary(), X_OK) != 0) return Fail("inac binary not built");
  std::string dir = systest::MakeTempDir("ha-bench");
  // SQLite alone: one node, no fabric needed for the write path (no topology: jobs are stored and
  // wait for one).
  if (wanted("submit")) {
    systest::ControllerProcess single;
    if (auto s = single.Start(dir, "single", dir + "/single.db", Json::object()); !s.ok()) {
      return Fail(s.ToString());
    }
    if (!Submit(single.host_port(), "sqlite", "s-")) return Fail("sqlite submissions failed");
  }
  if (inac::testing::FindEtcdBinary().empty()) {
    std::printf(
        "{\"bench\":\"ha\",\"skipped\":\"no etcd binary (apt-get install etcd-server)\"}\n");
    return 0;
  }
  // Through etcd: the leader of a 2-node cluster on a 3-member etcd.
  if (wanted("submit")) {
    std::string sub = dir + "/submit";
    std::filesystem::create_directories(sub);
    inac::testing::EtcdCluster etcd;
    if (auto s = etcd.Start(3); !s.ok()) return Fail(s.ToString());
    auto client = inac::storage::etcd::EtcdClient::Create({etcd.endpoint_list(), absl::Seconds(1)});
    if (!client.ok()) return Fail(client.status().ToString());
    std::map<std::string, std::unique_ptr<systest::ControllerProcess>> nodes;
    for (const char* id : {"a", "b"}) {
      auto node = std::make_unique<systest::ControllerProcess>();
      auto s =
          node->Start(sub, absl::StrCat("node-", id), absl::StrCat(sub, "/node-", id, ".db"),
                      Json::object(), {"--cluster-endpoints", etcd.endpoints(), "--node-id", id});
      if (!s.ok()) return Fail(s.ToString());
      nodes[id] = std::move(node);
    }
    std::optional<LeaderInfo> leader = AwaitLeader(**client);
    if (!leader) return Fail("no leader");
    if (!Submit(nodes[leader->node_id]->host_port(), "etcd", "e-")) {
      return Fail("etcd submissions failed");
    }
  }
  if (wanted("failover")) {
    for (int ttl : {10, 3}) {
      for (int run = 0; run < runs; ++run) {
        if (int rc = Failover(ttl, dir); rc != 0) return rc;
      }
    }
  }
  if (wanted("fabric")) {
    if (int rc = RunFabricBench(dir, runs); rc != 0) return rc;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
