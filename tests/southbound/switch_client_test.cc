// The southbound client against the emulated switch (southbound/emulator/) in-process on port 0:
// arbitration, batched writes with per-update errors, pipeline by cookie, reconciliation after a
// switch restart and after tampering, and the BMv2 deviations the client must also handle.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/rpc/code.pb.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/device_config.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/entity_codec.h"
#include "southbound/intent_reconciler.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_session.h"
#include "southbound/testing/fake_switch_client.h"
#include "tests/fixtures/sample_intents.h"

namespace inac::southbound {
namespace {

using emulator::EmulatedSwitch;
using emulator::EmulatedSwitchOptions;

constexpr uint64_t kDevice = 3;
// Generous bounds for events that happen in milliseconds; never part of an assertion on time.
constexpr absl::Duration kWait = absl::Seconds(20);

BackoffPolicy FastBackoff() {
  return BackoffPolicy{absl::Milliseconds(5), absl::Milliseconds(50), 2.0, 0.2};
}

SessionOptions Session(const EmulatedSwitch& sw, ElectionId id) {
  SessionOptions options;
  options.address = sw.address();
  options.device_id = kDevice;
  options.election_id = id;
  options.backoff = FastBackoff();
  options.random = [] { return 0.5; };
  options.rpc_timeout = absl::Seconds(30);
  return options;
}

std::unique_ptr<EmulatedSwitch> StartSwitch(const std::string& listen = "127.0.0.1:0",
                                            emulator::Bmv2Deviations deviations = {}) {
  EmulatedSwitchOptions options;
  options.listen_address = listen;
  options.device_id = kDevice;
  options.deviations = deviations;
  auto sw = EmulatedSwitch::Start(options);
  EXPECT_TRUE(sw.ok()) << sw.status();
  return sw.ok() ? *std::move(sw) : nullptr;
}

IntentTranslator Translator() {
  auto translator = IntentTranslator::Create(*P4InfoIndex::EmbeddedIna());
  EXPECT_TRUE(translator.ok());
  return *std::move(translator);
}

core::SwitchIntent MakeIntent(int jobs, int inputs, int64_t version = 1) {
  return fixtures::SampleSwitchIntent("leaf1", jobs, inputs, version);
}

// The number of P4Runtime entities `intent` requires: an aggregation is an ina_job and an
// ina_live entry.
int64_t EntityCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size());
}

