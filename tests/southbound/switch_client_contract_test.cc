// The contract of southbound/switch_client.h, run against every implementation: FakeSwitchClient
// (southbound/testing/) and P4RuntimeSwitchClient over loopback gRPC to the emulated switch
// (southbound/emulator/) started in-process on 127.0.0.1, port 0. The fake other layers test
// with is thereby held to the semantics of the production client. Every observation goes through
// the port (ReconcileStats.read tells what the switch held before a run); only what the header
// promises, or what both implementations must share, is asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/plan.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_client.h"
#include "southbound/switch_session.h"
#include "southbound/testing/fake_switch_client.h"
#include "tests/fixtures/sample_intents.h"

namespace inac::southbound {
namespace {

using emulator::EmulatedSwitch;
using emulator::EmulatedSwitchOptions;

constexpr char kSwitchId[] = "leaf1";
constexpr uint64_t kDevice = 3;
constexpr ElectionId kClientElectionId{0, 100};
constexpr ElectionId kOtherElectionId{0, 1000};
// A generous bound for events that happen in milliseconds; never part of an assertion on time.
constexpr absl::Duration kWait = absl::Seconds(20);

core::SwitchIntent MakeIntent(int jobs, int inputs, int64_t version = 1) {
  return fixtures::SampleSwitchIntent(kSwitchId, jobs, inputs, version);
}

// MakeIntent plus the hosts behind two ports (fabric state of the egress ina_host table).
core::SwitchIntent MakeIntentWithHosts(int jobs, int inputs) {
  core::SwitchIntent intent = MakeIntent(jobs, inputs);
  intent.host_ports.push_back(core::HostPortIntent{1, 0x02000000000aull, 0x0a000001});
  intent.host_ports.push_back(core::HostPortIntent{2, 0x02000000000bull, 0x0a000002});
  return intent;
}

// The number of P4Runtime entities (table entries and multicast groups) `intent` requires: an
// aggregation is an ina_job and an ina_live entry.
int64_t EntityCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// One implementation under test and the switch behind it. A new harness is a new switch (no
// pipeline, no state) and a client that has not connected yet.
class Harness {
 public:
  virtual ~Harness() = default;

  virtual SwitchClient& client() = 0;
  // Precondition: the client has not connected. Another controller becomes the switch's primary
  // (so that the client, once connected, is a backup), after pushing the INA pipeline when
  // `with_pipeline`.
  virtual absl::Status AnotherControllerBecomesPrimary(bool with_pipeline) = 0;
  // That controller leaves the switch. Returns whether the (connected) client then became
  // primary: it re-arbitrates on its own, so this waits up to a generous bound.
  virtual bool AnotherControllerLeaves() = 0;
  // Waits up to a generous bound for the client to be primary (after a reconnect, which the
  // client completes on its own); returns client().IsPrimary().
  virtual bool AwaitPrimary() = 0;
};

class FakeHarness : public Harness {
 public:
  SwitchClient& client() override { return fake_; }

  absl::Status AnotherControllerBecomesPrimary(bool with_pipeline) override {
    if (with_pipeline) {
      // The other controller's session is simulated by the fake's own: it pushes the pipeline
      // as primary and leaves again.
      fake_.SetPrimary(true);
      if (absl::Status s = fake_.Connect(); !s.ok()) return s;
      absl::StatusOr<bool> pushed = fake_.EnsurePipeline();
      if (!pushed.ok()) return pushed.status();
      fake_.Disconnect();
    }
    fake_.SetPrimary(false);
    return absl::OkStatus();
  }

  bool AnotherControllerLeaves() override {
    fake_.SetPrimary(true);
    return fake_.IsPrimary();
  }

  bool AwaitPrimary() override { return fake_.IsPrimary(); }

