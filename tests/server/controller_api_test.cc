// The controller's behaviour through the REST API (docs/controller.md, "Data flow"), in-process: a
// temp-file SQLite database, FakeSwitchClients the test inspects, the real scheduler. The loop
// runs a pass when woken; Sync() waits for one (no timed assertions).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

class ControllerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(topology_), 200);
    ASSERT_TRUE(server_.Sync().ok());  // creates the switch clients
  }

  std::string Job(int64_t id, const std::string& suffix = "") {
    return absl::StrCat("/api/v1/jobs/", id, suffix);
  }
  int64_t PlanVersion() {
    Reply r = server_.Get("/api/v1/plan");
    return r.status == 200 ? r.json["version"].get<int64_t>() : 0;
  }
  int64_t TotalEntities() {
    int64_t n = 0;
    for (const auto& id : server_.fabric().ids()) n += server_.fabric().Get(id)->entity_count();
    return n;
  }
  // Every fake holds exactly the stored intent of the latest plan.
  void ExpectSwitchesEqualStoredIntents() {
    auto plan = server_.storage().plans().Latest();
    ASSERT_TRUE(plan.ok() && plan->has_value());
    auto intents = server_.storage().plans().Intents((*plan)->plan.version);
    ASSERT_TRUE(intents.ok());
    ASSERT_EQ(intents->size(), topology_.switches.size());
    for (const core::SwitchIntent& intent : *intents) {
      auto fake = server_.fabric().Get(intent.switch_id);
      ASSERT_NE(fake, nullptr) << intent.switch_id;
      auto applied = fake->applied_intent();
      ASSERT_TRUE(applied.has_value()) << intent.switch_id;
      EXPECT_EQ(*applied, intent) << intent.switch_id;
    }
  }
  // Links (as "a~b" in either order) the plan's paths traverse.
  static std::set<std::pair<std::string, std::string>> PlanHops(const Json& plan) {
    std::set<std::pair<std::string, std::string>> hops;
    auto add_path = [&](const Json& path) {
      for (size_t i = 0; i + 1 < path.size(); ++i) {
        std::string a = path[i].get<std::string>(), b = path[i + 1].get<std::string>();
        hops.insert({std::min(a, b), std::max(a, b)});
      }
    };
    for (const Json& job : plan["jobs"]) {
      if (job.contains("flows")) {
        for (const Json& f : job["flows"]) add_path(f["path"]);
      }
      if (job.contains("aggregator_paths")) {
        for (const Json& a : job["aggregator_paths"]) add_path(a["path"]);
      }
    }
    return hops;
  }

  core::Topology topology_ = SmallLeafSpine();
  TestServer server_;
};

