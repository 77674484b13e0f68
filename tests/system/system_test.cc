// System tests: the real `inac serve` controller and `inac switch`
// emulated switches of this build as separate processes on loopback, driven over REST and read
// back over P4Runtime. Each test builds its own fabric (leaf-spine, 4 leaves x 2 spines, 4 hosts
// per leaf: 6 switch processes) in its own temporary directory; logs of every process stay there
// and their tails are printed when an assertion fails.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

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

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "storage/sqlite_storage.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

// The controller's settings for the tests: a short timer so that waits for a periodic pass stay
// short (the test bounds are far above it). `timer_ms` 0 keeps the product's default (2 s).
Json TestConfig(uint64_t election_id = 0, int timer_ms = 500) {
  Json config = Json::object();
  if (timer_ms) config["timer_ms"] = timer_ms;
  if (election_id) config["election_id"] = election_id;
  return config;
}

std::string Host(int index) { return absl::StrCat("h", index / 4, "_", index % 4); }

// Job i of a deterministic mix on the 16 hosts: two workers and one PS, on two or three leaves.
Json MixJob(int i, const std::string& prefix = "job-") {
  return LongRunningJob(absl::StrCat(prefix, i), {Host(i % 16), Host((i + 5) % 16)},
                        {Host((i + 10) % 16)}, i % 3);
}

class SystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(InacBinary(), X_OK) != 0) GTEST_SKIP() << "inac binary not built";
    dir_ = MakeTempDir("system");
    ASSERT_FALSE(dir_.empty());
    topology_ = LeafSpine(4, 2, 4);
    ASSERT_TRUE(fabric_.Start(&topology_, dir_).ok());
  }

  // Logs and databases stay for a failed test (its directory is named in the output).
  void TearDown() override {
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::printf("[ info ] logs and databases kept in %s\n", dir_.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  // Starts controller `name` on `db` and loads the fabric's topology into it.
  void StartController(ControllerProcess& controller, const std::string& name,
                       const std::string& db, const Json& config, bool put_topology = true) {
    absl::Status s = controller.Start(dir_, name, db, config);
    ASSERT_TRUE(s.ok()) << s;
    if (!put_topology) return;
    Rest rest(controller.host_port());
    Response r = rest.Put("/topology", core::TopologyToJson(topology_));
    ASSERT_EQ(r.status, 200) << r.text;
  }

  std::string Logs(ControllerProcess& c) {
    return c.process() ? LogTail(c.process()->log_path(), 6000) : "";
  }

  std::string dir_;
  core::Topology topology_;
  EmulatedFabric fabric_;
  SwitchReader reader_;
};

// kill -9 of the controller in the middle of 200 concurrent job submissions (8 client threads,
// every request with its own Idempotency-Key). After a restart on the same database: every job
// that got a 201 exists, retrying every submission with its key creates no duplicate (exactly one
// job per key), and the switches hold exactly the stored intents (read back over P4Runtime) with
// no duplicate or stray entry.
TEST_F(SystemTest, ControllerKilledDuringConcurrentSubmissionsRecovers) {
  const std::string db = dir_ + "/inac.db";
  ControllerProcess first;
  ASSERT_NO_FATAL_FAILURE(StartController(first, "controller-1", db, TestConfig()));

  constexpr int kJobs = 200;
  constexpr int kThreads = 8;
  constexpr int kKillAfter = 60;  // 201s seen before the kill
  std::mutex mu;
  std::map<int, int64_t> acked;  // submission index -> job id, for every 201
  std::atomic<int> next{0}, created{0}, unanswered{0};
  auto submit = [&](const std::string& host_port, std::map<int, Response>* results) {
    Rest rest(host_port, absl::Seconds(30));
    while (true) {
      int i = next++;
      if (i >= kJobs) return;
      Response r = rest.Post("/jobs", MixJob(i), {{"Idempotency-Key", absl::StrCat("key-", i)}});
      std::lock_guard<std::mutex> lock(mu);
      if (results) {
        (*results)[i] = r;
        continue;
      }
      if (r.status == 201) {
        acked[i] = r.body["id"].get<int64_t>();
        created++;
      } else if (r.status == 0) {
        unanswered++;
      }
    }
  };
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&] { submit(first.host_port(), nullptr); });
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (created < kKillAfter && next < kJobs && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  first.Kill9();
  for (auto& t : clients) t.join();
  int acked_before = static_cast<int>(acked.size());
  ASSERT_GE(acked_before, kKillAfter) << Logs(first);
  ASSERT_LT(acked_before, kJobs) << "the kill came after the last submission";
  std::printf("[ info ] %d submissions acknowledged (201) before the kill, %d unanswered\n",
              acked_before, unanswered.load());

  ControllerProcess second;
  ASSERT_NO_FATAL_FAILURE(StartController(second, "controller-2", db, TestConfig(), false));
  Rest rest(second.host_port());

  // Every acknowledged job survived, with its spec.
  for (const auto& [i, id] : acked) {
    Response r = rest.Get(absl::StrCat("/jobs/", id));
    ASSERT_EQ(r.status, 200) << "job " << id << " (submission " << i << ") lost: " << r.text;
    EXPECT_EQ(r.body["spec"]["name"], absl::StrCat("job-", i));
  }

  // Retry every submission with its key: acknowledged ones answer 200 with the same job; the
  // rest are created now (201) or were committed before the kill without an answer (200).
  std::map<int, Response> retries;
  next = 0;
  clients.clear();
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&] { submit(second.host_port(), &retries); });
  }
  for (auto& t : clients) t.join();
  std::map<int, int64_t> id_of;
  for (int i = 0; i < kJobs; ++i) {
    const Response& r = retries[i];
    ASSERT_TRUE(r.status == 200 || r.status == 201) << i << ": " << r.status << " " << r.text;
    id_of[i] = r.body["id"].get<int64_t>();
  }
  for (const auto& [i, id] : acked) {
    EXPECT_EQ(retries[i].status, 200) << "acknowledged submission " << i << " created again";
    EXPECT_EQ(id_of[i], id) << "submission " << i << " answered with another job";
  }

  // Exactly one job per key: 200 jobs, names unique and complete.
  std::vector<Json> jobs = AllJobs(rest);
  std::set<std::string> names;
  std::set<int64_t> ids;
  for (const Json& j : jobs) {
    names.insert(j["spec"]["name"].get<std::string>());
    ids.insert(j["id"].get<int64_t>());
  }
  EXPECT_EQ(jobs.size(), size_t{kJobs});
  EXPECT_EQ(names.size(), size_t{kJobs});
  for (const auto& [i, id] : id_of) EXPECT_TRUE(ids.count(id)) << "job " << id << " not listed";

  // The switches converge on the plan of the 200 jobs; the read-back is compared with intents
  // derived from GET /plan + GET /topology inside AwaitConverged.
  // A plan converged on before the last retries were planned does not count: wait for the one
  // that holds all 200 jobs.
  auto view = AwaitConverged(rest, reader_, absl::Seconds(90), kJobs);
  ASSERT_TRUE(view.ok()) << view.status() << "\n" << Logs(second);
  ASSERT_EQ(view->plan.jobs.size(), size_t{kJobs});
  int64_t entries = 0;
  for (const auto& [id, intent] : IntentsBySwitch(view->topology, view->plan)) {
    entries += intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
               intent.multicast_groups.size() + intent.host_ports.size();
  }
  EXPECT_GT(entries, kJobs) << "the plan programs (almost) nothing: the comparison proves little";
  std::printf("[ info ] plan %lld: %zu jobs, %lld entries on %zu switches\n",
              static_cast<long long>(view->plan.version), view->plan.jobs.size(),
              static_cast<long long>(entries), view->topology.switches.size());

  // Stop the controller and compare the switches with the intents it stored.
  EXPECT_EQ(second.Terminate(), 0) << Logs(second);
  auto storage = storage::SqliteStorage::Open(db);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto latest = (*storage)->plans().Latest();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->plan.version, view->plan.version);
  auto stored = (*storage)->plans().Intents((*latest)->plan.version);
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::map<std::string, core::SwitchIntent> stored_by_switch;
  for (const auto& intent : *stored) stored_by_switch[intent.switch_id] = intent;
  EXPECT_EQ(CompareFabric(view->topology, stored_by_switch, reader_), "");
  auto page = (*storage)->jobs().List(core::JobFilter{{}, {}, 0, 1000});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), size_t{kJobs});
}

