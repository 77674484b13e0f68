// High availability on etcd (docs/ha.md), with real processes on loopback -- a 3-member etcd
// cluster (tests/ha/etcd_cluster.h, Debian's /usr/bin/etcd), 2-3 `inac serve` in cluster mode
// (--cluster-endpoints, --node-id, --lease-ttl-s 3) and one `inac switch` per switch with its
// write log (--write-log: every Write / SetForwardingPipelineConfig with its election id and
// arbitration result). Skipped with a message when no etcd binary is installed. Every wait is
// bounded; label `ha`.
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
namespace {

constexpr int kLeaseTtlS = 3;

std::string Host(int index) { return absl::StrCat("h", index / 4, "_", index % 4); }

// Job i of a deterministic mix on the 16 hosts (as the system tests').
Json MixJob(int i, const std::string& prefix = "job-") {
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

std::vector<LoggedWrite> ReadWriteLog(const std::string& path) {
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

// The first scenario of docs/ha.md "Tests": kill -9 of the leader during 200 concurrent submissions
// (8 client threads, each request with its own Idempotency-Key; a client follows 503's leader and
// retries on a refused connection, as a launcher would). Every submission ends acknowledged; every
// job acknowledged (201, by the old leader or the new) is on the new leader with its spec; retrying
// every key on the new leader creates nothing (200, same id: the keys are in etcd); exactly one
// job per key; and the switches converge on the new leader's intents (read back over P4Runtime).
TEST_F(HaTest, LeaderKilledDuringConcurrentSubmissionsFailsOverWithoutLossOrDuplicate) {
  for (const char* id : {"a", "b", "c"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto first = AwaitLeader();
  ASSERT_TRUE(first) << "no leader elected";
  ASSERT_NO_FATAL_FAILURE(PutTopology(first->node_id));

  constexpr int kJobs = 200;
  constexpr int kThreads = 8;
  constexpr int kKillAfter = 50;
  std::vector<std::string> ids = {"a", "b", "c"};

  std::mutex mu;
  std::map<int, std::pair<int, int64_t>> acked;  // submission -> (status, job id)
  std::atomic<int> next{0}, created{0}, refused{0}, unanswered{0};
  std::atomic<bool> give_up{false};
  auto client = [&](int thread) {
    std::map<std::string, std::unique_ptr<Rest>> rest;
    for (const std::string& id : ids) {
      rest[id] = std::make_unique<Rest>(Node(id).host_port(), absl::Seconds(10));
    }
    std::string target = first->node_id;
    while (!give_up) {
      int i = next++;
      if (i >= kJobs) return;
      for (int attempt = 0; !give_up; ++attempt) {
        Response r =
            rest[target]->Post("/jobs", MixJob(i), {{"Idempotency-Key", absl::StrCat("key-", i)}});
        if (r.status == 201 || r.status == 200) {
          std::lock_guard<std::mutex> lock(mu);
          acked[i] = {r.status, r.body["id"].get<int64_t>()};
          if (r.status == 201) created++;
          break;
        }
        if (r.status == 503) {
          refused++;
          std::string leader = r.body["error"].value("leader", "");
          bool known = false;
          for (const std::string& id : ids) {
            if (!leader.empty() && Node(id).base_url() == leader) {
              target = id;
              known = true;
            }
          }
          if (!known) target = ids[(attempt + thread) % 3];
        } else if (r.status == 0) {
          unanswered++;
          target = ids[(attempt + thread + 1) % 3];
        } else {
          ADD_FAILURE() << "submission " << i << ": " << r.status << " " << r.text;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) clients.emplace_back(client, t);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (created < kKillAfter && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int created_before_kill = created.load();
  Node(first->node_id).Kill9();
  auto killed_at = std::chrono::steady_clock::now();
  // Bounded: the clients give up after 90 s.
  std::thread watchdog([&] {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (next < kJobs + kThreads && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::lock_guard<std::mutex> lock(mu);
      if (static_cast<int>(acked.size()) == kJobs) return;
    }
    give_up = true;
  });
  for (auto& t : clients) t.join();
  give_up = true;
  watchdog.join();
  ASSERT_GE(created_before_kill, kKillAfter);
  ASSERT_EQ(acked.size(), size_t{kJobs}) << "not every submission was acknowledged";

  auto second = AwaitLeader(first->node_id);
  ASSERT_TRUE(second) << "no new leader";
  EXPECT_GT(second->token, first->token) << "fencing tokens must grow";
  std::printf(
      "[ info ] %d created before the kill; new leader %s (token %lld, was %lld) %.1f s "
      "after the kill; %d refused (503), %d unanswered attempts\n",
      created_before_kill, second->node_id.c_str(), static_cast<long long>(second->token),
      static_cast<long long>(first->token),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count(),
      refused.load(), unanswered.load());
  Rest rest(Node(second->node_id).host_port(), absl::Seconds(30));

  // Every acknowledged job is on the new leader, with its spec.
  for (const auto& [i, ack] : acked) {
    Response r = rest.Get(absl::StrCat("/jobs/", ack.second));
    ASSERT_EQ(r.status, 200) << "job " << ack.second << " (submission " << i << ") lost";
    EXPECT_EQ(r.body["spec"]["name"], absl::StrCat("job-", i));
  }
  // Retrying every key on the new leader creates nothing.
  for (int i = 0; i < kJobs; ++i) {
    Response r = rest.Post("/jobs", MixJob(i), {{"Idempotency-Key", absl::StrCat("key-", i)}});
    ASSERT_EQ(r.status, 200) << "retry of submission " << i << ": " << r.text;
    EXPECT_EQ(r.body["id"].get<int64_t>(), acked[i].second);
  }
  std::vector<Json> jobs = AllJobs(rest);
  std::set<std::string> names;
  for (const Json& j : jobs) names.insert(j["spec"]["name"].get<std::string>());
  EXPECT_EQ(jobs.size(), size_t{kJobs});
  EXPECT_EQ(names.size(), size_t{kJobs});

  // A follower serves the same jobs and refuses writes naming the leader.
  std::string follower;
  for (const std::string& id : ids) {
    if (id != first->node_id && id != second->node_id) follower = id;
  }
  Rest follower_rest(Node(follower).host_port());
  EXPECT_EQ(AllJobs(follower_rest).size(), size_t{kJobs});
  Response refused_write = follower_rest.Post("/jobs", MixJob(999));
  EXPECT_EQ(refused_write.status, 503) << refused_write.text;
  EXPECT_EQ(refused_write.body["error"].value("leader", ""), second->url);
  // A follower is alive and ready (its loop does not run, by design).
  EXPECT_EQ(follower_rest.Get("/healthz").status, 200);
  EXPECT_EQ(follower_rest.Get("/readyz").status, 200);

  // The switches hold the new leader's intents.
  auto view = AwaitConverged(rest, reader_, absl::Seconds(90), kJobs);
  ASSERT_TRUE(view.ok()) << view.status() << "\n" << Logs(second->node_id);
  EXPECT_EQ(view->plan.jobs.size(), size_t{kJobs});
  // Since the new leader arbitrated, no switch accepted a write of the old leader's id.
  for (const auto& [sw, path] : write_logs_) {
    bool new_seen = false;
    for (const LoggedWrite& w : ReadWriteLog(path)) {
      if (w.election_low == static_cast<uint64_t>(second->token)) new_seen = true;
      if (new_seen && w.election_low == static_cast<uint64_t>(first->token)) {
        EXPECT_NE(w.result, 0) << sw << " accepted a write of the dead leader after the new one";
      }
    }
  }
}

// Priority 2: the leader is stopped (SIGSTOP) past its lease; a follower takes over and programs
// the switches; the old leader is continued (SIGCONT): it finds its lease lost, writes no switch
// (its election id never appears again in any switch's write log: not even an attempt, the local
// fence stops it before the wire) and steps down (exit code 3).
TEST_F(HaTest, StoppedLeaderNeverWritesASwitchAgainAndStepsDown) {
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto first = AwaitLeader();
  ASSERT_TRUE(first);
  ASSERT_NO_FATAL_FAILURE(PutTopology(first->node_id));
  {
    Rest rest(Node(first->node_id).host_port());
    for (int i = 0; i < 4; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
    auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 4);
    ASSERT_TRUE(view.ok()) << view.status() << Logs(first->node_id);
  }
  ChildProcess* old = Node(first->node_id).process();
  old->Signal(SIGSTOP);
  auto second = AwaitLeader(first->node_id);
  ASSERT_TRUE(second) << "no follower took over";
  EXPECT_GT(second->token, first->token);
  Rest rest(Node(second->node_id).host_port(), absl::Seconds(30));
  for (int i = 4; i < 8; ++i) {
    Response r = rest.Post("/jobs", MixJob(i));
    ASSERT_EQ(r.status, 201) << r.text;
  }
  auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 8);
  ASSERT_TRUE(view.ok()) << view.status() << Logs(second->node_id);
  std::map<std::string, size_t> seen;  // write-log lines before the old leader resumes
  for (const auto& [sw, path] : write_logs_) seen[sw] = ReadWriteLog(path).size();

  old->Signal(SIGCONT);
  int code = old->Wait(absl::Seconds(20));
  EXPECT_EQ(code, 3) << "the deposed leader did not step down: " << Logs(first->node_id);
  // More work for the new leader after the old one resumed; the fabric is its.
  for (int i = 8; i < 10; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
  view = AwaitConverged(rest, reader_, absl::Seconds(60), 10);
  ASSERT_TRUE(view.ok()) << view.status();
  int attempts = 0;
  for (const auto& [sw, path] : write_logs_) {
    std::vector<LoggedWrite> log = ReadWriteLog(path);
    for (size_t k = seen[sw]; k < log.size(); ++k) {
      if (log[k].election_low == static_cast<uint64_t>(first->token)) {
        ++attempts;
        EXPECT_NE(log[k].result, 0) << sw << " accepted a write of the deposed leader";
      }
    }
  }
  EXPECT_EQ(attempts, 0) << "the deposed leader attempted switch writes after it resumed";
  // The logs do show both leaders' writes (the check above is not vacuous).
  int old_accepted = 0, new_accepted = 0;
  for (const auto& [sw, path] : write_logs_) {
    for (const LoggedWrite& w : ReadWriteLog(path)) {
      if (w.result != 0) continue;
      if (w.election_low == static_cast<uint64_t>(first->token)) ++old_accepted;
      if (w.election_low == static_cast<uint64_t>(second->token)) ++new_accepted;
    }
  }
  EXPECT_GT(old_accepted, 0);
  EXPECT_GT(new_accepted, 0);
  std::printf(
      "[ info ] tokens %lld -> %lld; accepted switch writes: old leader %d (all before "
      "it was stopped), new leader %d; old leader exit code %d\n",
      static_cast<long long>(first->token), static_cast<long long>(second->token), old_accepted,
      new_accepted, code);
  EXPECT_NE(LogTail(old->log_path(), 20000).find("cluster_leadership_lost"), std::string::npos);
}

// Priority 3: one etcd member killed: service continues (a write commits). Two killed: writes
// answer 503, reads still work on a follower; when they return, a leader is elected again and
// every acknowledged job is there.
TEST_F(HaTest, EtcdMemberLossKeepsServiceAndQuorumLossRefusesWritesButServesReads) {
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto leader = AwaitLeader();
  ASSERT_TRUE(leader);
  ASSERT_NO_FATAL_FAILURE(PutTopology(leader->node_id));
  std::set<int64_t> acked;
  std::string last;  // the last refusal of submit_until, for the failure messages
  auto submit_until = [&](Rest& rest, int i, absl::Duration timeout) {
    auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
    while (std::chrono::steady_clock::now() < deadline) {
      Response r = rest.Post("/jobs", MixJob(i), {{"Idempotency-Key", absl::StrCat("q-", i)}});
      if (r.status == 201 || r.status == 200) return r.body["id"].get<int64_t>();
      last = absl::StrCat(r.status, " ", r.text);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return int64_t{0};
  };
  Rest rest(Node(leader->node_id).host_port(), absl::Seconds(15));
  for (int i = 0; i < 3; ++i) acked.insert(submit_until(rest, i, absl::Seconds(10)));
  etcd_.Kill(0);
  for (int i = 3; i < 6; ++i) {
    int64_t id = submit_until(rest, i, absl::Seconds(20));
    ASSERT_GT(id, 0) << "no write commits with one etcd member down\n" << Logs(leader->node_id);
    acked.insert(id);
  }
  etcd_.Kill(1);
  std::string follower = leader->node_id == "a" ? "b" : "a";
  Rest follower_rest(Node(follower).host_port(), absl::Seconds(15));
  // Writes: 503 (the leader cannot commit, then steps down; the follower refuses).
  Response w = follower_rest.Post("/jobs", MixJob(100));
  EXPECT_EQ(w.status, 503) << w.text;
  Response lw = rest.Post("/jobs", MixJob(101));
  EXPECT_TRUE(lw.status == 503 || lw.status == 0) << lw.status << " " << lw.text;
  // Reads on the follower still work and hold every acknowledged job.
  std::vector<Json> jobs = AllJobs(follower_rest);
  std::set<int64_t> listed;
  for (const Json& j : jobs) listed.insert(j["id"].get<int64_t>());
  for (int64_t id : acked) EXPECT_TRUE(listed.count(id)) << "job " << id << " not readable";
  // The members return: a leader again, nothing lost, writes commit.
  ASSERT_TRUE(etcd_.Restart(0).ok());
  ASSERT_TRUE(etcd_.Restart(1).ok());
  ASSERT_TRUE(etcd_.AwaitWritable(absl::Seconds(30)).ok()) << etcd_.Logs();
  // The old leader may have stepped down (exit 3): restarted as its supervisor would.
  if (Node(leader->node_id).process()->Exited()) {
    ASSERT_NO_FATAL_FAILURE(StartNode(leader->node_id));
  }
  auto again = AwaitLeader("", absl::Seconds(30));
  ASSERT_TRUE(again);
  Rest new_rest(Node(again->node_id).host_port(), absl::Seconds(15));
  std::set<int64_t> after;
  for (const Json& j : AllJobs(new_rest)) after.insert(j["id"].get<int64_t>());
  for (int64_t id : acked) EXPECT_TRUE(after.count(id)) << "acknowledged job " << id << " lost";
  // A write commits on whichever node leads now: the leader found above may still step down (its
  // lease lapsed during the quorum loss), as a launcher would, look the leader up again.
  int64_t written = 0;
  std::string tried;
  const auto write_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  while (written == 0 && std::chrono::steady_clock::now() < write_deadline) {
    auto now_leader = AwaitLeader("", absl::Seconds(10));
    if (!now_leader) continue;
    absl::StrAppend(&tried, now_leader->node_id, " ");
    Rest leader_rest(Node(now_leader->node_id).host_port(), absl::Seconds(5));
    written = submit_until(leader_rest, 200, absl::Seconds(3));
  }
  EXPECT_GT(written, 0) << "tried " << tried << "; last answer " << last << "\n"
                        << Logs("a") << Logs("b");
}

// Priority 4: a follower restarted with an empty database catches up at once (the jobs are in
// etcd) and, when the leader dies, takes over and programs the fabric.
TEST_F(HaTest, FollowerRestartedEmptyCatchesUpAndCanLead) {
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto leader = AwaitLeader();
  ASSERT_TRUE(leader);
  ASSERT_NO_FATAL_FAILURE(PutTopology(leader->node_id));
  Rest rest(Node(leader->node_id).host_port());
  for (int i = 0; i < 6; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
  std::string follower = leader->node_id == "a" ? "b" : "a";
  Node(follower).Kill9();
  std::filesystem::remove(absl::StrCat(dir_, "/node-", follower, ".db"));
  ASSERT_NO_FATAL_FAILURE(StartNode(follower));
  Rest follower_rest(Node(follower).host_port());
  EXPECT_EQ(AllJobs(follower_rest).size(), 6u);
  Node(leader->node_id).Kill9();
  auto next = AwaitLeader(leader->node_id);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->node_id, follower);
  auto view = AwaitConverged(follower_rest, reader_, absl::Seconds(60), 6);
  ASSERT_TRUE(view.ok()) << view.status() << Logs(follower);
}

// Warm standby: kill -9 of the leader with the fabric programmed. A follower finds the dead
// leader's port refusing and revokes its lease (well before the TTL), the new leader adopts the
// replicated plan instead of re-planning, and -- the jobs being unchanged -- its reconciliation
// reads every switch back and writes nothing: no Write or SetForwardingPipelineConfig of its
// election id in any switch's log, and the fabric still equals the plan.
TEST_F(HaTest, CrashFailoverAdoptsThePlanAndRewritesNoEntry) {
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto first = AwaitLeaderWithEpoch();
  ASSERT_TRUE(first);
  ASSERT_NO_FATAL_FAILURE(PutTopology(first->node_id));
  {
    Rest rest(Node(first->node_id).host_port());
    for (int i = 0; i < 12; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
    auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 12);
    ASSERT_TRUE(view.ok()) << view.status() << Logs(first->node_id);
  }
  const std::string follower = first->node_id == "a" ? "b" : "a";
  Node(first->node_id).Kill9();
  auto second = AwaitLeaderWithEpoch(first->node_id);
  ASSERT_TRUE(second) << Logs(follower);
  EXPECT_EQ(second->node_id, follower);
  EXPECT_GT(second->epoch, first->epoch);
  EXPECT_NE(LogTail(Node(follower).process()->log_path(), 200000).find("cluster_leader_gone"),
            std::string::npos)
      << "the follower did not notice the dead leader's port";
  Rest rest(Node(second->node_id).host_port(), absl::Seconds(30));
  auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 12);
  ASSERT_TRUE(view.ok()) << view.status() << Logs(second->node_id);
  int rewrites = 0;
  for (const auto& [sw, log] : WriteLogs()) {
    for (const LoggedWrite& w : log) {
      if (w.election_high == static_cast<uint64_t>(second->epoch) &&
          w.election_low == static_cast<uint64_t>(second->token)) {
        ++rewrites;
        ADD_FAILURE() << sw << ": the new leader sent " << w.rpc << " for unchanged jobs";
      }
    }
  }
  EXPECT_EQ(rewrites, 0);
  EXPECT_EQ(LogTail(Node(second->node_id).process()->log_path(), 400000).find("event=plan_saved"),
            std::string::npos)
      << "the new leader re-planned";
  // The new leader is primary everywhere: a change is programmed with its id.
  ASSERT_EQ(rest.Post("/jobs", MixJob(12)).status, 201);
  view = AwaitConverged(rest, reader_, absl::Seconds(60), 13);
  ASSERT_TRUE(view.ok()) << view.status() << Logs(second->node_id);
}

// Rolling upgrade (docs/ha.md runbook): each of three nodes in turn -- followers first, the
// leader last -- gets SIGTERM (exit 0) and is started again on its database, while a launcher
// keeps submitting and following the leader. Every acknowledged submission is there exactly once
// and no job that ran before the upgrade is scheduled again: each new leader adopts the plan in
// force instead of re-planning.
TEST_F(HaTest, RollingRestartUnderLoadLosesNothingAndReschedulesNoJob) {
  std::vector<std::string> ids = {"a", "b", "c"};
  for (const std::string& id : ids) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto leader = AwaitLeaderWithEpoch();
  ASSERT_TRUE(leader);
  ASSERT_NO_FATAL_FAILURE(PutTopology(leader->node_id));
  std::set<int64_t> before;
  int64_t last_seq = 0;
  {
    Rest rest(Node(leader->node_id).host_port());
    for (int i = 0; i < 8; ++i) {
      Response r = rest.Post("/jobs", MixJob(i, "pre-"));
      ASSERT_EQ(r.status, 201) << r.text;
      before.insert(r.body["id"].get<int64_t>());
    }
    auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 8);
    ASSERT_TRUE(view.ok()) << view.status() << Logs(leader->node_id);
    Response events = rest.Get("/events?tail=1");
    ASSERT_EQ(events.status, 200) << events.text;
    last_seq = events.body.value("last_seq", int64_t{0});
  }
  // The launcher: submissions with keys, to whichever node etcd names leader.
  std::mutex mu;
  std::map<int, int64_t> acked;  // submission -> job id
  std::atomic<bool> stop{false};
  std::thread launcher([&] {
    for (int i = 0; !stop.load(); ++i) {
      for (int attempt = 0; !stop.load(); ++attempt) {
        auto now = AwaitLeader("", absl::Seconds(5));
        if (!now) continue;
        std::string host_port = now->url.substr(now->url.find("://") + 3);
        Rest rest(host_port, absl::Seconds(5));
        Response r = rest.Post("/jobs", MixJob(100 + i, "roll-"),
                               {{"Idempotency-Key", absl::StrCat("roll-", i)}});
        if (r.status == 201 || r.status == 200) {
          std::lock_guard<std::mutex> lock(mu);
          acked[i] = r.body["id"].get<int64_t>();
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Followers first, then the leader.
  std::vector<std::string> order;
  for (const std::string& id : ids) {
    if (id != leader->node_id) order.push_back(id);
  }
  order.push_back(leader->node_id);
  for (const std::string& id : order) {
    EXPECT_EQ(Node(id).Terminate(), 0) << "node " << id << " did not stop cleanly" << Logs(id);
    ASSERT_NO_FATAL_FAILURE(StartNode(id));
    auto now = AwaitLeaderWithEpoch();
    ASSERT_TRUE(now) << "no leader after restarting " << id;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the launcher keeps going
  }
  stop = true;
  launcher.join();
  auto last = AwaitLeaderWithEpoch();
  ASSERT_TRUE(last);
  EXPECT_NE(last->node_id, leader->node_id) << "the leader was restarted: another must lead";
  Rest rest(Node(last->node_id).host_port(), absl::Seconds(30));
  std::map<std::string, int> names;
  for (const Json& j : AllJobs(rest)) names[j["spec"]["name"].get<std::string>()]++;
  for (const auto& [i, id] : acked) {
    EXPECT_EQ(names[absl::StrCat("roll-", 100 + i)], 1)
        << "submission " << i << " (job " << id << ") lost or duplicated";
  }
  EXPECT_GT(acked.size(), 5u) << "the launcher made too little progress to call this load";
  auto view = AwaitConverged(rest, reader_, absl::Seconds(90),
                             static_cast<int>(before.size() + acked.size()));
  ASSERT_TRUE(view.ok()) << view.status() << Logs(last->node_id);
  for (int64_t since = last_seq;;) {
    Response events = rest.Get(absl::StrCat("/events?kind=job_scheduled&limit=1000&since=", since));
    ASSERT_EQ(events.status, 200) << events.text;
    if (events.body["events"].empty()) break;
    for (const Json& e : events.body["events"]) {
      since = std::max(since, e.value("seq", int64_t{0}));
      if (!e.contains("job_id")) continue;
      EXPECT_FALSE(before.count(e["job_id"].get<int64_t>()))
          << "job " << e["job_id"] << " that ran before the upgrade was scheduled again: " << e;
    }
  }
  std::printf("[ info ] %zu submissions acknowledged during the rolling restart; leader %s -> %s\n",
              acked.size(), leader->node_id.c_str(), last->node_id.c_str());
}

// Backup and restore (docs/ha.md runbook). etcd restored from a snapshot taken before the last
// election rewinds its revision, so the next leader's token can be below one the switches saw.
// Its epoch -- one above the highest any node mirrored -- still makes its election id the
// greatest: it programs every switch (the restore dropped two jobs, whose entries it deletes),
// and the leader of before the restore is fenced (its lease is not in the restored etcd: it steps
// down, and no switch accepts its id after the new leader's first write).
TEST_F(HaTest, RestoreFromAnOlderSnapshotKeepsElectionIdsGrowing) {
  if (inac::testing::FindEtcdctlBinary().empty()) {
    GTEST_SKIP() << "no etcdctl (apt-get install etcd-client): needed to save and restore";
  }
  for (const char* id : {"a", "b"}) ASSERT_NO_FATAL_FAILURE(StartNode(id));
  auto first = AwaitLeaderWithEpoch();
  ASSERT_TRUE(first);
  ASSERT_NO_FATAL_FAILURE(PutTopology(first->node_id));
  {
    Rest rest(Node(first->node_id).host_port());
    for (int i = 0; i < 4; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
    ASSERT_TRUE(AwaitConverged(rest, reader_, absl::Seconds(60), 4).ok());
  }
  const std::string snapshot = dir_ + "/backup.db";
  ASSERT_TRUE(etcd_.SaveSnapshot(0, snapshot).ok()) << etcd_.Logs();
  // After the backup: two more jobs (revisions the restore takes back), then a later election.
  {
    Rest rest(Node(first->node_id).host_port());
    for (int i = 4; i < 6; ++i) ASSERT_EQ(rest.Post("/jobs", MixJob(i)).status, 201);
    ASSERT_TRUE(AwaitConverged(rest, reader_, absl::Seconds(60), 6).ok());
  }
  Node(first->node_id).Kill9();
  auto second = AwaitLeaderWithEpoch(first->node_id);
  ASSERT_TRUE(second);
  ASSERT_NO_FATAL_FAILURE(StartNode(first->node_id));  // its supervisor restarts it
  {
    Rest rest(Node(second->node_id).host_port(), absl::Seconds(30));
    ASSERT_TRUE(AwaitConverged(rest, reader_, absl::Seconds(60), 6).ok()) << Logs(second->node_id);
  }
  ASSERT_TRUE(etcd_.RestoreSnapshot(snapshot).ok()) << etcd_.Logs();
  // The leader of before the restore: its lease is not in the restored etcd; it steps down.
  int code = Node(second->node_id).process()->Wait(absl::Seconds(30));
  EXPECT_EQ(code, 3) << Logs(second->node_id);
  ASSERT_NO_FATAL_FAILURE(StartNode(second->node_id));  // its supervisor restarts it
  auto third = AwaitLeaderWithEpoch("", absl::Seconds(60));
  ASSERT_TRUE(third) << Logs("a") << Logs("b");
  // The hazard is real here: the restored revision gives the new leader a lower token...
  EXPECT_LT(third->token, second->token);
  // ... and the epoch still puts its election id above every one seen before.
  EXPECT_GT(third->epoch, second->epoch) << "the epoch must pass the highest seen before";
  std::printf(
      "[ info ] election ids (epoch:token): %lld:%lld -> %lld:%lld -> restore -> "
      "%lld:%lld\n",
      static_cast<long long>(first->epoch), static_cast<long long>(first->token),
      static_cast<long long>(second->epoch), static_cast<long long>(second->token),
      static_cast<long long>(third->epoch), static_cast<long long>(third->token));
  Rest rest(Node(third->node_id).host_port(), absl::Seconds(30));
  // The restored etcd holds the four jobs of the snapshot: the two later ones are gone.
  auto view = AwaitConverged(rest, reader_, absl::Seconds(90), 4);
  ASSERT_TRUE(view.ok()) << view.status() << Logs(third->node_id);
  int accepted_new = 0;
  for (const auto& [sw, log] : WriteLogs()) {
    bool new_seen = false;
    for (const LoggedWrite& w : log) {
      const bool is_new = w.election_high == static_cast<uint64_t>(third->epoch) &&
                          w.election_low == static_cast<uint64_t>(third->token);
      const bool is_second = w.election_high == static_cast<uint64_t>(second->epoch) &&
                             w.election_low == static_cast<uint64_t>(second->token);
      if (is_new && w.result == 0) {
        new_seen = true;
        ++accepted_new;
      }
      if (new_seen && is_second) {
        EXPECT_NE(w.result, 0) << sw << " accepted a write of the leader of before the restore";
      }
    }
  }
  EXPECT_GT(accepted_new, 0) << "the new leader programmed no switch";
}

}  // namespace
}  // namespace inac::systest