TEST_F(ControllerApiTest, SubmittedJobRunsOnceEverySwitchApplied) {
  // The workers' leaf is unreachable: the job is planned but cannot run.
  auto lf0 = server_.fabric().Get("lf0");
  ASSERT_NE(lf0, nullptr);
  lf0->SetReachable(false);

  Reply submitted = server_.Call("POST", "/api/v1/jobs", SmallLeafSpineJob("resnet").dump());
  ASSERT_EQ(submitted.status, 201) << submitted;
  EXPECT_EQ(submitted.json["state"], "pending");
  int64_t id = submitted.json["id"].get<int64_t>();
  EXPECT_EQ(submitted.headers.find("Location")->second, Job(id));

  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(server_.JobState(id), "scheduled");
  Reply sw = server_.Get("/api/v1/switches/lf0");
  ASSERT_EQ(sw.status, 200);
  EXPECT_FALSE(sw.json["connected"].get<bool>());
  EXPECT_FALSE(sw.json["in_sync"].get<bool>());
  EXPECT_NE(sw.json["last_error"], "");
  Reply ready = server_.Get("/api/v1/readyz", "");
  EXPECT_EQ(ready.status, 503) << ready;
  EXPECT_EQ(ready.code(), "unavailable");
  EXPECT_TRUE(absl::StrContains(ready.message(), "lf0")) << ready;

  lf0->SetReachable(true);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(server_.JobState(id), "running");
  ExpectSwitchesEqualStoredIntents();
  EXPECT_GT(lf0->entity_count(), 0);
  EXPECT_EQ(server_.Get("/api/v1/readyz", "").status, 200);

  Reply switches = server_.Get("/api/v1/switches");
  ASSERT_EQ(switches.status, 200);
  ASSERT_EQ(switches.json["switches"].size(), 4u);
  for (const Json& s : switches.json["switches"]) {
    EXPECT_TRUE(s["connected"].get<bool>()) << s.dump();
    EXPECT_TRUE(s["primary"].get<bool>()) << s.dump();
    EXPECT_TRUE(s["in_sync"].get<bool>()) << s.dump();
    EXPECT_EQ(s["applied_version"], PlanVersion()) << s.dump();
    EXPECT_EQ(s["pipeline_pushes"], 1) << s.dump();
  }

  // The events tell the story in order.
  Reply events = server_.Get(absl::StrCat("/api/v1/events?job=", id));
  ASSERT_EQ(events.status, 200);
  std::vector<std::string> kinds;
  for (const Json& e : events.json["events"]) kinds.push_back(e["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::vector<std::string>{"job_submitted", "job_scheduled", "job_running"}));
}

TEST_F(ControllerApiTest, ListFiltersByStateAndTenantWithCursorPagination) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 7; ++i) {
    ids.push_back(
        server_.Submit(SmallLeafSpineJob(absl::StrCat("job", i), i % 2 ? "nlp" : "vision")));
    ASSERT_GT(ids.back(), 0);
  }
  ASSERT_EQ(server_.Call("DELETE", Job(ids[2])).status, 200);
  ASSERT_EQ(server_.Call("DELETE", Job(ids[3])).status, 200);

  // Pages of 3 by cursor: every job once, in id order.
  std::vector<int64_t> seen;
  std::string cursor = "";
  for (int page = 0; page < 10; ++page) {
    Reply r = server_.Get("/api/v1/jobs?limit=3" + cursor);
    ASSERT_EQ(r.status, 200) << r;
    EXPECT_LE(r.json["jobs"].size(), 3u);
    for (const Json& j : r.json["jobs"]) seen.push_back(j["id"].get<int64_t>());
    if (r.json["next_after"].is_null()) break;
    cursor = absl::StrCat("&after=", r.json["next_after"].get<int64_t>());
  }
  EXPECT_EQ(seen, ids);

  auto Ids = [&](const std::string& query) {
    Reply r = server_.Get("/api/v1/jobs?" + query);
    EXPECT_EQ(r.status, 200) << r;
    std::vector<int64_t> out;
    for (const Json& j : r.json["jobs"]) out.push_back(j["id"].get<int64_t>());
    return out;
  };
  EXPECT_EQ(Ids("state=cancelled"), (std::vector<int64_t>{ids[2], ids[3]}));
  EXPECT_EQ(Ids("tenant=nlp"), (std::vector<int64_t>{ids[1], ids[3], ids[5]}));
  EXPECT_EQ(Ids("tenant=nlp&state=cancelled"), (std::vector<int64_t>{ids[3]}));
  // The loop moves jobs on concurrently (pending -> scheduled -> running), so the multi-state
  // filter names every state a live job can be in.
  EXPECT_EQ(Ids("state=pending,scheduled,running,cancelled&tenant=vision&after=" +
                std::to_string(ids[0])),
            (std::vector<int64_t>{ids[2], ids[4], ids[6]}));
  EXPECT_EQ(Ids("tenant=nobody"), std::vector<int64_t>{});

  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(Ids("state=running").size(), 5u);
  EXPECT_EQ(Ids("state=pending,scheduled").size(), 0u);
}

