// Warm standby, rolling upgrade and restore on etcd (docs/ha.md "Tests" 5-7), with real
// processes on loopback (tests/ha/ha_fixture.h). Every wait is bounded; label `ha`.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
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
