// The controller (`inac serve` of this build) programming real BMv2 switches:
// a leaf-spine fabric of simple_switch_grpc processes whose topology endpoints say target
// "bmv2", so the controller pushes P4Info + p4c's JSON. Jobs are submitted over REST and every
// switch is read back over P4Runtime (tests/system/harness.h: SwitchReader, AwaitConverged).
// Then a BMv2 is SIGKILLed and restarted empty (same port, same device id) and must get its
// entries back; and the controller is restarted (kill -9, then SIGTERM) on the same database and
// must keep the plan and the switches' entries without writing or re-pushing anything.
// Times are measured and printed, never asserted.
//
// Skipped when simple_switch_grpc is not found (tests/interop/peers.h) or `inac` is not built.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "tests/interop/bmv2_switch.h"
#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace inac::interop {
namespace {

using systest::ControllerProcess;
using systest::Json;
using systest::Response;
using systest::Rest;
using systest::SwitchReader;

// Bounds for waits that take well under a second here; never assertions on time.
constexpr absl::Duration kConverge = absl::Seconds(90);
constexpr auto kRestoreBound = std::chrono::seconds(60);

Json TestConfig() { return Json{{"timer_ms", 500}}; }

// The P4Runtime entities `intent` requires: two per aggregation (ina_job, ina_live), one per
// input, route, multicast group and host port.
int64_t EntryCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// The value of an unlabelled metric in GET /metrics (Prometheus text); -1 when absent.
int64_t Metric(Rest& rest, const std::string& name) {
  Response r = rest.Get("/metrics");
  std::istringstream in(r.text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
  }
  return -1;
}

class ControllerBmv2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto binary = FindBmv2();
    if (!binary) {
      GTEST_SKIP() << "BMv2 simple_switch_grpc not found; searched " << Bmv2SearchDescription()
                   << ". Set INAC_BMV2 to the binary or its folder to run the interop tests.";
    }
    if (access(systest::InacBinary(), X_OK) != 0) GTEST_SKIP() << "inac binary not built";
    dir_ = systest::MakeTempDir("interop-controller");
    ASSERT_FALSE(dir_.empty());
    topology_ = systest::LeafSpine(2, 2, 2);
    absl::Status started = fabric_.Start(&topology_, dir_, *binary);
    ASSERT_TRUE(started.ok()) << started << "\n" << fabric_.Logs();
    for (const core::Switch& sw : topology_.switches) {
      ASSERT_TRUE(sw.p4runtime.has_value());
      ASSERT_EQ(sw.p4runtime->target, core::TargetKind::kBmv2);
    }
  }

  void TearDown() override {
    const bool failed = HasFailure();
    if (failed) {
      for (auto* c : {&first_, &second_, &third_}) {
        if (c->process()) std::printf("%s\n", Logs(*c).c_str());
      }
      std::printf("%s\n", fabric_.Logs().c_str());
    }
    first_.Kill9();
    second_.Kill9();
    third_.Kill9();
    fabric_ = Bmv2Fabric();  // SIGKILL and reap every BMv2
    if (dir_.empty()) return;
    if (failed) {
      std::printf("[ info ] logs and databases kept in %s\n", dir_.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  void StartController(ControllerProcess& controller, const std::string& name, bool put_topology) {
    absl::Status s = controller.Start(dir_, name, dir_ + "/inac.db", TestConfig());
    ASSERT_TRUE(s.ok()) << s;
    if (!put_topology) return;
    Rest rest(controller.host_port());
    Response r = rest.Put("/topology", core::TopologyToJson(topology_));
    ASSERT_EQ(r.status, 200) << r.text;
  }

  // Two jobs across both leaves: each leaf aggregates, the spines route.
  void SubmitJobs(Rest& rest) {
    Response r = rest.Post("/jobs", systest::LongRunningJob("a", {"h0_0", "h1_0"}, {"h0_1"}, 1));
    ASSERT_EQ(r.status, 201) << r.text;
    r = rest.Post("/jobs", systest::LongRunningJob("b", {"h0_1", "h1_1"}, {"h1_0"}, 2));
    ASSERT_EQ(r.status, 201) << r.text;
  }

  static std::string Logs(ControllerProcess& c) {
    return c.process() ? systest::LogTail(c.process()->log_path(), 6000) : "";
  }

  std::string dir_;
  core::Topology topology_;
  Bmv2Fabric fabric_;
  SwitchReader reader_;
  ControllerProcess first_, second_, third_;
};

// Jobs over REST -> every BMv2 holds its intent; a BMv2 SIGKILLed and restarted empty gets its
// pipeline and every entry back, without a re-plan.
TEST_F(ControllerBmv2Test, ProgramsBmv2SwitchesAndRestoresARestartedOne) {
  ASSERT_NO_FATAL_FAILURE(StartController(first_, "controller", true));
  Rest rest(first_.host_port());
  ASSERT_NO_FATAL_FAILURE(SubmitJobs(rest));
  auto view = systest::AwaitConverged(rest, reader_, kConverge, 2);
  ASSERT_TRUE(view.ok()) << view.status();
  auto intents = systest::IntentsBySwitch(view->topology, view->plan);
  int64_t total = 0;
  std::string victim;
  for (const auto& [id, intent] : intents) {
    total += EntryCount(intent);
    if (victim.empty() || EntryCount(intent) > EntryCount(intents[victim])) victim = id;
  }
  ASSERT_GT(EntryCount(intents[victim]), 0);
  std::printf("[ info ] plan %lld: %lld entries on %zu BMv2 switches\n",
              static_cast<long long>(view->plan.version), static_cast<long long>(total),
              intents.size());
  for (const Json& s : rest.Get("/switches").body["switches"]) {
    EXPECT_GE(s["pipeline_pushes"].get<int64_t>(), 1) << s;  // every BMv2 started empty
  }

  const core::Switch* sw = view->topology.FindSwitch(victim);
  ASSERT_TRUE(sw != nullptr && sw->p4runtime);
  auto expected = reader_.Expected(intents[victim]);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const int64_t pushes_before =
      rest.Get("/switches/" + victim).body["pipeline_pushes"].get<int64_t>();

  absl::Status restarted_status = fabric_.KillAndRestart(victim);  // returns once it answers
  ASSERT_TRUE(restarted_status.ok()) << restarted_status;
  const auto restarted = std::chrono::steady_clock::now();
  // No Read before the controller has pushed the pipeline: BMv2 may crash on a Read that meets
  // the pipeline push (bmv2_switch.h, AwaitPipeline).
  absl::Status pipeline =
      AwaitPipeline(sw->p4runtime->address, sw->p4runtime->device_id, absl::Seconds(60));
  ASSERT_TRUE(pipeline.ok()) << pipeline << "; BMv2 "
                             << (fabric_.at(victim)->process()->Exited() ? "exited" : "running");
  std::string last;
  bool restored = false;
  while (std::chrono::steady_clock::now() - restarted < kRestoreBound) {
    auto actual = reader_.Read(sw->p4runtime->address, sw->p4runtime->device_id);
    last = actual.ok() ? SwitchReader::Diff(*expected, *actual) : actual.status().ToString();
    if (last.empty()) {
      restored = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count();
  ASSERT_TRUE(restored) << victim << " not restored: " << last << "; BMv2 process "
                        << (fabric_.at(victim)->process()->Exited()
                                ? absl::StrCat("exited with ",
                                               fabric_.at(victim)->process()->Wait())
                                : std::string("running"));
  std::printf("[ info ] BMv2 %s restored (%lld entries) %.3f s after it accepted connections\n",
              victim.c_str(), static_cast<long long>(EntryCount(intents[victim])), seconds);

  Response after = rest.Get("/switches/" + victim);
  ASSERT_EQ(after.status, 200);
  EXPECT_GT(after.body["pipeline_pushes"].get<int64_t>(), pushes_before) << after.body;
  auto now = systest::FetchView(rest);
  ASSERT_TRUE(now);
  EXPECT_EQ(now->plan.version, view->plan.version) << "a switch restart must not re-plan";
  EXPECT_EQ(systest::CompareFabric(view->topology, intents, reader_), "");
}

// The controller restarts on the same database, once after kill -9 and once after SIGTERM:
// same plan version (no re-plan), the BMv2 switches keep their entries, the new controller
// writes nothing and pushes no pipeline (the cookie matches), and it is primary everywhere.
TEST_F(ControllerBmv2Test, ARestartedControllerKeepsThePlanAndTheEntries) {
  ASSERT_NO_FATAL_FAILURE(StartController(first_, "controller-1", true));
  int64_t version = 0;
  std::map<std::string, core::SwitchIntent> intents;
  core::Topology topology;
  {
    Rest rest(first_.host_port());
    ASSERT_NO_FATAL_FAILURE(SubmitJobs(rest));
    auto view = systest::AwaitConverged(rest, reader_, kConverge, 2);
    ASSERT_TRUE(view.ok()) << view.status();
    version = view->plan.version;
    topology = view->topology;
    intents = systest::IntentsBySwitch(view->topology, view->plan);
  }
  first_.Kill9();

  struct Step {
    ControllerProcess* controller;
    const char* name;
  };
  for (Step step : {Step{&second_, "controller-2"}, Step{&third_, "controller-3"}}) {
    SCOPED_TRACE(step.name);
    const auto start = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(StartController(*step.controller, step.name, false));
    Rest rest(step.controller->host_port());
    auto view = systest::AwaitConverged(rest, reader_, kConverge, 2);
    ASSERT_TRUE(view.ok()) << view.status();
    std::printf("[ info ] %s converged %.3f s after its start\n", step.name,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_EQ(view->plan.version, version) << "the restart re-planned";
    EXPECT_EQ(systest::CompareFabric(topology, intents, reader_), "");
    EXPECT_EQ(Metric(rest, "inac_southbound_writes_total"), 0) << "entries were rewritten";
    for (const Json& s : rest.Get("/switches").body["switches"]) {
      EXPECT_EQ(s["pipeline_pushes"].get<int64_t>(), 0) << "pipeline re-pushed: " << s;
      EXPECT_TRUE(s["primary"].get<bool>()) << s;
      EXPECT_EQ(s["applied_version"].get<int64_t>(), version) << s;
    }
    if (step.controller == &second_) {
      EXPECT_EQ(second_.Terminate(), 0) << "SIGTERM should stop inac serve cleanly";
    }
  }
}

}  // namespace
}  // namespace inac::interop