TEST_F(ControllerApiTest, JobConfigGivesWorkersWhatTheyNeed) {
  int64_t id = server_.Submit(SmallLeafSpineJob("cfg"));
  ASSERT_TRUE(server_.Sync().ok());
  Reply plan = server_.Get("/api/v1/plan");
  ASSERT_EQ(plan.status, 200);
  Reply r = server_.Get(Job(id, "/config"));
  ASSERT_EQ(r.status, 200) << r;
  const Json& c = r.json;
  EXPECT_EQ(c["job_id"], id);
  EXPECT_EQ(c["state"], "running");
  EXPECT_EQ(c["plan_version"], plan.json["version"]);
  EXPECT_EQ(c["algorithm"], "trees");  // the default
  EXPECT_EQ(c["batch_size"], 32);
  ASSERT_EQ(c["parameter_servers"].size(), 1u);
  const Json& ps = c["parameter_servers"][0];
  EXPECT_EQ(ps["ps"], "h1_0");
  EXPECT_EQ(ps["ps_address"], core::FormatIpv4(core::NodeAddress(topology_, "h1_0")));
  EXPECT_DOUBLE_EQ(ps["share"].get<double>(), 1.0);
  EXPECT_EQ(ps["tag"], core::AggregationTag(id, 0));
  ASSERT_EQ(c["workers"].size(), 2u);
  std::set<std::string> workers;
  std::set<std::string> aggregation_switches;
  for (const Json& w : c["workers"]) {
    workers.insert(w["worker"].get<std::string>());
    EXPECT_EQ(w["ps"], "h1_0");
    std::string node = w["aggregation_node"].get<std::string>();
    if (topology_.FindSwitch(node)) aggregation_switches.insert(node);
  }
  EXPECT_EQ(workers, (std::set<std::string>{"h0_0", "h0_1"}));
  // INA is used (leaves are INA-capable): a region on each aggregating switch, a result group.
  ASSERT_FALSE(aggregation_switches.empty());
  std::set<std::string> region_switches;
  for (const Json& region : c["aggregator_regions"]) {
    region_switches.insert(region["switch"].get<std::string>());
    EXPECT_GT(region["aggregator_count"].get<int64_t>(), 0);
    EXPECT_EQ(region["tag"], ps["tag"]);
  }
  EXPECT_EQ(region_switches, aggregation_switches);
  EXPECT_GT(ps["multicast_group"].get<int64_t>(), 0);
  EXPECT_GT(c["rate_gbps"].get<double>(), 0);
}

TEST_F(ControllerApiTest, CompletionAndCancellationFreeTheJobsEntries) {
  int64_t a = server_.Submit(SmallLeafSpineJob("a", "vision", 100));
  int64_t b = server_.Submit(SmallLeafSpineJob("b", "vision", 100));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(a), "running");
  ASSERT_EQ(server_.JobState(b), "running");
  int64_t both = TotalEntities();
  ASSERT_GT(both, 0);

  Reply half = server_.Call("POST", Job(a, "/progress"), R"({"iterations_done": 50, "loss": 0.7})");
  ASSERT_EQ(half.status, 200) << half;
  EXPECT_EQ(half.json["state"], "running");
  EXPECT_EQ(half.json["iterations_done"], 50);
  EXPECT_DOUBLE_EQ(half.json["loss"].get<double>(), 0.7);
  Reply back = server_.Call("POST", Job(a, "/progress"), R"({"iterations_done": 40})");
  EXPECT_EQ(back.status, 400) << back;
  EXPECT_EQ(back.field(), "iterations_done");

  Reply done = server_.Call("POST", Job(a, "/progress"), R"({"iterations_done": 100})");
  ASSERT_EQ(done.status, 200) << done;
  EXPECT_EQ(done.json["state"], "completed");
  ASSERT_TRUE(server_.Sync().ok());
  int64_t one = TotalEntities();
  EXPECT_LT(one, both);
  EXPECT_GT(one, 0);
  Reply plan = server_.Get("/api/v1/plan");
  ASSERT_EQ(plan.json["jobs"].size(), 1u);
  EXPECT_EQ(plan.json["jobs"][0]["job_id"], b);
  ExpectSwitchesEqualStoredIntents();

  Reply cancelled = server_.Call("DELETE", Job(b));
  ASSERT_EQ(cancelled.status, 200) << cancelled;
  EXPECT_EQ(cancelled.json["state"], "cancelled");
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(TotalEntities(), 0);
  ExpectSwitchesEqualStoredIntents();
  Reply switches = server_.Get("/api/v1/switches");
  for (const Json& s : switches.json["switches"]) {
    EXPECT_EQ(s["aggregators"]["used"], 0) << s.dump();
    EXPECT_EQ(s["entries"], 0) << s.dump();
  }
  // Config of a finished job: no plan entry any more.
  Reply config = server_.Get(Job(a, "/config"));
  ASSERT_EQ(config.status, 200);
  EXPECT_EQ(config.json["state"], "completed");
  EXPECT_TRUE(config.json["aggregator_regions"].empty());
}