 private:
  FakeSwitchClient fake_{kSwitchId};
};

class EmulatorHarness : public Harness {
 public:
  // Starts the emulated switch on 127.0.0.1, port 0; nullptr (with a test failure) if it could
  // not start.
  static std::unique_ptr<Harness> Create() {
    EmulatedSwitchOptions options;
    options.listen_address = "127.0.0.1:0";
    options.device_id = kDevice;
    auto sw = EmulatedSwitch::Start(options);
    EXPECT_TRUE(sw.ok()) << sw.status();
    if (!sw.ok()) return nullptr;
    auto harness = std::unique_ptr<EmulatorHarness>(new EmulatorHarness(*std::move(sw)));
    harness->client_ = harness->MakeClient(kClientElectionId);
    if (harness->client_ == nullptr) return nullptr;
    return harness;
  }

  ~EmulatorHarness() override {
    // Clients before the switch, so that no session reconnects to a switch that is gone.
    client_.reset();
    other_.reset();
    sw_->Shutdown();
  }

  SwitchClient& client() override { return *client_; }

  absl::Status AnotherControllerBecomesPrimary(bool with_pipeline) override {
    other_ = MakeClient(kOtherElectionId);
    if (other_ == nullptr) return absl::InternalError("cannot create the other client");
    if (absl::Status s = other_->Connect(); !s.ok()) return s;
    // The sole client of a fresh switch is primary from its first arbitration answer.
    if (!other_->IsPrimary()) return absl::InternalError("the other client is not primary");
    if (with_pipeline) {
      absl::StatusOr<bool> pushed = other_->EnsurePipeline();
      if (!pushed.ok()) return pushed.status();
    }
    return absl::OkStatus();
  }

  bool AnotherControllerLeaves() override {
    // The switch tells the backup there is no primary; the backup claims the role.
    other_->Disconnect();
    return client_->AwaitPrimary(kWait);
  }

  bool AwaitPrimary() override { return client_->AwaitPrimary(kWait); }

 private:
  explicit EmulatorHarness(std::unique_ptr<EmulatedSwitch> sw) : sw_(std::move(sw)) {}

  // Built the way tests/southbound/switch_client_test.cc builds its clients: short backoff
  // with a fixed jitter draw, so that a refused or dropped stream is retried quickly.
  std::unique_ptr<P4RuntimeSwitchClient> MakeClient(ElectionId election_id) {
    P4RuntimeSwitchClientOptions options;
    options.switch_id = kSwitchId;
    options.session.address = sw_->address();
    options.session.device_id = kDevice;
    options.session.election_id = election_id;
    options.session.backoff =
        BackoffPolicy{absl::Milliseconds(5), absl::Milliseconds(50), 2.0, 0.2};
    options.session.random = [] { return 0.5; };
    options.session.rpc_timeout = absl::Seconds(30);
    auto client = P4RuntimeSwitchClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::unique_ptr<EmulatedSwitch> sw_;
  std::unique_ptr<P4RuntimeSwitchClient> other_;  // another controller, when a test wants one
  std::unique_ptr<P4RuntimeSwitchClient> client_;
};

struct Impl {
  std::string name;
  std::function<std::unique_ptr<Harness>()> make;
};
// gtest prints the parameter in --gtest_list_tests, from which ctest names the tests: the name,
// rather than the bytes of the object (which hold pointers and differ from run to run).
void PrintTo(const Impl& impl, std::ostream* os) { *os << impl.name; }

class SwitchClientContractTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    harness_ = GetParam().make();
    ASSERT_NE(harness_, nullptr);
  }

  SwitchClient& client() { return harness_->client(); }

  // Connects as the switch's sole controller and makes sure it runs the pipeline.
  void ConnectAndPushPipeline() {
    ASSERT_TRUE(client().Connect().ok());
    ASSERT_TRUE(client().IsPrimary());
    auto pushed = client().EnsurePipeline();
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }

  // Reconciles `intent`, expecting a complete, converged run.
  ReconcileStats ReconcileOk(const core::SwitchIntent& intent) {
    auto stats = client().Reconcile(intent);
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok()) return ReconcileStats{};
    EXPECT_TRUE(stats->converged());
    EXPECT_EQ(stats->failed, 0);
    EXPECT_TRUE(stats->errors.empty()) << stats->errors.front();
    return *std::move(stats);
  }