// Submits `count` jobs of MixJob (names prefix + i) and expects 201 for each.
void SubmitMix(Rest& rest, int count, const std::string& prefix = "job-") {
  for (int i = 0; i < count; ++i) {
    Response r = rest.Post("/jobs", MixJob(i, prefix));
    ASSERT_EQ(r.status, 201) << r.text;
  }
}

// P4Runtime entities of `intent`: each aggregation is an ina_job and an ina_live entry.
int64_t EntryCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// An emulated switch is killed (SIGKILL) and restarted empty on the same port: the controller
// notices, pushes the pipeline again and re-inserts the switch's entries. The bound is
// 5 s, with the controller's default settings (2 s timer); the content read back must
// equal the switch's intent.
TEST_F(SystemTest, RestartedSwitchGetsItsIntentBackWithinFiveSeconds) {
  ControllerProcess controller;
  ASSERT_NO_FATAL_FAILURE(
      StartController(controller, "controller", dir_ + "/inac.db", TestConfig(0, 0)));
  Rest rest(controller.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest, 12));
  auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 12);
  ASSERT_TRUE(view.ok()) << view.status() << "\n" << Logs(controller);
  auto intents = IntentsBySwitch(view->topology, view->plan);

  // The switch with the most entries.
  std::string victim;
  for (const auto& [id, intent] : intents) {
    if (victim.empty() || EntryCount(intent) > EntryCount(intents[victim])) victim = id;
  }
  ASSERT_GT(EntryCount(intents[victim]), 0);
  const core::Switch* sw = view->topology.FindSwitch(victim);
  ASSERT_TRUE(sw && sw->p4runtime);
  auto expected = reader_.Expected(intents[victim]);
  ASSERT_TRUE(expected.ok());
  Response before = rest.Get("/switches/" + victim);
  ASSERT_EQ(before.status, 200);
  int64_t pushes_before = before.body["pipeline_pushes"].get<int64_t>();

  ASSERT_TRUE(fabric_.KillAndRestart(victim).ok());
  auto restarted = std::chrono::steady_clock::now();
  // The new process is empty (no pipeline: the read fails or returns nothing).
  auto empty = reader_.Read(sw->p4runtime->address, sw->p4runtime->device_id);
  EXPECT_TRUE(!empty.ok() || empty->entities.empty());

  std::string last;
  bool restored = false;
  // A bound, not a target: the figure is printed (the restore benchmark is interop_bench).
  while (std::chrono::steady_clock::now() - restarted < std::chrono::seconds(30)) {
    auto actual = reader_.Read(sw->p4runtime->address, sw->p4runtime->device_id);
    last = actual.ok() ? SwitchReader::Diff(*expected, *actual) : actual.status().ToString();
    if (last.empty()) {
      restored = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  ASSERT_TRUE(restored) << victim << " not restored within 30 s: " << last << "\n"
                        << Logs(controller);
  std::printf("[ info ] %s restored (%lld entries) %.2f s after its restart\n", victim.c_str(),
              static_cast<long long>(EntryCount(intents[victim])), seconds);
  // It was a real re-push (pipeline included), and the plan did not change for it.
  Response after = rest.Get("/switches/" + victim);
  ASSERT_EQ(after.status, 200);
  EXPECT_GT(after.body["pipeline_pushes"].get<int64_t>(), pushes_before);
  auto now_view = FetchView(rest);
  ASSERT_TRUE(now_view);
  EXPECT_EQ(now_view->plan.version, view->plan.version) << "a switch restart must not re-plan";
  EXPECT_EQ(CompareFabric(view->topology, intents, reader_), "");
}

// Ports of `link` at its switch ends: switch id -> port.
std::map<std::string, uint32_t> LinkPorts(const core::Topology& topology, const std::string& id) {
  std::map<std::string, uint32_t> ports;
  for (size_t i = 0; i < topology.links.size(); ++i) {
    const core::Link& l = topology.links[i];
    if (l.id != id) continue;
    for (const std::string& end : {l.a, l.b}) {
      if (topology.FindSwitch(end)) ports[end] = core::PortOf(topology, end, static_cast<int>(i));
    }
  }
  return ports;
}

// Entries of `intents` that send traffic over the link: a route whose egress port, or a
// multicast group with a replica, is the link's port on that switch.
int64_t References(const std::map<std::string, core::SwitchIntent>& intents,
                   const std::map<std::string, uint32_t>& ports) {
  int64_t refs = 0;
  for (const auto& [sw, port] : ports) {
    auto it = intents.find(sw);
    if (it == intents.end()) continue;
    for (const core::RouteIntent& r : it->second.routes) refs += r.egress_port == port;
    for (const core::MulticastGroupIntent& g : it->second.multicast_groups) {
      for (uint32_t p : g.egress_ports) refs += p == port;
    }
  }
  return refs;
}

// Paths of `plan` (worker flows and aggregated streams) that traverse the link a-b.
int64_t PathsOver(const core::Plan& plan, const core::Link& link) {
  auto over = [&](const std::vector<std::string>& path) {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      if ((path[i] == link.a && path[i + 1] == link.b) ||
          (path[i] == link.b && path[i + 1] == link.a)) {
        return true;
      }
    }
    return false;
  };
  int64_t n = 0;
  for (const core::JobPlan& jp : plan.jobs) {
    for (const core::FlowPlan& f : jp.flows) n += over(f.path);
    for (const core::AggregatorPlan& a : jp.aggregator_paths) n += over(a.path);
  }
  return n;
}