TEST_F(ControllerApiTest, ProgressReRanksEsaPrioritiesInTheSwitches) {
  // Two identical jobs tie. When one reports most of its iterations done it has the least
  // remaining work: the next pass saves a plan version with the same routes and the new order,
  // and the switches get it.
  const int64_t a = server_.Submit(SmallLeafSpineJob("a", "vision", 1000));
  const int64_t b = server_.Submit(SmallLeafSpineJob("b", "vision", 1000));
  ASSERT_TRUE(server_.Sync().ok());
  auto priority = [&](int64_t id) {
    Reply r = server_.Get(Job(id, "/config"));
    return r.status == 200 ? r.json["dataplane_priority"].get<int>() : -1;
  };
  EXPECT_EQ(priority(a), priority(b));
  // `priority` stays what was submitted; the data-plane one is derived from it.
  EXPECT_EQ(server_.Get(Job(a, "/config")).json["priority"], 0);
  const int64_t v0 = PlanVersion();
  const Json plan0 = server_.Get("/api/v1/plan").json;
  ASSERT_EQ(server_.Call("POST", Job(b, "/progress"), R"({"iterations_done": 950})").status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(PlanVersion(), v0 + 1);
  EXPECT_GT(priority(b), priority(a));
  const Json plan1 = server_.Get("/api/v1/plan").json;
  EXPECT_EQ(PlanHops(plan1), PlanHops(plan0));  // routes kept
  ExpectSwitchesEqualStoredIntents();
  Reply events = server_.Get("/api/v1/events?kind=plan_saved");
  ASSERT_EQ(events.status, 200);
  EXPECT_TRUE(absl::StrContains(events.json["events"].back()["message"].get<std::string>(),
                                "priorities refreshed"))
      << events.json.dump();
  // A little more progress on a that does not change the order: no new version.
  ASSERT_EQ(server_.Call("POST", Job(a, "/progress"), R"({"iterations_done": 1})").status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(PlanVersion(), v0 + 1);
  Reply metrics = server_.Get("/api/v1/metrics");
  EXPECT_TRUE(absl::StrContains(metrics.body, "inac_priority_refreshes_total 1")) << metrics.body;
}

TEST_F(ControllerApiTest, PutTopologyReplansAndFailsJobsWhoseHostsLeft) {
  int64_t id = server_.Submit(SmallLeafSpineJob("t"));
  ASSERT_TRUE(server_.Sync().ok());
  int64_t v1 = PlanVersion();
  Reply before = server_.Get("/api/v1/plan");

  // Same shape, slower links: a new topology version, so a new plan.
  core::Topology slower = topology_;
  for (auto& link : slower.links) link.gbps = 25;
  Reply put = server_.Call("PUT", "/api/v1/topology", core::TopologyToJson(slower).dump());
  ASSERT_EQ(put.status, 200) << put;
  EXPECT_EQ(put.json["version"], 2);
  ASSERT_TRUE(server_.Sync().ok());
  Reply after = server_.Get("/api/v1/plan");
  EXPECT_GT(after.json["version"].get<int64_t>(), v1);
  EXPECT_NE(after.json["fingerprint"], before.json["fingerprint"]);
  EXPECT_EQ(server_.JobState(id), "running");
  Reply topo = server_.Get("/api/v1/topology");
  EXPECT_EQ(topo.headers.find("X-Topology-Version")->second, "2");
  EXPECT_EQ(topo.json["links"][0]["gbps"], 25);

  // The job's PS host leaves the topology: the job fails, its entries go.
  core::Topology without = topology_;
  std::erase_if(without.hosts, [](const core::Host& h) { return h.id == "h1_0"; });
  std::erase_if(without.links, [](const core::Link& l) { return l.a == "h1_0" || l.b == "h1_0"; });
  ASSERT_EQ(server_.PutTopology(without), 200);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(server_.JobState(id), "failed");
  Reply failed = server_.Get(Job(id));
  EXPECT_TRUE(absl::StrContains(failed.json["failure_reason"].get<std::string>(), "h1_0"));
  EXPECT_EQ(TotalEntities(), 0);
}

TEST_F(ControllerApiTest, LinkDownReplansAroundIt) {
  int64_t id = server_.Submit(SmallLeafSpineJob("l"));
  ASSERT_TRUE(server_.Sync().ok());
  Reply plan = server_.Get("/api/v1/plan");
  auto hops = PlanHops(plan.json);
  // A leaf-spine link the job uses (workers on lf0, PS on lf1: one spine carries it).
  std::string spine;
  for (const char* sp : {"sp0", "sp1"}) {
    if (hops.count({"lf0", sp}) || hops.count({"lf1", sp})) spine = sp;
  }
  ASSERT_FALSE(spine.empty()) << plan.body;
  const core::Link* link = topology_.FindLink(core::DefaultLinkId("lf0", spine));
  if (!link) link = topology_.FindLink(core::DefaultLinkId(spine, "lf0"));
  ASSERT_NE(link, nullptr);
  ASSERT_GT(server_.fabric().Get(spine)->entity_count(), 0);

  Reply down = server_.Call("PATCH", "/api/v1/links/" + link->id, R"({"status": "down"})");
  ASSERT_EQ(down.status, 200) << down;
  EXPECT_EQ(down.json["status"], "down");
  EXPECT_EQ(down.json["id"], link->id);
  ASSERT_TRUE(server_.Sync().ok());

  Reply replanned = server_.Get("/api/v1/plan");
  EXPECT_GT(replanned.json["version"], plan.json["version"]);
  auto new_hops = PlanHops(replanned.json);
  EXPECT_FALSE(new_hops.count({std::min(link->a, link->b), std::max(link->a, link->b)}))
      << replanned.body;
  EXPECT_FALSE(new_hops.empty());
  // The spine that lost its link to lf0 carries nothing of the job any more.
  EXPECT_EQ(server_.fabric().Get(spine)->entity_count(), 0);
  EXPECT_EQ(server_.JobState(id), "running");
  ExpectSwitchesEqualStoredIntents();
  Reply links = server_.Get("/api/v1/links");
  int down_links = 0;
  for (const Json& l : links.json["links"]) down_links += l["status"] == "down";
  EXPECT_EQ(down_links, 1);
  Reply events = server_.Get("/api/v1/events?kind=link_down");
  EXPECT_EQ(events.json["events"].size(), 1u);

  // Setting it down again changes nothing; up again re-plans.
  int64_t v = replanned.json["version"].get<int64_t>();
  ASSERT_EQ(server_.Call("PATCH", "/api/v1/links/" + link->id, R"({"status": "down"})").status,
            200);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(PlanVersion(), v);
  ASSERT_EQ(server_.Call("PATCH", "/api/v1/links/" + link->id, R"({"status": "up"})").status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_GT(PlanVersion(), v);
}

TEST_F(ControllerApiTest, PreviewPlansWithoutAdmitting) {
  int64_t id = server_.Submit(SmallLeafSpineJob("existing"));
  ASSERT_TRUE(server_.Sync().ok());
  int64_t version = PlanVersion();
  Reply events_before = server_.Get("/api/v1/events");
  Reply preview = server_.Call("POST", "/api/v1/plan/preview", SmallLeafSpineJob("what-if").dump(),
                               kOperatorToken);
  ASSERT_EQ(preview.status, 200) << preview;
  std::set<int64_t> planned;
  for (const Json& j : preview.json["jobs"]) planned.insert(j["job_id"].get<int64_t>());
  EXPECT_EQ(planned, (std::set<int64_t>{0, id}));  // the candidate is job 0
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(PlanVersion(), version);
  Reply jobs = server_.Get("/api/v1/jobs");
  EXPECT_EQ(jobs.json["jobs"].size(), 1u);
  Reply events_after = server_.Get("/api/v1/events");
  EXPECT_EQ(events_after.json["last_seq"], events_before.json["last_seq"]);
}

TEST_F(ControllerApiTest, EventsSinceAndServerSentEvents) {
  Reply all = server_.Get("/api/v1/events?since=0");
  ASSERT_EQ(all.status, 200);
  int64_t last = all.json["last_seq"].get<int64_t>();
  ASSERT_GT(last, 0);  // topology_changed, controller_started, ...
  Reply none = server_.Get(absl::StrCat("/api/v1/events?since=", last));
  EXPECT_TRUE(none.json["events"].empty());
  EXPECT_EQ(none.json["last_seq"], last);
  Reply two = server_.Get("/api/v1/events?since=0&limit=2");
  EXPECT_EQ(two.json["events"].size(), 2u);

  // A stream opened now sees the job submitted after it.
  std::atomic<bool> connected{false}, finished{false};
  std::string received;
  int keepalives = 0;
  std::thread reader([&] {
    (void)server_.Client(kViewerToken)
        ->Stream(
            {.target = absl::StrCat("/api/v1/events/stream?since=", last)},
            [&](const northbound::RawReply& r) {
              EXPECT_EQ(r.http_status, 200);
              auto type = r.headers.find("Content-Type");
              EXPECT_TRUE(type != r.headers.end() &&
                          absl::StartsWith(type->second, "text/event-stream"));
              connected = true;
              return true;
            },
            [&](std::string_view data) {
              received.append(data);
              if (data.starts_with(": keep-alive")) ++keepalives;
              // Stop once the job's scheduling arrived, or after ~60 idle keep-alives (a bound).
              return !absl::StrContains(received, "event: job_scheduled") && keepalives < 60;
            });
    finished = true;
  });
  while (!connected && !finished) std::this_thread::yield();
  int64_t id = server_.Submit(SmallLeafSpineJob("streamed"));
  ASSERT_TRUE(server_.Sync().ok());
  reader.join();
  EXPECT_TRUE(absl::StrContains(received, "event: job_submitted")) << received;
  ASSERT_TRUE(absl::StrContains(received, "event: job_scheduled")) << received;
  // Each event: "id: SEQ", "event: KIND", "data: {json}", ids increasing and after `last`.
  int64_t prev = last;
  bool saw_job = false;
  for (absl::string_view block : absl::StrSplit(received, "\n\n", absl::SkipEmpty())) {
    if (absl::StartsWith(block, ":")) continue;
    std::vector<absl::string_view> lines = absl::StrSplit(block, '\n');
    ASSERT_EQ(lines.size(), 3u) << block;
    int64_t seq = 0;
    ASSERT_TRUE(absl::StartsWith(lines[0], "id: "));
    ASSERT_TRUE(absl::SimpleAtoi(lines[0].substr(4), &seq));
    EXPECT_GT(seq, prev);
    prev = seq;
    ASSERT_TRUE(absl::StartsWith(lines[2], "data: "));
    Json data = Json::parse(lines[2].substr(6), nullptr, false);
    ASSERT_TRUE(data.is_object()) << lines[2];
    EXPECT_EQ(data["seq"], seq);
    if (data.contains("job_id") && data["job_id"] == id) saw_job = true;
  }
  EXPECT_TRUE(saw_job);

  // Resuming with Last-Event-ID replays from there.
  std::string replay;
  (void)server_.Client(kViewerToken)
      ->Stream(
          {.target = "/api/v1/events/stream", .headers = {{"Last-Event-ID", std::to_string(last)}}},
          nullptr, [&](std::string_view data) {
            replay.append(data);
            return !absl::StrContains(replay, "event: job_scheduled") && replay.size() < (1 << 20);
          });
  EXPECT_TRUE(absl::StrContains(replay, absl::StrCat("id: ", last + 1, "\n"))) << replay;
}

TEST_F(ControllerApiTest, EventStreamsCannotTakeEveryServerThread) {
  // The test server has 8 threads: at most 4 streams at once.
  std::atomic<bool> stop{false};
  std::atomic<int> open{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      (void)server_.Client(kViewerToken)
          ->Stream(
              {.target = "/api/v1/events/stream"},
              [&](const northbound::RawReply& r) {
                EXPECT_EQ(r.http_status, 200);
                ++open;
                return true;
              },
              [&](std::string_view) { return !stop.load(); });
    });
  }
  while (open < 4) std::this_thread::yield();
  // One more stream, hung up at its first chunk (so that without the limit this fails rather
  // than streams forever).
  auto one_more = [&] {
    Reply r;
    (void)server_.Client(kViewerToken)
        ->Stream(
            {.target = "/api/v1/events/stream"},
            [&](const northbound::RawReply& head) {
              r.status = head.http_status;
              return true;
            },
            [&](std::string_view data) {
              r.body.append(data);
              return r.status != 200;  // an error body is read whole; a stream is dropped
            });
    r.json = Json::parse(r.body, nullptr, false);
    return r;
  };
  Reply refused = one_more();
  EXPECT_EQ(refused.status, 503) << refused;
  EXPECT_EQ(refused.code(), "unavailable");
  EXPECT_EQ(server_.Get("/api/v1/jobs").status, 200);  // the API still answers
  stop = true;
  for (auto& t : readers) t.join();
  // Once the server noticed the hang-ups (at its next keep-alive write) streams are accepted
  // again. Bounded wait: at most 200 attempts.
  int status = 0;
  for (int attempt = 0; attempt < 200 && status != 200; ++attempt) {
    status = one_more().status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
}

// Parses Prometheus text format: every sample's family has a TYPE line before it, every value
// is a number. Returns samples by their full name with labels.
std::map<std::string, double> ParsePrometheus(const std::string& text) {
  std::map<std::string, double> samples;
  std::set<std::string> typed;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (absl::StartsWith(line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      EXPECT_EQ(parts.size(), 4u) << line;
      if (parts.size() < 4) continue;
      EXPECT_TRUE(parts[3] == "gauge" || parts[3] == "counter" || parts[3] == "summary" ||
                  parts[3] == "histogram")
          << line;
      EXPECT_TRUE(typed.insert(parts[2]).second) << "TYPE twice: " << line;
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    auto space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space == std::string::npos) continue;
    std::string name = line.substr(0, space);
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(space + 1), &value)) << line;
    std::string family = name.substr(0, name.find('{'));
    bool known = typed.count(family) > 0;
    for (const char* suffix : {"_sum", "_count", "_bucket"}) {
      if (absl::EndsWith(family, suffix)) {
        known |= typed.count(family.substr(0, family.size() - strlen(suffix))) > 0;
      }
    }
    EXPECT_TRUE(known) << "no TYPE before " << line;
    samples[name] = value;
  }
  return samples;
}