  // Expects the switch to hold exactly `intent`: a run writes nothing and finds it all equal.
  void ExpectHolds(const core::SwitchIntent& intent) {
    ReconcileStats stats = ReconcileOk(intent);
    EXPECT_EQ(stats.read, EntityCount(intent));
    EXPECT_EQ(stats.unchanged, EntityCount(intent));
    EXPECT_EQ(stats.writes(), 0);
    EXPECT_EQ(stats.batches, 0);
  }

  std::unique_ptr<Harness> harness_;
};

// --- Session ---

TEST_P(SwitchClientContractTest, BeforeConnectNothingIsConnectedAndNothingIsWritten) {
  EXPECT_EQ(client().switch_id(), kSwitchId);
  EXPECT_FALSE(client().IsConnected());
  EXPECT_FALSE(client().IsPrimary());
  // Only the primary may write, and a client that has not connected is not primary.
  EXPECT_EQ(client().EnsurePipeline().status().code(), absl::StatusCode::kPermissionDenied);
  const core::SwitchIntent intent = MakeIntent(2, 2);
  EXPECT_FALSE(client().Reconcile(intent).ok());
  client().Disconnect();  // harmless without a session
  EXPECT_FALSE(client().IsConnected());

  ConnectAndPushPipeline();
  ReconcileStats first = ReconcileOk(intent);
  EXPECT_EQ(first.read, 0) << "the runs before Connect wrote something";
  EXPECT_EQ(first.inserted, EntityCount(intent));
}

TEST_P(SwitchClientContractTest, ConnectMakesTheSoleClientPrimaryAndIsIdempotent) {
  absl::Status connected = client().Connect();
  ASSERT_TRUE(connected.ok()) << connected;
  EXPECT_TRUE(client().IsConnected());
  EXPECT_TRUE(client().IsPrimary());
  absl::Status again = client().Connect();
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_TRUE(client().IsConnected());
  EXPECT_TRUE(client().IsPrimary());
  EXPECT_EQ(client().switch_id(), kSwitchId);
}

TEST_P(SwitchClientContractTest, DisconnectEndsTheSessionIsIdempotentAndTheSwitchKeepsItsState) {
  ConnectAndPushPipeline();
  const core::SwitchIntent intent = MakeIntent(2, 3);
  ReconcileOk(intent);

  client().Disconnect();
  EXPECT_FALSE(client().IsConnected());
  EXPECT_FALSE(client().IsPrimary());
  client().Disconnect();
  EXPECT_FALSE(client().IsConnected());
  EXPECT_FALSE(client().IsPrimary());
  // Without a session a run does not start (even on a switch that already holds the intent).
  auto closed = client().Reconcile(intent);
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kUnavailable) << closed.status();

  // A later Connect opens a new session. A P4Runtime switch may not have seen the old stream
  // end yet and refuse the election id as a duplicate for a moment (InvalidArgument, which the
  // header allows); the client keeps retrying on its own.
  absl::Status again = client().Connect();
  if (!again.ok()) {
    EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument) << again;
  }
  ASSERT_TRUE(harness_->AwaitPrimary());
  EXPECT_TRUE(client().IsConnected());
  // Closing a session is not a switch restart: the pipeline and the entries are still there.
  auto pushed = client().EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_FALSE(*pushed);
  ExpectHolds(intent);
}

// --- Pipeline ---

TEST_P(SwitchClientContractTest, EnsurePipelinePushesTheFirstTimeOnly) {
  ASSERT_TRUE(client().Connect().ok());
  auto first = client().EnsurePipeline();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  auto second = client().EnsurePipeline();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);
}

