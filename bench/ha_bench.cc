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

// The three ways a leader goes in ha_failover.
enum class Loss { kCrash, kPlanned, kCrashWithEtcdLeader };
const char* Name(Loss loss) {
  switch (loss) {
    case Loss::kCrash:
      return "crash";
    case Loss::kPlanned:
      return "planned";
    case Loss::kCrashWithEtcdLeader:
      return "crash_with_etcd_leader";
  }
  return "";
}

// One failover's figures.
struct FailoverRun {
  double elected_s = 0;     // the follower holds the leader key
  double writes_s = 0;      // a new submission to it is acknowledged (201)
  double reconciled_s = 0;  // every switch's read-back equals its plan
  int64_t rewritten = 0;    // entries it modified or deleted (inac_southbound_updates_total)
  int64_t lost = 0;         // acknowledged jobs it does not list
};

// A counter of a node's /metrics text with `labels` (0 when absent).
int64_t MetricValue(systest::Rest& rest, const std::string& series) {
  systest::Response r = rest.Get("/metrics");
  size_t at = r.text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return static_cast<int64_t>(std::atof(r.text.c_str() + at + series.size() + 2));
}

int64_t Rewritten(systest::Rest& rest) {
  return MetricValue(rest, "inac_southbound_updates_total{op=\"modify\"}") +
         MetricValue(rest, "inac_southbound_updates_total{op=\"delete\"}");
}