// The canonical fingerprints of everything INAC owns on the switch, sorted.
std::vector<std::string> SwitchState(SwitchSession& session, const IntentTranslator& t) {
  auto read = session.Read(t.OwnedStateFilters());
  EXPECT_TRUE(read.ok()) << read.status();
  std::vector<std::string> out;
  if (!read.ok()) return out;
  for (const auto& e : *read) out.push_back(EntityFingerprint(*CanonicalEntity(e)));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> IntentState(const core::SwitchIntent& intent, const IntentTranslator& t) {
  std::vector<std::string> out;
  auto entities = t.Translate(intent);
  EXPECT_TRUE(entities.ok()) << entities.status();
  if (!entities.ok()) return out;
  for (const auto& e : *entities) out.push_back(EntityFingerprint(e));
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<P4RuntimeSwitchClient> MakeClient(const EmulatedSwitch& sw, ElectionId id) {
  P4RuntimeSwitchClientOptions options;
  options.switch_id = "leaf1";
  options.session = Session(sw, id);
  auto client = P4RuntimeSwitchClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

p4::v1::Update Insert(p4::v1::Entity entity) {
  p4::v1::Update update;
  update.set_type(p4::v1::Update::INSERT);
  *update.mutable_entity() = std::move(entity);
  return update;
}

// --- Arbitration ---

TEST(SwitchSessionTest, HigherElectionIdWritesLowerIsRefused) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  SwitchSession low(Session(*sw, {0, 10}));
  SwitchSession high(Session(*sw, {0, 20}));
  ASSERT_TRUE(low.Connect().ok());
  ASSERT_TRUE(high.Connect().ok());
  ASSERT_TRUE(high.AwaitPrimary(kWait));
  // The switch tells the lower one it is a backup (it was primary until `high` arrived).
  EXPECT_TRUE(low.AwaitNotPrimary(kWait));

  P4InfoIndex p4info = *P4InfoIndex::EmbeddedIna();
  EXPECT_EQ(low.SetPipeline(p4info.p4info(), "", 1).code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(high.SetPipeline(p4info.p4info(), "", 1).ok());

  IntentTranslator t = Translator();
  core::SwitchIntent intent = MakeIntent(1, 2);
  auto entities = *t.Translate(intent);
  std::vector<p4::v1::Update> updates;
  for (auto& e : entities) updates.push_back(Insert(e));
  auto refused = low.Write(updates);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  auto written = high.Write(updates);
  ASSERT_TRUE(written.ok()) << written.status();
  for (const auto& s : *written) EXPECT_TRUE(s.ok()) << s;
  // Reads need no arbitration: the backup sees what the primary wrote.
  EXPECT_EQ(SwitchState(low, t), IntentState(intent, t));
}

TEST(SwitchSessionTest, BackupBecomesPrimaryWhenThePrimaryStreamDrops) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  SwitchSession backup(Session(*sw, {0, 10}));
  auto primary = std::make_unique<SwitchSession>(Session(*sw, {0, 20}));
  ASSERT_TRUE(primary->Connect().ok());
  ASSERT_TRUE(primary->AwaitPrimary(kWait));
  ASSERT_TRUE(backup.Connect().ok());
  EXPECT_FALSE(backup.IsPrimary());

  primary->Disconnect();  // the primary's stream ends
  // Spec behaviour: the switch reports "no primary" (NOT_FOUND) and the backup re-arbitrates.
  ASSERT_TRUE(backup.AwaitPrimary(kWait));
  P4InfoIndex p4info = *P4InfoIndex::EmbeddedIna();
  EXPECT_TRUE(backup.SetPipeline(p4info.p4info(), "", 1).ok());
  EXPECT_GE(backup.state().election_id, (ElectionId{0, 10}));
}

TEST(SwitchSessionTest, Bmv2PromotesTheBackupAtOnce) {
  emulator::Bmv2Deviations bmv2;
  bmv2.promote_backup_immediately = true;
  auto sw = StartSwitch("127.0.0.1:0", bmv2);
  ASSERT_NE(sw, nullptr);
  SessionOptions backup_options = Session(*sw, {0, 10});
  backup_options.claim_primary_when_vacant = false;  // no re-arbitration: BMv2 promotes it
  SwitchSession backup(backup_options);
  auto primary = std::make_unique<SwitchSession>(Session(*sw, {0, 20}));
  ASSERT_TRUE(primary->Connect().ok());
  ASSERT_TRUE(primary->AwaitPrimary(kWait));
  ASSERT_TRUE(backup.Connect().ok());
  EXPECT_FALSE(backup.IsPrimary());
  primary.reset();
  ASSERT_TRUE(backup.AwaitPrimary(kWait));
  EXPECT_EQ(backup.state().election_id, (ElectionId{0, 10}));
}

TEST(SwitchSessionTest, DuplicateElectionIdAndWrongDeviceAreRefused) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  SwitchSession first(Session(*sw, {0, 5}));
  ASSERT_TRUE(first.Connect().ok());
  SwitchSession twin(Session(*sw, {0, 5}));
  EXPECT_EQ(twin.Connect().code(), absl::StatusCode::kInvalidArgument);
  SessionOptions wrong = Session(*sw, {0, 6});
  wrong.device_id = kDevice + 1;
  SwitchSession stranger(wrong);
  EXPECT_EQ(stranger.Connect().code(), absl::StatusCode::kNotFound);
}

TEST(SwitchSessionTest, UnreachableSwitchIsUnavailableAndBackoffIsObserved) {
  // A port that was just free: a switch bound it and is gone.
  std::string address;
  {
    auto gone = StartSwitch();
    ASSERT_NE(gone, nullptr);
    address = gone->address();
    gone->Shutdown();
  }
  SessionOptions options;
  options.address = address;
  options.device_id = kDevice;
  options.backoff = FastBackoff();
  options.random = [] { return 0.5; };
  absl::Mutex mu;
  std::vector<absl::Duration> delays;
  options.on_backoff = [&](absl::Duration d) {
    absl::MutexLock lock(&mu);
    delays.push_back(d);
  };
  SwitchSession session(options);
  absl::Status status = session.Connect();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  session.Disconnect();
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(delays.empty());
  EXPECT_EQ(delays[0], absl::Milliseconds(5));  // the first delay of the policy, no jitter
}

TEST(SwitchSessionTest, ASwitchThatComesBackIsReconnectedWithoutWaitingOutTheBackoff) {
  // A backoff far longer than the test's bound: the session can only be back in time by
  // noticing that the channel is ready again (the restore bound: within a second of the switch
  // accepting connections, whatever its downtime).
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  const std::string address = sw->address();
  SessionOptions options = Session(*sw, {0, 1});
  options.backoff = BackoffPolicy{absl::Minutes(10), absl::Minutes(10), 2.0, 0.0};
  SwitchSession session(options);
  ASSERT_TRUE(session.Connect().ok());
  ASSERT_TRUE(session.AwaitPrimary(kWait));
  sw->Shutdown();
  sw.reset();
  // The stream ends; the session is waiting out its (10 min) backoff.
  auto disconnected = [&] { return !session.IsConnected(); };
  for (int i = 0; i < 2000 && !disconnected(); ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(disconnected());
  absl::Status down = session.Connect();
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_NE(down.message().find("reconnecting as soon as it accepts connections"),
            std::string::npos)
      << down;
  auto back = StartSwitch(address);
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(session.AwaitPrimary(kWait)) << "still waiting out the backoff";
  EXPECT_EQ(session.state().streams_opened, 2);
}

// A test double that arbitrates strictly by the letter of the specification (section 5.4): a
// controller becomes primary only with an election id >= the highest ever seen, so after the
// primary leaves, a backup must re-arbitrate with a higher id than its own. (The emulator
// compares with the highest *connected* id instead; both are handled by the session.)
class StrictArbiter final : public p4::v1::P4Runtime::Service {
 public:
  using Stream =
      grpc::ServerReaderWriter<p4::v1::StreamMessageResponse, p4::v1::StreamMessageRequest>;

  grpc::Status StreamChannel(grpc::ServerContext*, Stream* stream) override {
    int me;
    {
      absl::MutexLock lock(&mu_);
      me = next_++;
      clients_[me] = stream;
    }
    p4::v1::StreamMessageRequest request;
    while (stream->Read(&request)) {
      if (!request.has_arbitration()) continue;
      absl::MutexLock lock(&mu_);
      const auto& id = request.arbitration().election_id();
      const ElectionId election{id.high(), id.low()};
      if (!past_.has_value() || election >= *past_) {
        primary_ = me;
        past_ = election;
        for (const auto& [who, s] : clients_) Notify(who);
      } else {
        Notify(me);
      }
    }
    absl::MutexLock lock(&mu_);
    clients_.erase(me);
    if (primary_ == me) {
      primary_.reset();
      for (const auto& [who, s] : clients_) Notify(who);
    }
    return grpc::Status::OK;
  }

 private:
  void Notify(int who) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    p4::v1::StreamMessageResponse response;
    auto* arbitration = response.mutable_arbitration();
    arbitration->set_device_id(kDevice);
    if (past_.has_value()) {
      arbitration->mutable_election_id()->set_high(past_->high);
      arbitration->mutable_election_id()->set_low(past_->low);
    }
    arbitration->mutable_status()->set_code(!primary_.has_value() ? google::rpc::NOT_FOUND
                                            : *primary_ == who    ? google::rpc::OK
                                                                  : google::rpc::ALREADY_EXISTS);
    clients_[who]->Write(response);
  }

  absl::Mutex mu_;
  std::map<int, Stream*> clients_ ABSL_GUARDED_BY(mu_);
  int next_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<ElectionId> past_ ABSL_GUARDED_BY(mu_);
  std::optional<int> primary_ ABSL_GUARDED_BY(mu_);
};

TEST(SwitchSessionTest, StrictSpecFailoverReArbitratesWithAHigherElectionId) {
  StrictArbiter arbiter;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&arbiter);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  SessionOptions options;
  options.address = absl::StrCat("127.0.0.1:", port);
  options.device_id = kDevice;
  options.backoff = FastBackoff();
  options.election_id = {0, 20};
  auto primary = std::make_unique<SwitchSession>(options);
  options.election_id = {0, 10};
  SwitchSession backup(options);
  ASSERT_TRUE(primary->Connect().ok());
  ASSERT_TRUE(primary->AwaitPrimary(kWait));
  ASSERT_TRUE(backup.Connect().ok());
  EXPECT_FALSE(backup.IsPrimary());
  primary.reset();
  ASSERT_TRUE(backup.AwaitPrimary(kWait));
  // Highest seen (20) + its own id (10).
  EXPECT_EQ(backup.state().election_id, (ElectionId{0, 30}));
  backup.Disconnect();
  server->Shutdown();
}

