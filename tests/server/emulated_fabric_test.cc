// The controller against real P4Runtime: every switch of the small leaf-spine is an EmulatedSwitch
// (gRPC on 127.0.0.1, port 0) reached through P4RuntimeSwitchClient, as `inac serve` does.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/p4runtime_switch_client.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;
using southbound::emulator::EmulatedSwitch;

class EmulatedFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topology_ = SmallLeafSpine();
    for (size_t i = 0; i < topology_.switches.size(); ++i) {
      southbound::emulator::EmulatedSwitchOptions options;
      options.listen_address = "127.0.0.1:0";
      options.device_id = i + 1;
      auto sw = EmulatedSwitch::Start(options);
      ASSERT_TRUE(sw.ok()) << sw.status();
      topology_.switches[i].p4runtime = core::P4RuntimeEndpoint{(*sw)->address(), i + 1};
      switches_.push_back(std::move(*sw));
    }
    TestServerOptions options;
    options.factory = southbound::CreateP4RuntimeClient;  // what `inac serve` uses
    server_ = std::make_unique<TestServer>(options);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_EQ(server_->PutTopology(topology_), 200);
  }
  void TearDown() override {
    server_.reset();
    for (auto& sw : switches_) sw->Shutdown();
  }
  int64_t EntriesOnSwitches() {
    int64_t n = 0;
    for (const auto& sw : switches_) n += sw->NumTableEntries();
    return n;
  }

  core::Topology topology_;
  std::vector<std::unique_ptr<EmulatedSwitch>> switches_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(EmulatedFabricTest, JobLifecycleProgramsAndClearsTheSwitches) {
  int64_t id = server_->Submit(SmallLeafSpineJob("emulated"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_->Sync().ok());
  ASSERT_EQ(server_->JobState(id), "running");
  int64_t entries = EntriesOnSwitches();
  EXPECT_GT(entries, 0);
  Reply switches = server_->Get("/api/v1/switches");
  int64_t intended = 0;
  for (const Json& s : switches.json["switches"]) {
    EXPECT_TRUE(s["connected"].get<bool>()) << s.dump();
    EXPECT_TRUE(s["primary"].get<bool>()) << s.dump();
    EXPECT_TRUE(s["in_sync"].get<bool>()) << s.dump();
    EXPECT_EQ(s["pipeline_pushes"], 1) << s.dump();
    intended += s["entries"].get<int64_t>();
  }
  EXPECT_GE(intended, entries);  // `entries` also counts multicast groups
  EXPECT_EQ(server_->Get("/api/v1/readyz", "").status, 200);

  // The INA counters were read over P4Runtime after the job was programmed: the emulator has no
  // data plane, so every aggregation of the job shows 0 packets.
  Reply job = server_->Get(absl::StrCat("/api/v1/jobs/", id));
  ASSERT_EQ(job.status, 200) << job;
  ASSERT_TRUE(job.json.contains("ina_counters")) << job;
  const Json& counters = job.json["ina_counters"];
  EXPECT_FALSE(counters["switches"].empty()) << counters.dump();
  for (const Json& s : counters["switches"]) {
    EXPECT_EQ(s["aggregated_packets"], 0) << s.dump();
    EXPECT_EQ(s["fallback_packets"], 0) << s.dump();
    EXPECT_EQ(s["preempted_packets"], 0) << s.dump();
    EXPECT_GT(s["read_ms"].get<int64_t>(), 0) << s.dump();
  }
  EXPECT_EQ(counters["aggregated_packets"], 0);
  EXPECT_EQ(counters["fallback_packets"], 0);
  EXPECT_EQ(counters["preempted_packets"], 0);
  EXPECT_TRUE(absl::StrContains(server_->Get("/api/v1/metrics").body,
                                absl::StrCat("inac_ina_packets_total{job=\"", id, "\",")));

  // Restart: same plan, higher election id, nothing rewritten or duplicated.
  Reply plan = server_->Get("/api/v1/plan");
  uint64_t election = switches.json["switches"][0]["election_id"].get<uint64_t>();
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(server_->Get("/api/v1/plan").json["version"], plan.json["version"]);
  EXPECT_EQ(EntriesOnSwitches(), entries);
  Reply after = server_->Get("/api/v1/switches");
  for (const Json& s : after.json["switches"]) {
    EXPECT_TRUE(s["in_sync"].get<bool>()) << s.dump();
    EXPECT_TRUE(s["primary"].get<bool>()) << s.dump();
    EXPECT_GT(s["election_id"].get<uint64_t>(), election) << s.dump();
    EXPECT_EQ(s["pipeline_pushes"], 0) << s.dump();  // cookie matched: not pushed again
  }

  ASSERT_EQ(server_
                ->Call("POST", absl::StrCat("/api/v1/jobs/", id, "/progress"),
                       R"({"iterations_done": 100})")
                .status,
            200);
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(EntriesOnSwitches(), 0);
  EXPECT_EQ(server_->JobState(id), "completed");
}

}  // namespace
}  // namespace inac::server::testing