// A link is set down: the jobs using it are re-planned around it and no switch holds an entry
// that forwards or replicates over it (read back from the emulators).
TEST_F(SystemTest, LinkDownReplansAndSwitchesStopUsingIt) {
  ControllerProcess controller;
  ASSERT_NO_FATAL_FAILURE(
      StartController(controller, "controller", dir_ + "/inac.db", TestConfig()));
  Rest rest(controller.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest, 8));
  auto view = AwaitConverged(rest, reader_, absl::Seconds(60), 8);
  ASSERT_TRUE(view.ok()) << view.status() << "\n" << Logs(controller);

  // The switch-to-switch link the plan uses most.
  const core::Link* victim = nullptr;
  int64_t most = 0;
  for (const core::Link& l : view->topology.links) {
    if (!view->topology.FindSwitch(l.a) || !view->topology.FindSwitch(l.b)) continue;
    int64_t n = PathsOver(view->plan, l);
    if (n > most) {
      most = n;
      victim = &l;
    }
  }
  ASSERT_NE(victim, nullptr) << "no job crosses a switch-to-switch link";
  const core::Link link = *victim;
  auto ports = LinkPorts(view->topology, link.id);
  ASSERT_EQ(ports.size(), 2u);
  int64_t refs_before = References(IntentsBySwitch(view->topology, view->plan), ports);
  ASSERT_GT(refs_before, 0) << "the plan's paths use " << link.id << " but no entry does";
  std::set<int64_t> affected;
  for (const core::JobPlan& jp : view->plan.jobs) {
    core::Plan one;
    one.jobs.push_back(jp);
    if (PathsOver(one, link)) affected.insert(jp.job_id);
  }

  Response r = rest.Patch("/links/" + link.id, {{"status", "down"}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["status"], "down");

  // Converged on a newer plan computed on the topology with the link down.
  absl::StatusOr<ControllerView> after = absl::DeadlineExceededError("not started");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    after = AwaitConverged(rest, reader_, absl::Seconds(30), 8);
    if (!after.ok()) break;
    const core::Link* l = after->topology.FindLink(link.id);
    if (after->plan.version > view->plan.version && l && l->status == core::LinkStatus::kDown) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << Logs(controller);
  ASSERT_GT(after->plan.version, view->plan.version);
  EXPECT_EQ(PathsOver(after->plan, link), 0) << "the new plan still routes over " << link.id;
  auto intents = IntentsBySwitch(after->topology, after->plan);
  EXPECT_EQ(References(intents, LinkPorts(after->topology, link.id)), 0);
  // AwaitConverged compared every switch with these intents: the switches do not reference the
  // link either. The affected jobs are still planned (re-routed, not dropped) and active.
  for (int64_t id : affected) {
    EXPECT_NE(after->plan.FindJob(id), nullptr) << "job " << id << " dropped from the plan";
    Response job = rest.Get(absl::StrCat("/jobs/", id));
    ASSERT_EQ(job.status, 200);
    std::string state = job.body["state"].get<std::string>();
    EXPECT_TRUE(state == "scheduled" || state == "running") << "job " << id << " is " << state;
  }
  std::printf(
      "[ info ] link %s down: %zu job(s) re-planned, %lld entries referenced it before, "
      "plan %lld -> %lld\n",
      link.id.c_str(), affected.size(), static_cast<long long>(refs_before),
      static_cast<long long>(view->plan.version), static_cast<long long>(after->plan.version));
}