// --- Writes ---

TEST(SwitchSessionTest, OneFailingUpdateInABatchReportsExactlyThatUpdate) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  SwitchSession session(Session(*sw, {0, 1}));
  ASSERT_TRUE(session.Connect().ok());
  ASSERT_TRUE(session.AwaitPrimary(kWait));
  ASSERT_TRUE(session.SetPipeline(P4InfoIndex::EmbeddedIna()->p4info(), "", 1).ok());
  IntentTranslator t = Translator();
  core::SwitchIntent intent = MakeIntent(2, 3);
  auto entities = t.Translate(intent);
  ASSERT_TRUE(entities.ok());
  std::vector<p4::v1::Update> updates;
  for (auto& e : *entities) updates.push_back(Insert(e));
  // Update 6 (the first ina_worker entry, after 2 groups and 2 ina_job and ina_live pairs) gets
  // an input index that does not fit bit<8>.
  constexpr size_t kBad = 6;
  ASSERT_EQ(updates[kBad - 1].entity().table_entry().table_id(),
            t.p4info().TableId(kInaLiveTable).value_or(0));
  ASSERT_EQ(updates[kBad].entity().table_entry().table_id(), t.worker_table_id());
  updates[kBad]
      .mutable_entity()
      ->mutable_table_entry()
      ->mutable_action()
      ->mutable_action()
      ->mutable_params(0)
      ->set_value(std::string(2, '\xff'));
  auto results = session.Write(updates);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), updates.size());
  for (size_t i = 0; i < results->size(); ++i) {
    if (i == kBad) {
      EXPECT_EQ((*results)[i].code(), absl::StatusCode::kInvalidArgument) << (*results)[i];
    } else {
      EXPECT_TRUE((*results)[i].ok()) << i << ": " << (*results)[i];
    }
  }
  EXPECT_EQ(static_cast<int64_t>(SwitchState(session, t).size()), EntityCount(intent) - 1);
  // Inserting the same batch again: every update that was applied is now ALREADY_EXISTS.
  auto again = session.Write(updates);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].code(), absl::StatusCode::kAlreadyExists);
}

