#include "bench/ha_fabric.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "core/json.h"
#include "storage/etcd/etcd_client.h"
#include "tests/ha/etcd_cluster.h"
#include "tests/system/harness.h"

namespace {

namespace systest = inac::systest;
using Clock = std::chrono::steady_clock;
using systest::Json;

constexpr int kK = 32;           // fat-tree arity: 5k²/4 = 1,280 switches, k³/4 = 8,192 hosts
constexpr int kJobs = 128;       // 2 workers + 1 PS each, on distinct hosts across the pods
constexpr int kLeaseTtlS = 3;    // as tests/ha/ha_fixture.h
constexpr int kReadThreads = 8;  // the verification read-back (outside the timings)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Host `index` of edge switch `edge` in pod `pod` (core/generators.h names).
std::string Host(int pod, int edge, int index) {
  return absl::StrCat("h", pod, "_", edge, "_", index);
}

// Job i: workers and PS in three different pods, each host used by one job only.
Json FabricJob(int i) {
  const int row = i / kK;
  return systest::LongRunningJob(
      absl::StrCat("fabric-", i),
      {Host(i % kK, row % (kK / 2), 0), Host((i + 11) % kK, (row + 5) % (kK / 2), 1)},
      {Host((i + 21) % kK, (row + 9) % (kK / 2), 2)}, i % 3);
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "ha_bench fabric: %s\n", what.c_str());
  return 1;
}

// The etcd leader key's holder (as ha_bench.cc reads it); nullopt when there is none.
std::optional<std::string> LeaderOf(inac::storage::etcd::EtcdClient& client) {
  etcdserverpb::RangeRequest r;
  r.set_key("/inac/leader");
  auto got = client.Range(r);
  if (!got.ok() || got->kvs_size() == 0) return std::nullopt;
  Json v = Json::parse(got->kvs(0).value(), nullptr, false);
  if (!v.is_object()) return std::nullopt;
  return v.value("node_id", "");
}

// Polls until `want` (any node when empty) holds the leader key, at most `timeout`.
std::optional<std::string> AwaitLeader(inac::storage::etcd::EtcdClient& client,
                                       const std::string& want, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    auto leader = LeaderOf(client);
    if (leader && (want.empty() || *leader == want)) return leader;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// VmRSS (MiB), Threads and CPU time (user + system, s) of a process, from /proc (0 when
// unreadable).
struct ProcessCost {
  double rss_mib = 0;
  int threads = 0;
  double cpu_s = 0;
};
ProcessCost CostOf(pid_t pid) {
  ProcessCost c;
  {
    // /proc/PID/stat: fields 14 and 15 are utime and stime in clock ticks; the command (field 2)
    // is parenthesised and may hold spaces, so count from its closing parenthesis.
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t paren = text.rfind(')');
    if (paren != std::string::npos && paren + 2 < text.size()) {
      std::istringstream fields(text.substr(paren + 2));
      std::string field;
      double utime = 0, stime = 0;
      for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14) utime = std::atof(field.c_str());
        if (i == 15) stime = std::atof(field.c_str());
      }
      c.cpu_s = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      c.rss_mib = kb / 1024;
    } else if (key == "Threads:") {
      in >> c.threads;
    }
  }
  return c;
}

// Reads every switch back and compares it with the controller's current plan. "" when equal.
std::string ReadBack(systest::Rest& rest, double* seconds) {
  auto start = Clock::now();
  auto view = systest::FetchView(rest);
  if (!view) return "no topology or plan";
  std::string diff = systest::CompareFabricParallel(
      view->topology, systest::IntentsBySwitch(view->topology, view->plan), kReadThreads);
  *seconds = Seconds(Clock::now() - start);
  return diff.size() > 2000 ? diff.substr(0, 2000) + "..." : diff;
}

struct RunFigures {
  double cold_start_s = 0;
  double plan_solve_ms = 0;
  double failover_s = 0;
  double new_leader_s = 0;
};