TEST_F(ControllerApiTest, HealthReadinessAndMetrics) {
  EXPECT_EQ(server_.Get("/api/v1/healthz", "").status, 200);
  int64_t id = server_.Submit(SmallLeafSpineJob("m"));
  ASSERT_GT(server_.Submit(SmallLeafSpineJob("second", "nlp")), 0);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.Call("DELETE", Job(id)).status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  Reply ready = server_.Get("/api/v1/readyz", "");
  EXPECT_EQ(ready.status, 200) << ready;

  Reply metrics = server_.Get("/api/v1/metrics", kViewerToken);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_TRUE(absl::StartsWith(metrics.headers.find("Content-Type")->second, "text/plain"));
  auto m = ParsePrometheus(metrics.body);
  EXPECT_EQ(m["inac_jobs{state=\"running\"}"], 1) << metrics.body;
  EXPECT_EQ(m["inac_jobs{state=\"cancelled\"}"], 1);
  EXPECT_EQ(m["inac_jobs{state=\"pending\"}"], 0);
  EXPECT_EQ(m.count("inac_jobs{state=\"failed\"}"), 1u);
  // Plan latency, southbound write latency, writes and errors.
  EXPECT_GE(m["inac_plan_duration_seconds_count"], 1);
  EXPECT_GT(m["inac_plan_duration_seconds_sum"], 0);
  EXPECT_GE(m["inac_southbound_reconcile_duration_seconds_count"], 4);
  EXPECT_EQ(m.count("inac_southbound_reconcile_duration_seconds_sum"), 1u);
  EXPECT_GT(m["inac_southbound_writes_total"], 0);
  EXPECT_EQ(m["inac_southbound_errors_total"], 0);
  // Per switch: connection, primary, sync, aggregator utilisation (leaves are INA-capable).
  for (const auto& sw : topology_.switches) {
    std::string label = absl::StrCat("{switch=\"", sw.id, "\"}");
    EXPECT_EQ(m["inac_switch_connected" + label], 1) << sw.id;
    EXPECT_EQ(m["inac_switch_primary" + label], 1) << sw.id;
  }
  EXPECT_GT(m["inac_switch_aggregator_utilisation{switch=\"lf0\"}"] +
                m["inac_switch_aggregator_utilisation{switch=\"lf1\"}"],
            0);
  EXPECT_LE(m["inac_switch_aggregator_utilisation{switch=\"lf0\"}"], 1);

  // A switch that refuses updates shows up as errors and out of sync.
  server_.fabric().Get("lf1")->SetReachable(false);
  ASSERT_TRUE(server_.Sync().ok());
  auto after = ParsePrometheus(server_.Get("/api/v1/metrics").body);
  EXPECT_EQ(after["inac_switch_connected{switch=\"lf1\"}"], 0);
  EXPECT_EQ(after["inac_switch_in_sync{switch=\"lf1\"}"], 0);
  EXPECT_GE(after["inac_southbound_errors_total"], 1);
  EXPECT_EQ(server_.Get("/api/v1/readyz", "").status, 503);
}