TEST_P(SwitchClientContractTest, ReconcileWithoutThePipelineFailsAndWritesNothing) {
  ASSERT_TRUE(client().Connect().ok());
  const core::SwitchIntent intent = MakeIntent(1, 2);
  EXPECT_FALSE(client().Reconcile(intent).ok());
  auto pushed = client().EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed);
  ReconcileStats stats = ReconcileOk(intent);
  EXPECT_EQ(stats.read, 0);
  EXPECT_EQ(stats.inserted, EntityCount(intent));
}

// --- Reconcile ---

TEST_P(SwitchClientContractTest, FirstReconcileInsertsTheIntentSecondWritesNothing) {
  ConnectAndPushPipeline();
  const core::SwitchIntent intent = MakeIntentWithHosts(3, 4);
  ReconcileStats first = ReconcileOk(intent);
  EXPECT_EQ(first.read, 0);
  EXPECT_EQ(first.unchanged, 0);
  EXPECT_EQ(first.inserted, EntityCount(intent));
  EXPECT_EQ(first.deleted, 0);
  EXPECT_EQ(first.modified, 0);
  EXPECT_EQ(first.writes(), EntityCount(intent));
  EXPECT_GT(first.batches, 0);

  ExpectHolds(intent);
}

TEST_P(SwitchClientContractTest, MovingToAnotherIntentDeletesModifiesAndInserts) {
  ConnectAndPushPipeline();
  const core::SwitchIntent before = MakeIntent(3, 4);  // 3 * (2 + 4 + 5 + 1) = 36 entities
  ReconcileOk(before);

  core::SwitchIntent next = MakeIntent(2, 4, 2);   // job 102 leaves: 12 entities
  next.jobs[0].priority = 9;                       // job 100 changes priority
  next.routes[0].egress_port = 31;                 // a route changes port
  next.multicast_groups[1].egress_ports = {2, 5};  // a group changes replicas
  next.inputs.push_back(core::AggregationInputIntent{800, 100, 0x0c000001, 5});  // a new input
  ReconcileStats stats = ReconcileOk(next);
  EXPECT_EQ(stats.read, EntityCount(before));
  EXPECT_EQ(stats.deleted, 2 + 4 + 5 + 1);  // ina_job, ina_live, inputs, routes, group
  EXPECT_EQ(stats.modified, 3);
  EXPECT_EQ(stats.inserted, 1);
  EXPECT_EQ(stats.unchanged, EntityCount(before) - stats.deleted - stats.modified);
  EXPECT_EQ(stats.unchanged + stats.modified + stats.inserted, EntityCount(next));
  EXPECT_GT(stats.batches, 0);

  ExpectHolds(next);
}

TEST_P(SwitchClientContractTest, AnEmptyIntentRemovesEverything) {
  ConnectAndPushPipeline();
  const core::SwitchIntent intent = MakeIntentWithHosts(2, 3);
  ReconcileOk(intent);

  core::SwitchIntent empty;
  empty.switch_id = kSwitchId;
  empty.version = 2;
  ReconcileStats stats = ReconcileOk(empty);
  EXPECT_EQ(stats.read, EntityCount(intent));
  EXPECT_EQ(stats.deleted, EntityCount(intent));
  EXPECT_EQ(stats.modified, 0);
  EXPECT_EQ(stats.inserted, 0);
  EXPECT_EQ(stats.unchanged, 0);

  ExpectHolds(empty);
}