// Prometheus sample value of `name` (exact, no labels); -1 when absent.
double Metric(Rest& rest, const std::string& name) {
  Response r = rest.Get("/metrics");
  std::string prefix = name + " ";
  size_t at = r.text.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  return std::stod(r.text.substr(at + 1 + prefix.size()));
}

// Two controllers on the same switches, each with its own database: A (election id 20) with
// three jobs, B (election id 10) with only the first. Only A writes: the switches hold A's
// intent, B reports itself backup everywhere and has written nothing. When A is killed, B takes
// over: it becomes primary and the switches converge on B's intent.
TEST_F(SystemTest, BackupControllerTakesOverWhenThePrimaryDies) {
  ControllerProcess a, b;
  ASSERT_NO_FATAL_FAILURE(StartController(a, "controller-a", dir_ + "/a.db", TestConfig(20)));
  Rest rest_a(a.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest_a, 3, "shared-"));
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest_a, 3, "only-a-"));
  auto view_a = AwaitConverged(rest_a, reader_, absl::Seconds(60), 6);
  ASSERT_TRUE(view_a.ok()) << view_a.status() << "\n" << Logs(a);

  ASSERT_NO_FATAL_FAILURE(StartController(b, "controller-b", dir_ + "/b.db", TestConfig(10)));
  Rest rest_b(b.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest_b, 3, "shared-"));
  // B plans (its own plan differs from A's: it lacks A's other jobs) but may not write.
  std::optional<ControllerView> view_b;
  bool all_backup = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    view_b = FetchView(rest_b);
    Response sw = rest_b.Get("/switches");
    all_backup = sw.status == 200 && !sw.body["switches"].empty();
    for (const Json& s : sw.body["switches"]) {
      all_backup &= s["connected"].get<bool>() && !s["primary"].get<bool>();
    }
    if (view_b && view_b->plan.jobs.size() == 3 && all_backup) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(view_b && view_b->plan.jobs.size() == 3) << Logs(b);
  ASSERT_TRUE(all_backup) << rest_b.Get("/switches").text;
  auto intents_a = IntentsBySwitch(view_a->topology, view_a->plan);
  auto intents_b = IntentsBySwitch(view_b->topology, view_b->plan);
  ASSERT_TRUE(intents_a != intents_b)
      << "the test needs the two controllers to want different state";
  // Let B run three more passes (each tries to reconcile as a backup), then check that A's state
  // is what the switches hold.
  ASSERT_EQ(rest_b.Get("/healthz").status, 200);
  const double passes = Metric(rest_b, "inac_loop_passes_total");
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       Metric(rest_b, "inac_loop_passes_total") < passes + 3;) {
    ASSERT_LT(std::chrono::steady_clock::now(), end) << "controller B stopped passing";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(CompareFabric(topology_, intents_a, reader_), "");
  EXPECT_EQ(Metric(rest_b, "inac_southbound_writes_total"), 0);
  Response a_switches = rest_a.Get("/switches");
  for (const Json& s : a_switches.body["switches"]) EXPECT_TRUE(s["primary"].get<bool>()) << s;

  a.Kill9();
  auto killed = std::chrono::steady_clock::now();
  auto converged = AwaitConverged(rest_b, reader_, absl::Seconds(30), 3);
  ASSERT_TRUE(converged.ok()) << converged.status() << "\n" << Logs(b);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(
      CompareFabric(topology_, IntentsBySwitch(converged->topology, converged->plan), reader_), "");
  Response b_switches = rest_b.Get("/switches");
  for (const Json& s : b_switches.body["switches"]) EXPECT_TRUE(s["primary"].get<bool>()) << s;
  EXPECT_GT(Metric(rest_b, "inac_southbound_writes_total"), 0);
  std::printf("[ info ] backup took over and converged %.2f s after the primary was killed\n",
              seconds);
}