TEST(SwitchSessionTest, BatchesAreSizeBounded) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  SessionOptions options = Session(*sw, {0, 1});
  options.max_batch_updates = 7;
  SwitchSession session(options);
  ASSERT_TRUE(session.Connect().ok());
  ASSERT_TRUE(session.AwaitPrimary(kWait));
  ASSERT_TRUE(session.SetPipeline(P4InfoIndex::EmbeddedIna()->p4info(), "", 1).ok());
  IntentTranslator t = Translator();
  core::SwitchIntent intent = MakeIntent(4, 4);  // 4 * (2 + 4 + 5 + 1) = 48 entities
  auto entities = t.Translate(intent);
  ASSERT_TRUE(entities.ok());
  std::vector<p4::v1::Update> updates;
  for (auto& e : *entities) updates.push_back(Insert(e));
  int64_t batches = 0;
  auto results = session.Write(updates, &batches);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(batches, 7);  // ceil(48 / 7)
  EXPECT_EQ(SwitchState(session, t), IntentState(intent, t));
}

// --- Pipeline ---

TEST(SwitchClientTest, EnsurePipelinePushesOnlyWhenTheCookieDiffers) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  auto client = MakeClient(*sw, {0, 1});
  ASSERT_TRUE(client->Connect().ok());
  ASSERT_TRUE(client->IsConnected());
  ASSERT_TRUE(client->AwaitPrimary(kWait));
  auto first = client->EnsurePipeline();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  auto second = client->EnsurePipeline();
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
}