TEST_F(ControllerApiTest, SwitchRestartIsRepairedInOnePass) {
  int64_t id = server_.Submit(SmallLeafSpineJob("r"));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(id), "running");
  auto lf0 = server_.fabric().Get("lf0");
  int64_t held = lf0->entity_count();
  ASSERT_GT(held, 0);
  lf0->Restart();  // pipeline and entries lost, session dropped
  ASSERT_EQ(lf0->entity_count(), 0);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(lf0->entity_count(), held);
  EXPECT_EQ(lf0->pipeline_pushes(), 2);
  ExpectSwitchesEqualStoredIntents();
  Reply sw = server_.Get("/api/v1/switches/lf0");
  EXPECT_TRUE(sw.json["in_sync"].get<bool>()) << sw.body;
}

TEST_F(ControllerApiTest, RestartKeepsThePlanAndReconvergesTheSwitches) {
  int64_t a = server_.Submit(SmallLeafSpineJob("a"));
  int64_t b = server_.Submit(SmallLeafSpineJob("b", "nlp"));
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(b), "running");
  Reply plan = server_.Get("/api/v1/plan");
  uint64_t election = server_.fabric().election_id("lf0");
  ASSERT_GT(election, 0u);

  server_.Stop();
  // While the controller is down, both leaves restart empty.
  server_.fabric().Get("lf0")->Restart();
  server_.fabric().Get("lf1")->Restart();
  ASSERT_TRUE(server_.Start().ok());
  ASSERT_TRUE(server_.Sync().ok());

  Reply replan = server_.Get("/api/v1/plan");
  EXPECT_EQ(replan.json["version"], plan.json["version"]);  // nothing changed: no re-plan
  EXPECT_EQ(replan.json["fingerprint"], plan.json["fingerprint"]);
  auto metrics = ParsePrometheus(server_.Get("/api/v1/metrics").body);
  EXPECT_EQ(metrics["inac_plan_duration_seconds_count"], 0);
  for (const auto& sw : topology_.switches) {
    EXPECT_GT(server_.fabric().election_id(sw.id), election) << sw.id;  // wins arbitration
  }
  ExpectSwitchesEqualStoredIntents();
  EXPECT_EQ(server_.JobState(a), "running");
  EXPECT_EQ(server_.JobState(b), "running");
  Reply switches = server_.Get("/api/v1/switches");
  for (const Json& s : switches.json["switches"]) {
    EXPECT_TRUE(s["in_sync"].get<bool>()) << s.dump();
    EXPECT_EQ(s["election_id"].get<uint64_t>(),
              server_.fabric().election_id(s["id"].get<std::string>()));
  }

  // A change after the restart re-plans as usual.
  ASSERT_EQ(server_.Call("DELETE", Job(a)).status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_GT(server_.Get("/api/v1/plan").json["version"], plan.json["version"]);
}

}  // namespace
}  // namespace inac::server::testing