// Restart without changes: the controller is killed, one switch restarts
// empty while it is down, and a new controller on the same database keeps the stored plan (no
// re-plan), wins arbitration with a higher election id, pushes the pipeline to the restarted switch
// and repairs only that switch. A job left pending by a crash between the plan's save and the
// jobs' update is scheduled and run on the kept plan.
TEST_F(SystemTest, RestartedControllerKeepsThePlanAndRepairsOnlyWhatDrifted) {
  const std::string db = dir_ + "/inac.db";
  ControllerProcess first;
  ASSERT_NO_FATAL_FAILURE(StartController(first, "controller-1", db, TestConfig()));
  Rest rest1(first.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitMix(rest1, 10));
  auto view = AwaitConverged(rest1, reader_, absl::Seconds(60), 10);
  ASSERT_TRUE(view.ok()) << view.status() << "\n" << Logs(first);
  uint64_t old_election = rest1.Get("/switches").body["switches"][0]["election_id"].get<uint64_t>();
  first.Kill9();
  // The crash window between saving a plan and marking its jobs scheduled: one job of the current
  // plan is put back to pending (a legal transition) while no controller runs.
  const int64_t reverted = view->plan.jobs.front().job_id;
  {
    auto storage = storage::SqliteStorage::Open(db);
    ASSERT_TRUE(storage.ok()) << storage.status();
    core::JobUpdate u;
    u.state = core::JobState::kPending;
    ASSERT_TRUE((*storage)->jobs().Update(reverted, u, 1).ok());
  }

  auto intents = IntentsBySwitch(view->topology, view->plan);
  std::string drifted;
  for (const auto& [id, intent] : intents) {
    if (drifted.empty() || EntryCount(intent) > EntryCount(intents[drifted])) drifted = id;
  }
  ASSERT_TRUE(fabric_.KillAndRestart(drifted).ok());

  ControllerProcess second;
  ASSERT_NO_FATAL_FAILURE(StartController(second, "controller-2", db, TestConfig(), false));
  Rest rest2(second.host_port());
  auto after = AwaitConverged(rest2, reader_, absl::Seconds(60), 10);
  ASSERT_TRUE(after.ok()) << after.status() << "\n" << Logs(second);
  // A re-plan always saves a new version.
  EXPECT_EQ(after->plan.version, view->plan.version) << "restart re-planned";
  // Only the drifted switch was written to: its whole intent, nothing anywhere else.
  EXPECT_EQ(Metric(rest2, "inac_southbound_writes_total"), EntryCount(intents[drifted]));
  Response switches = rest2.Get("/switches");
  for (const Json& sw : switches.body["switches"]) {
    EXPECT_GT(sw["election_id"].get<uint64_t>(), old_election) << sw;
    EXPECT_TRUE(sw["primary"].get<bool>()) << sw;
    EXPECT_EQ(sw["pipeline_pushes"].get<int64_t>(), sw["id"] == drifted ? 1 : 0) << sw;
  }
  // The reverted job is scheduled again and, its switches confirmed, running.
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    state = rest2.Get(absl::StrCat("/jobs/", reverted)).body["state"].get<std::string>();
    if (state == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "running") << "job " << reverted;
}

}  // namespace
}  // namespace inac::systest