int OneRun(const std::string& base_dir, int run, RunFigures* figures) {
  const std::string dir = absl::StrCat(base_dir, "/fabric-", run);
  std::filesystem::create_directories(dir);
  // The k=32 topology is one ~2.1 MB value in etcd, above etcd's default request limit (1.5 MiB):
  // raise it for the members the harness starts (etcd reads ETCD_<FLAG> from its environment).
  setenv("ETCD_MAX_REQUEST_BYTES", "16777216", 0);
  inac::testing::EtcdCluster etcd;
  if (auto s = etcd.Start(3); !s.ok()) return Fail(s.ToString());
  auto client = inac::storage::etcd::EtcdClient::Create({etcd.endpoint_list(), absl::Seconds(1)});
  if (!client.ok()) return Fail(client.status().ToString());

  auto topology = inac::core::GenerateFatTree(kK, inac::core::GeneratorOptions{});
  if (!topology.ok()) return Fail(topology.status().ToString());
  systest::EmulatedFabric fabric;
  if (auto s = fabric.StartShared(&*topology, dir); !s.ok()) return Fail(s.ToString());

  std::map<std::string, std::unique_ptr<systest::ControllerProcess>> nodes;
  for (const char* id : {"a", "b"}) {
    auto node = std::make_unique<systest::ControllerProcess>();
    // ATP routing: the figures are the southbound's, not the LP's solve time. The k=32
    // topology's JSON (~2.5 MB) is above the default 1 MiB request body limit.
    auto s = node->Start(dir, absl::StrCat("node-", id), absl::StrCat(dir, "/node-", id, ".db"),
                         Json{{"algorithm", "atp"}, {"http", {{"max_body_bytes", 16 << 20}}}},
                         {"--cluster-endpoints", etcd.endpoints(), "--node-id", id, "--lease-ttl-s",
                          absl::StrCat(kLeaseTtlS)});
    if (!s.ok()) return Fail(s.ToString());
    nodes[id] = std::move(node);
  }
  auto leader = AwaitLeader(**client, "", absl::Seconds(30));
  if (!leader || !nodes.count(*leader)) return Fail("no leader");
  systest::Rest rest(nodes[*leader]->host_port(), absl::Seconds(60));
  // The jobs wait, stored, for a topology: the cold start below plans them all at once.
  for (int i = 0; i < kJobs; ++i) {
    // The leader key can be seen in etcd a moment before its holder answers as the leader (503
    // until then): retry for a while.
    systest::Response r;
    for (int attempt = 0; attempt < 100; ++attempt) {
      r = rest.Post("/jobs", FabricJob(i));
      if (r.status != 503) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (r.status != 201) return Fail(absl::StrCat("job ", i, ": HTTP ", r.status, " ", r.text));
  }

  // Cold start.
  const pid_t host_pid = fabric.shared_process()->pid();
  const std::string follower = *leader == "a" ? "b" : "a";
  const ProcessCost host_before = CostOf(host_pid);
  const ProcessCost leader_before = CostOf(nodes[*leader]->process()->pid());
  const int64_t put_ms = systest::UnixMs();
  const auto put = Clock::now();
  auto put_answer = rest.Put("/topology", inac::core::TopologyToJson(*topology));
  if (put_answer.status != 200) return Fail(absl::StrCat("topology refused: ", put_answer.text));
  auto cold = systest::AwaitFleetReconciled(rest, put_ms, absl::Seconds(180), kJobs,
                                            absl::Milliseconds(50));
  if (!cold.ok()) return Fail(absl::StrCat("cold start: ", cold.status().ToString()));
  figures->cold_start_s = Seconds(Clock::now() - put);
  figures->plan_solve_ms = cold->solve_ms;
  const ProcessCost host = CostOf(host_pid);
  const ProcessCost leader_cost = CostOf(nodes[*leader]->process()->pid());
  const ProcessCost follower_cost = CostOf(nodes[follower]->process()->pid());
  double cold_read_s = 0;
  if (std::string diff = ReadBack(rest, &cold_read_s); !diff.empty()) {
    return Fail(absl::StrCat("cold start read-back differs:\n", diff));
  }

  // Failover.
  const ProcessCost host_before_kill = CostOf(host_pid);
  const int64_t kill_ms = systest::UnixMs();
  const auto killed = Clock::now();
  nodes[*leader]->Kill9();
  auto elected = AwaitLeader(**client, follower, absl::Seconds(60));
  if (!elected) return Fail("no new leader");
  figures->new_leader_s = Seconds(Clock::now() - killed);
  systest::Rest next(nodes[follower]->host_port(), absl::Seconds(60));
  auto taken = systest::AwaitFleetReconciled(next, kill_ms, absl::Seconds(180), kJobs,
                                             absl::Milliseconds(50));
  if (!taken.ok()) return Fail(absl::StrCat("failover: ", taken.status().ToString()));
  figures->failover_s = Seconds(Clock::now() - killed);
  const ProcessCost new_leader_cost = CostOf(nodes[follower]->process()->pid());
  const ProcessCost host_after = CostOf(host_pid);
  double failover_read_s = 0;
  if (std::string diff = ReadBack(next, &failover_read_s); !diff.empty()) {
    return Fail(absl::StrCat("failover read-back differs:\n", diff));
  }

  std::printf(
      "{\"bench\":\"ha_fabric\",\"run\":%d,\"k\":%d,\"switches\":%zu,\"hosts\":%zu,\"jobs\":%d,"
      "\"algorithm\":\"atp\",\"lease_ttl_s\":%d,\"cold_start_s\":%.2f,\"plan_solve_ms\":%.1f,"
      "\"plan_version\":%lld,\"failover_s\":%.2f,\"new_leader_s\":%.2f,"
      "\"takeover_after_election_s\":%.2f,\"failover_plan_version\":%lld,"
      "\"verify\":\"full parallel read-back (%d threads) after each timing\","
      "\"readback_s\":[%.2f,%.2f],\"switch_host_rss_mib\":%.0f,\"switch_host_threads\":%d,"
      "\"leader_rss_mib\":%.0f,\"leader_threads\":%d,\"follower_threads\":%d,"
      "\"new_leader_threads\":%d,\"cold_cpu_s\":{\"leader\":%.2f,\"switch_host\":%.2f},"
      "\"failover_cpu_s\":{\"new_leader\":%.2f,\"switch_host\":%.2f}}\n",
      run, kK, topology->switches.size(), topology->hosts.size(), kJobs, kLeaseTtlS,
      figures->cold_start_s, figures->plan_solve_ms, static_cast<long long>(cold->plan_version),
      figures->failover_s, figures->new_leader_s, figures->failover_s - figures->new_leader_s,
      static_cast<long long>(taken->plan_version), kReadThreads, cold_read_s, failover_read_s,
      host.rss_mib, host.threads, leader_cost.rss_mib, leader_cost.threads, follower_cost.threads,
      new_leader_cost.threads, leader_cost.cpu_s - leader_before.cpu_s,
      host.cpu_s - host_before.cpu_s, new_leader_cost.cpu_s - follower_cost.cpu_s,
      host_after.cpu_s - host_before_kill.cpu_s);
  std::fflush(stdout);
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

int RunFabricBench(const std::string& dir, int runs) {
  std::vector<RunFigures> all;
  for (int run = 0; run < std::max(1, runs); ++run) {
    RunFigures f;
    if (int rc = OneRun(dir, run, &f); rc != 0) return rc;
    all.push_back(f);
  }
  if (all.size() < 2) return 0;
  auto column = [&](double RunFigures::*field) {
    std::vector<double> v;
    for (const RunFigures& f : all) v.push_back(f.*field);
    return v;
  };
  auto cold = column(&RunFigures::cold_start_s);
  auto fail = column(&RunFigures::failover_s);
  auto elect = column(&RunFigures::new_leader_s);
  auto plan = column(&RunFigures::plan_solve_ms);
  std::printf(
      "{\"bench\":\"ha_fabric\",\"k\":%d,\"switches\":%d,\"jobs\":%d,\"runs\":%zu,"
      "\"cold_start_s\":{\"p50\":%.2f,\"p99\":%.2f},\"failover_s\":{\"p50\":%.2f,\"p99\":%.2f},"
      "\"new_leader_s\":{\"p50\":%.2f,\"p99\":%.2f},\"plan_solve_ms\":{\"p50\":%.1f,"
      "\"p99\":%.1f}}\n",
      kK, 5 * kK * kK / 4, kJobs, all.size(), Percentile(cold, 0.5), Percentile(cold, 0.99),
      Percentile(fail, 0.5), Percentile(fail, 0.99), Percentile(elect, 0.5),
      Percentile(elect, 0.99), Percentile(plan, 0.5), Percentile(plan, 0.99));
  std::fflush(stdout);
  return 0;
}