namespace inac::server::testing {
namespace {

// GET /jobs is bounded in bytes as well as in jobs: jobs stored before the
// input limits existed (here: written to the store directly, bypassing validation) with 700 KB
// specs make a 1,000-job page stop at 4 MiB, and following next_after still returns every job
// exactly once.
TEST(JobPageBytesTest, APageStopsAtItsByteLimitAndTheCursorResumes) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  std::vector<core::Problem> problems;
  core::JobSpec spec = core::JobSpecFromJson(SmallLeafSpineJob("big"), "", &problems);
  ASSERT_TRUE(problems.empty());
  spec.name = std::string(700 * 1000, 'n');
  std::set<int64_t> stored;
  for (int i = 0; i < 12; ++i) {
    auto created = server.storage().jobs().Create(spec, 1000 + i);
    ASSERT_TRUE(created.ok()) << created.status();
    stored.insert(created->job.id);
  }
  std::set<int64_t> seen;
  int64_t after = 0;
  int pages = 0;
  while (true) {
    Reply r = server.Get(absl::StrCat("/api/v1/jobs?limit=1000&after=", after));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_LE(r.body.size(), 4u << 20);
    ASSERT_FALSE(r.json["jobs"].empty());
    for (const auto& job : r.json["jobs"]) {
      EXPECT_TRUE(seen.insert(job["id"].get<int64_t>()).second) << "job sent twice";
    }
    ++pages;
    if (r.json["next_after"].is_null()) break;
    after = r.json["next_after"].get<int64_t>();
    EXPECT_EQ(after, r.json["jobs"].back()["id"].get<int64_t>());
    ASSERT_LT(pages, 20);
  }
  EXPECT_EQ(seen, stored);
  EXPECT_GE(pages, 3);  // 12 x 700 KB in pages of at most 4 MiB
}

}  // namespace
}  // namespace inac::server::testing