TEST(SwitchClientTest, PipelineCarriesTheDeviceConfigAndItsCookieCoversIt) {
  auto sw = StartSwitch();
  ASSERT_NE(sw, nullptr);
  auto make = [&](const std::string& device_config, uint64_t election) {
    P4RuntimeSwitchClientOptions options;
    options.switch_id = "leaf1";
    options.session = Session(*sw, {0, election});
    options.device_config = device_config;
    auto client = P4RuntimeSwitchClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return *std::move(client);
  };
  auto first = make("{\"target\": \"bmv2\", \"version\": 1}", 1);
  ASSERT_TRUE(first->Connect().ok());
  ASSERT_TRUE(first->AwaitPrimary(kWait));
  ASSERT_TRUE(*first->EnsurePipeline());
  first->Disconnect();
  // The emulator stores the device config it was given and returns it.
  p4::v1::GetForwardingPipelineConfigRequest get;
  get.set_device_id(kDevice);
  get.set_response_type(p4::v1::GetForwardingPipelineConfigRequest::ALL);
  auto stub = p4::v1::P4Runtime::NewStub(
      grpc::CreateChannel(sw->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  p4::v1::GetForwardingPipelineConfigResponse response;
  ASSERT_TRUE(stub->GetForwardingPipelineConfig(&context, get, &response).ok());
  EXPECT_EQ(response.config().p4_device_config(), "{\"target\": \"bmv2\", \"version\": 1}");
  EXPECT_EQ(response.config().cookie().cookie(), first->cookie());
  // Same P4Info, another device config: another cookie, so the pipeline is pushed again.
  auto second = make("{\"target\": \"bmv2\", \"version\": 2}", 2);
  EXPECT_NE(second->cookie(), first->cookie());
  ASSERT_TRUE(second->Connect().ok());
  ASSERT_TRUE(second->AwaitPrimary(kWait));
  auto pushed = second->EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed);
}

TEST(SwitchClientTest, EmbeddedDeviceConfigsByTarget) {
  auto emulator = InaDeviceConfig(core::TargetKind::kEmulator);
  ASSERT_TRUE(emulator.ok());
  EXPECT_TRUE(emulator->empty());
  auto bmv2 = InaDeviceConfig(core::TargetKind::kBmv2);
  ASSERT_TRUE(bmv2.ok());
  // p4c's BMv2 JSON of ina.p4: the program's name and its tables.
  EXPECT_NE(bmv2->find("\"program\" : \"ina.p4\""), std::string::npos);
  EXPECT_NE(bmv2->find("IngressImpl.ina_job"), std::string::npos);
  EXPECT_EQ(InaDeviceConfig(core::TargetKind::kTofino).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(SwitchClientTest, Bmv2GetWithoutPipelineCountsAsMissing) {
  emulator::Bmv2Deviations bmv2;
  bmv2.get_without_pipeline_fails = true;
  auto sw = StartSwitch("127.0.0.1:0", bmv2);
  ASSERT_NE(sw, nullptr);
  SwitchSession session(Session(*sw, {0, 1}));
  ASSERT_TRUE(session.Connect().ok());
  ASSERT_TRUE(session.AwaitPrimary(kWait));
  auto cookie = session.GetPipelineCookie();
  ASSERT_TRUE(cookie.ok()) << cookie.status();
  EXPECT_FALSE(cookie->has_value());
  const auto& p4info = P4InfoIndex::EmbeddedIna()->p4info();
  auto pushed = session.EnsurePipeline(p4info, "", 42);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed);
  EXPECT_EQ(**session.GetPipelineCookie(), 42u);
}

// --- Reconciliation ---

class ReconcileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sw_ = StartSwitch();
    ASSERT_NE(sw_, nullptr);
    client_ = MakeClient(*sw_, {0, 100});
    ASSERT_TRUE(client_->Connect().ok());
    ASSERT_TRUE(client_->IsPrimary());
    ASSERT_TRUE(client_->EnsurePipeline().ok());
    observer_ = std::make_unique<SwitchSession>(Session(*sw_, {0, 1}));
  }

  std::vector<std::string> Observed() { return SwitchState(*observer_, translator_); }

  IntentTranslator translator_ = Translator();
  std::unique_ptr<EmulatedSwitch> sw_;
  std::unique_ptr<P4RuntimeSwitchClient> client_;
  std::unique_ptr<SwitchSession> observer_;  // reads only
};