TEST_P(SwitchClientContractTest, AnIntentThatDoesNotFitThePipelineIsInvalidAndWritesNothing) {
  ConnectAndPushPipeline();
  const core::SwitchIntent applied = MakeIntent(3, 4);
  ReconcileOk(applied);

  // Each is a smaller intent (a run would delete jobs 101 and 102) with one value the pipeline
  // cannot hold.
  std::vector<std::pair<std::string, core::SwitchIntent>> bad;
  bad.emplace_back("input index beyond bit<8>", MakeIntent(1, 2));
  bad.back().second.inputs[1].index = 300;
  bad.emplace_back("route with both a port and a group", MakeIntent(1, 2));
  bad.back().second.routes[0].multicast_group = 1;
  bad.emplace_back("multicast group id 0", MakeIntent(1, 2));
  bad.back().second.multicast_groups[0].group_id = 0;
  bad.emplace_back("job's multicast group beyond bit<16>", MakeIntent(1, 2));
  bad.back().second.jobs[0].multicast_group = 70000;
  bad.emplace_back("egress port beyond bit<9>", MakeIntent(1, 2));
  bad.back().second.routes[1].egress_port = 600;
  bad.emplace_back("host port beyond bit<9>", MakeIntentWithHosts(1, 2));
  bad.back().second.host_ports[1].port = 512;
  for (const auto& [what, intent] : bad) {
    EXPECT_EQ(client().Reconcile(intent).status().code(), absl::StatusCode::kInvalidArgument)
        << what;
  }

  ExpectHolds(applied);
}

TEST_P(SwitchClientContractTest, ABackupCannotWriteUntilItBecomesPrimary) {
  absl::Status other = harness_->AnotherControllerBecomesPrimary(/*with_pipeline=*/true);
  ASSERT_TRUE(other.ok()) << other;
  // Connect is OK for a backup too.
  absl::Status connected = client().Connect();
  ASSERT_TRUE(connected.ok()) << connected;
  EXPECT_TRUE(client().IsConnected());
  EXPECT_FALSE(client().IsPrimary());

  const core::SwitchIntent intent = MakeIntent(2, 3);
  EXPECT_EQ(client().Reconcile(intent).status().code(), absl::StatusCode::kPermissionDenied);
  // The cookie matches: nothing to push, so a backup's EnsurePipeline is not refused.
  auto pushed = client().EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_FALSE(*pushed);
  // Reads need no arbitration.
  auto counters = client().ReadCounters(intent);
  ASSERT_TRUE(counters.ok()) << counters.status();
  EXPECT_EQ(counters->size(), intent.jobs.size());

  ASSERT_TRUE(harness_->AnotherControllerLeaves());
  EXPECT_TRUE(client().IsConnected());
  EXPECT_TRUE(client().IsPrimary());
  ReconcileStats stats = ReconcileOk(intent);
  EXPECT_EQ(stats.read, 0) << "the backup's refused run wrote something";
  EXPECT_EQ(stats.inserted, EntityCount(intent));
  ExpectHolds(intent);
}

TEST_P(SwitchClientContractTest, ABackupCannotPushThePipeline) {
  absl::Status other = harness_->AnotherControllerBecomesPrimary(/*with_pipeline=*/false);
  ASSERT_TRUE(other.ok()) << other;
  ASSERT_TRUE(client().Connect().ok());
  EXPECT_TRUE(client().IsConnected());
  EXPECT_FALSE(client().IsPrimary());
  EXPECT_EQ(client().EnsurePipeline().status().code(), absl::StatusCode::kPermissionDenied);

  ASSERT_TRUE(harness_->AnotherControllerLeaves());
  auto pushed = client().EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed);
}

TEST_P(SwitchClientContractTest, ConcurrentReconcilesAreSerialised) {
  ConnectAndPushPipeline();
  const core::SwitchIntent intent = MakeIntent(4, 4);
  absl::StatusOr<ReconcileStats> results[2];
  {
    std::thread a([&] { results[0] = client().Reconcile(intent); });
    std::thread b([&] { results[1] = client().Reconcile(intent); });
    a.join();
    b.join();
  }
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  // One run inserted everything, the other found it all there.
  std::vector<int64_t> inserted = {results[0]->inserted, results[1]->inserted};
  std::sort(inserted.begin(), inserted.end());
  EXPECT_EQ(inserted, (std::vector<int64_t>{0, EntityCount(intent)}));
  for (const auto& r : results) {
    EXPECT_EQ(r->failed, 0);
    EXPECT_EQ(r->deleted + r->modified, 0);
  }
  ExpectHolds(intent);
}

// --- Counters ---

