// High availability on etcd (docs/ha.md "Tests" 1-4), with real processes on loopback
// (tests/ha/ha_fixture.h): failover during submissions, a stopped leader, etcd member loss, a
// follower restarted empty. Every wait is bounded; label `ha`.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/ha/ha_fixture.h"

namespace inac::systest {
namespace {

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

}  // namespace
}  // namespace inac::systest