TEST_F(ReconcileTest, FirstRunInsertsEverythingSecondWritesNothing) {
  core::SwitchIntent intent = MakeIntent(3, 4);
  auto stats = client_->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  EXPECT_EQ(stats->deleted + stats->modified + stats->failed, 0);
  EXPECT_EQ(Observed(), IntentState(intent, translator_));

  auto again = client_->Reconcile(intent);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->writes(), 0);
  EXPECT_EQ(again->batches, 0);
  EXPECT_EQ(again->unchanged, EntityCount(intent));
}

TEST_F(ReconcileTest, MovesToANewIntentWithDeletesModifiesAndInserts) {
  ASSERT_TRUE(client_->Reconcile(MakeIntent(3, 4)).ok());
  core::SwitchIntent next = MakeIntent(2, 4, 2);   // job 102 leaves
  next.jobs[0].priority = 9;                       // job 100 changes priority
  next.routes[0].egress_port = 31;                 // a route changes port
  next.multicast_groups[1].egress_ports = {2, 5};  // a group changes replicas
  next.inputs.push_back(core::AggregationInputIntent{800, 100, 0x0c000001, 5});  // a new input
  auto stats = client_->Reconcile(next);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->deleted, 2 + 4 + 5 + 1);  // ina_job, ina_live, inputs, routes, group
  EXPECT_EQ(stats->modified, 3);
  EXPECT_EQ(stats->inserted, 1);
  EXPECT_EQ(stats->failed, 0);
  EXPECT_EQ(Observed(), IntentState(next, translator_));
  EXPECT_EQ(client_->Reconcile(next)->writes(), 0);
}

TEST_F(ReconcileTest, RepairsTamperingByAnotherController) {
  core::SwitchIntent intent = MakeIntent(2, 3);
  ASSERT_TRUE(client_->Reconcile(intent).ok());

  // Another controller with a higher election id takes over and tampers: one extra entry, one
  // missing, one changed, one extra multicast group.
  {
    SwitchSession intruder(Session(*sw_, {0, 1000}));
    ASSERT_TRUE(intruder.Connect().ok());
    ASSERT_TRUE(intruder.AwaitPrimary(kWait));
    ASSERT_TRUE(client_->AwaitNotPrimary(kWait));  // the switch told it about the intruder
    EXPECT_EQ(client_->Reconcile(MakeIntent(3, 3)).status().code(),
              absl::StatusCode::kPermissionDenied)
        << "a backup must not be able to write";
    core::SwitchIntent tampered = intent;
    tampered.routes.push_back(core::RouteIntent{1, 1, 1, 1, 1, 0});  // extra
    tampered.inputs.erase(tampered.inputs.begin());                  // missing
    tampered.jobs[1].aggregator_count = 1;                           // changed
    tampered.multicast_groups.push_back(core::MulticastGroupIntent{999, 1, {7}});
    IntentReconciler tamper(&intruder, &translator_);
    auto stats = tamper.Reconcile(tampered);
    ASSERT_TRUE(stats.ok()) << stats.status();
    ASSERT_EQ(stats->writes(), 4);
  }  // the intruder leaves; our client re-arbitrates and is primary again
  ASSERT_NE(Observed(), IntentState(intent, translator_));
  ASSERT_TRUE(client_->AwaitPrimary(kWait));

  auto stats = client_->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->deleted, 2);   // the extra route and group
  EXPECT_EQ(stats->inserted, 1);  // the missing input
  EXPECT_EQ(stats->modified, 1);  // the changed job
  EXPECT_EQ(Observed(), IntentState(intent, translator_));
  auto second = client_->Reconcile(intent);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->writes(), 0);
}

TEST_F(ReconcileTest, RestoresTheFullIntentAfterTheSwitchRestarts) {
  core::SwitchIntent intent = MakeIntent(3, 5);
  ASSERT_TRUE(client_->Reconcile(intent).ok());
  const std::string address = sw_->address();
  sw_->Shutdown();
  sw_.reset();
  ASSERT_TRUE(client_->AwaitNotPrimary(kWait));  // the client saw its stream end
  auto restarted = StartSwitch(address);         // same port, empty state, no pipeline
  ASSERT_NE(restarted, nullptr);
  sw_ = std::move(restarted);
  observer_ = std::make_unique<SwitchSession>(Session(*sw_, {0, 1}));

  // The client's session reconnects by itself (backoff), then the controller's usual sequence.
  ASSERT_TRUE(client_->AwaitPrimary(kWait)) << client_->arbitration().last_error;
  auto pushed = client_->EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed);
  auto stats = client_->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->read, 0);
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  EXPECT_EQ(Observed(), IntentState(intent, translator_));
  EXPECT_EQ(client_->Reconcile(intent)->writes(), 0);
}