TEST_P(SwitchClientContractTest, ReadCountersReturnsOneEntryPerAggregationInIntentOrder) {
  ConnectAndPushPipeline();
  core::SwitchIntent intent = MakeIntent(3, 2);
  ReconcileOk(intent);

  // In the order of intent.jobs, whatever it is; a tag without a multicast group has none.
  core::SwitchIntent asked = intent;
  std::reverse(asked.jobs.begin(), asked.jobs.end());
  asked.jobs[1].multicast_group = 0;  // job 101
  auto counters = client().ReadCounters(asked);
  ASSERT_TRUE(counters.ok()) << counters.status();
  ASSERT_EQ(counters->size(), 2u);
  const core::JobAggregationIntent* expected[] = {&asked.jobs[0], &asked.jobs[2]};
  for (size_t i = 0; i < 2; ++i) {
    const AggregationCounters& c = (*counters)[i];
    EXPECT_EQ(c.tag, expected[i]->tag) << i;
    EXPECT_EQ(c.job_id, expected[i]->job_id) << i;
    EXPECT_EQ(c.multicast_group, expected[i]->multicast_group) << i;
    // A fresh switch has counted nothing.
    EXPECT_EQ(c.aggregated, CounterValue{}) << i;
    EXPECT_EQ(c.preempted, CounterValue{}) << i;
    EXPECT_EQ(c.fallback, CounterValue{}) << i;
  }

  core::SwitchIntent none = intent;
  for (auto& job : none.jobs) job.multicast_group = 0;
  auto nothing = client().ReadCounters(none);
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_TRUE(nothing->empty());
  auto empty = client().ReadCounters(core::SwitchIntent{});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

INSTANTIATE_TEST_SUITE_P(AllClients, SwitchClientContractTest,
                         ::testing::Values(Impl{"Fake",
                                                []() -> std::unique_ptr<Harness> {
                                                  return std::make_unique<FakeHarness>();
                                                }},
                                           Impl{"P4RuntimeOverEmulator", &EmulatorHarness::Create}),
                         [](const ::testing::TestParamInfo<Impl>& info) {
                           return info.param.name;
                         });

// --- What only the fake can be made to do ---

// The P4Runtime client's refused updates come from the switch (e.g. a full table); the fake's
// from its knob. Both must report them in the header's format.
TEST(FakeSwitchClientContractTest, RefusedUpdatesAreReportedInTheHeadersFormat) {
  FakeSwitchClient fake(kSwitchId);
  ASSERT_TRUE(fake.Connect().ok());
  ASSERT_TRUE(fake.EnsurePipeline().ok());
  const core::SwitchIntent intent = MakeIntent(3, 10);  // 30 ina_worker entries
  const int64_t workers = static_cast<int64_t>(intent.inputs.size());
  auto worker_table = P4InfoIndex::EmbeddedIna()->TableId(kInaWorkerTable);
  ASSERT_TRUE(worker_table.ok()) << worker_table.status();
  fake.RefuseUpdatesMatching(absl::StrCat("table=", *worker_table, " "),
                             absl::ResourceExhaustedError("table is full"));
  auto stats = fake.Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_FALSE(stats->converged());
  EXPECT_EQ(stats->failed, workers);
  EXPECT_EQ(stats->inserted, EntityCount(intent) - workers);
  // At most 20 lines, then a summary line.
  ASSERT_EQ(stats->errors.size(), 21u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_TRUE(absl::StartsWith(stats->errors[i], "INSERT ")) << stats->errors[i];
    EXPECT_TRUE(absl::StrContains(stats->errors[i], ": RESOURCE_EXHAUSTED: table is full"))
        << stats->errors[i];
  }
  EXPECT_EQ(stats->errors[20], "... and 10 more refused updates");

  // The next run retries them.
  fake.RefuseUpdatesMatching("", absl::OkStatus());
  auto retry = fake.Reconcile(intent);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->converged());
  EXPECT_EQ(retry->inserted, workers);
  EXPECT_TRUE(retry->errors.empty());
}

}  // namespace
}  // namespace inac::southbound