// The failover rig: a 3-member etcd, the 6 switches of the system tests' leaf-spine, nodes a and
// b (ATP routing: the figure is the failover, not the LP's solve time) and `kJobs` jobs
// programmed; then `runs` failovers of each kind, the leader alternating, the one that went
// restarted as a follower on its database (as its supervisor would) before the next run.
int Failover(int ttl_s, int runs, const std::string& base_dir) {
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
  auto start_node = [&](const std::string& id) -> absl::Status {
    auto node = std::make_unique<systest::ControllerProcess>();
    auto s = node->Start(dir, absl::StrCat("node-", id), absl::StrCat(dir, "/node-", id, ".db"),
                         Json{{"algorithm", "atp"}},
                         {"--cluster-endpoints", etcd.endpoints(), "--node-id", id, "--lease-ttl-s",
                          absl::StrCat(ttl_s)});
    if (s.ok()) nodes[id] = std::move(node);
    return s;
  };
  for (const char* id : {"a", "b"}) {
    if (auto s = start_node(id); !s.ok()) return Fail(s.ToString());
  }
  std::optional<LeaderInfo> leader = AwaitLeader(**client);
  if (!leader) return Fail("no leader");
  {
    systest::Rest rest(nodes[leader->node_id]->host_port(), absl::Seconds(60));
    if (rest.Put("/topology", inac::core::TopologyToJson(topology)).status != 200) {
      return Fail("topology refused");
    }
  }
  if (!Submit(nodes[leader->node_id]->host_port(), "etcd_while_planning", "f-")) {
    return Fail("submit");
  }
  systest::SwitchReader reader;
  const int jobs = kJobs;
  {
    systest::Rest rest(nodes[leader->node_id]->host_port(), absl::Seconds(60));
    auto converged = systest::AwaitConverged(rest, reader, absl::Seconds(300), jobs);
    if (!converged.ok()) return Fail(converged.status().ToString());
  }
  for (Loss loss : {Loss::kCrash, Loss::kPlanned, Loss::kCrashWithEtcdLeader}) {
    std::vector<FailoverRun> done;
    for (int run = 0; run < runs; ++run) {
      const std::string old = leader->node_id;
      const std::string next = old == "a" ? "b" : "a";
      systest::Rest next_rest(nodes[next]->host_port(), absl::Seconds(10));
      const int64_t rewritten_before = Rewritten(next_rest);
      int etcd_member = -1;
      if (loss == Loss::kCrashWithEtcdLeader) etcd_member = etcd.LeaderIndex();
      auto killed = Clock::now();
      std::thread terminate;
      if (loss == Loss::kPlanned) {
        terminate = std::thread([&] { nodes[old]->Terminate(); });
      } else {
        if (etcd_member >= 0) etcd.Kill(etcd_member);
        nodes[old]->Kill9();
      }
      FailoverRun r;
      // Writes accepted again: a launcher retrying a submission with its Idempotency-Key, every
      // 10 ms -- a fenced etcd transaction on the leader (it finds the key bound: 200, the same
      // job), which leaves the plan as it is, so that what follows measures the failover and not
      // the planning of a new job.
      const Json probe = MixJob(0, "f-");
      while (Seconds(Clock::now() - killed) < 60) {
        if (r.elected_s == 0) {
          auto now = LeaderOf(**client);
          if (now && now->node_id == next) r.elected_s = Seconds(Clock::now() - killed);
        }
        auto answer = next_rest.Post("/jobs", probe, {{"Idempotency-Key", "f-key-0"}});
        if (answer.status == 201) return Fail("the retried submission created a second job");
        if (answer.status == 200) {
          r.writes_s = Seconds(Clock::now() - killed);
          if (r.elected_s == 0) r.elected_s = r.writes_s;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (terminate.joinable()) terminate.join();
      if (r.writes_s == 0) return Fail(absl::StrCat(Name(loss), ": no write accepted in 60 s"));
      systest::Rest rest(nodes[next]->host_port(), absl::Seconds(60));
      auto view = systest::AwaitConverged(rest, reader, absl::Seconds(120), jobs);
      if (!view.ok()) return Fail(view.status().ToString());
      r.reconciled_s = Seconds(Clock::now() - killed);
      r.rewritten = Rewritten(rest) - rewritten_before;
      r.lost = jobs - static_cast<int64_t>(systest::AllJobs(rest).size());
      done.push_back(r);
      std::printf(
          "{\"bench\":\"ha_failover_run\",\"loss\":\"%s\",\"run\":%d,\"elected_s\":%.3f,"
          "\"writes_s\":%.3f,\"reconciled_s\":%.3f,\"rewritten\":%lld,\"lost\":%lld}\n",
          Name(loss), run, r.elected_s, r.writes_s, r.reconciled_s,
          static_cast<long long>(r.rewritten), static_cast<long long>(r.lost));
      std::fflush(stdout);
      // The supervisor's part: the old leader comes back as a follower (and the etcd member).
      if (etcd_member >= 0) {
        if (auto s = etcd.Restart(etcd_member); !s.ok()) return Fail(s.ToString());
        if (auto s = etcd.AwaitWritable(absl::Seconds(30)); !s.ok()) return Fail(s.ToString());
      }
      if (auto s = start_node(old); !s.ok()) return Fail(s.ToString());
      systest::Rest old_rest(nodes[old]->host_port(), absl::Seconds(5));
      for (int i = 0; i < 100 && old_rest.Get("/readyz").status != 200; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // its mirror catches up
      leader = LeaderInfo{next, 0};
    }
    std::vector<double> elected, writes, reconciled;
    int64_t rewritten = 0, lost = 0;
    for (const FailoverRun& r : done) {
      elected.push_back(r.elected_s);
      writes.push_back(r.writes_s);
      reconciled.push_back(r.reconciled_s);
      rewritten = std::max(rewritten, r.rewritten);
      lost = std::max(lost, r.lost);
    }
    std::printf(
        "{\"bench\":\"ha_failover\",\"loss\":\"%s\",\"jobs\":%d,\"switches\":%zu,"
        "\"lease_ttl_s\":%d,\"runs\":%zu,\"elected_p50_s\":%.3f,\"elected_p99_s\":%.3f,"
        "\"writes_p50_s\":%.3f,\"writes_p99_s\":%.3f,\"reconciled_p50_s\":%.3f,"
        "\"reconciled_p99_s\":%.3f,\"rewritten_max\":%lld,\"lost_max\":%lld}\n",
        Name(loss), kJobs, topology.switches.size(), ttl_s, done.size(), Percentile(elected, 0.5),
        Percentile(elected, 0.99), Percentile(writes, 0.5), Percentile(writes, 0.99),
        Percentile(reconciled, 0.5), Percentile(reconciled, 0.99),
        static_cast<long long>(rewritten), static_cast<long long>(lost));
    std::fflush(stdout);
  }
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
    if (int rc = Failover(2, runs, dir); rc != 0) return rc;
  }
  if (wanted("fabric")) {
    if (int rc = RunFabricBench(dir, runs); rc != 0) return rc;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