TEST_F(ReconcileTest, AnIntentThatDoesNotFitWritesNothing) {
  core::SwitchIntent intent = MakeIntent(1, 2);
  intent.inputs[1].index = 300;
  EXPECT_EQ(client_->Reconcile(intent).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Observed().empty());
}

TEST_F(ReconcileTest, CountersAreReadPerAggregation) {
  core::SwitchIntent intent = MakeIntent(2, 2);
  ASSERT_TRUE(client_->Reconcile(intent).ok());
  auto counters = client_->ReadCounters(intent);
  ASSERT_TRUE(counters.ok()) << counters.status();
  ASSERT_EQ(counters->size(), 2u);
  EXPECT_EQ((*counters)[0].tag, intent.jobs[0].tag);
  EXPECT_EQ((*counters)[1].multicast_group, intent.jobs[1].multicast_group);
  EXPECT_EQ((*counters)[0].aggregated.packets, 0);  // no data plane traffic in the emulator
}

TEST_F(ReconcileTest, WildcardReadsReturnWholeTablesGroupsAndCounters) {
  core::SwitchIntent intent = MakeIntent(2, 3);
  ASSERT_TRUE(client_->Reconcile(intent).ok());
  auto all = observer_->Read(translator_.OwnedStateFilters());
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(static_cast<int64_t>(all->size()), EntityCount(intent));
  // Every cell of every counter of the P4Info (counter id 0).
  auto cells = observer_->Read({IntentTranslator::AllCountersFilter()});
  ASSERT_TRUE(cells.ok()) << cells.status();
  int64_t expected = 0;
  for (const auto& counter : translator_.p4info().p4info().counters()) expected += counter.size();
  EXPECT_EQ(static_cast<int64_t>(cells->size()), expected);
}

// --- Fake ---

TEST(FakeSwitchClientTest, BehavesLikeASwitch) {
  FakeSwitchClient fake("leaf1");
  core::SwitchIntent intent = MakeIntent(2, 2);
  EXPECT_EQ(fake.Reconcile(intent).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(fake.Connect().ok());
  EXPECT_TRUE(*fake.EnsurePipeline());
  EXPECT_FALSE(*fake.EnsurePipeline());
  auto stats = fake.Reconcile(intent);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  EXPECT_EQ(fake.Reconcile(intent)->writes(), 0);
  EXPECT_EQ(fake.applied_intent(), intent);

  fake.RefuseUpdatesMatching("table=33554435", absl::ResourceExhaustedError("full"));
  core::SwitchIntent more = MakeIntent(3, 2);
  stats = fake.Reconcile(more);
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->failed, 0);
  EXPECT_FALSE(fake.applied_intent().has_value());
  fake.RefuseUpdatesMatching("", absl::OkStatus());
  EXPECT_TRUE(fake.Reconcile(more)->converged());

  fake.Restart();
  EXPECT_FALSE(fake.IsConnected());
  ASSERT_TRUE(fake.Connect().ok());
  EXPECT_EQ(fake.Reconcile(more).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(*fake.EnsurePipeline());
  EXPECT_EQ(fake.Reconcile(more)->inserted, EntityCount(more));

  fake.SetPrimary(false);
  EXPECT_EQ(fake.Reconcile(intent).status().code(), absl::StatusCode::kPermissionDenied);
  fake.SetCounters(AggregationCounters{0, 0, more.jobs[0].multicast_group, {5, 0}, {1, 0}, {}});
  auto counters = fake.ReadCounters(more);
  ASSERT_TRUE(counters.ok());
  EXPECT_EQ((*counters)[0].aggregated.packets, 5);
  EXPECT_EQ((*counters)[0].tag, more.jobs[0].tag);
}

}  // namespace
}  // namespace inac::southbound
