#include "tests/interop/bmv2_fixture.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "google/rpc/code.pb.h"
#include "southbound/entity_codec.h"
#include "southbound/p4info_index.h"
#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace inac::interop {

using southbound::BackoffPolicy;
using southbound::ElectionId;
using southbound::IntentTranslator;
using southbound::P4InfoIndex;
using southbound::P4RuntimeSwitchClient;
using southbound::P4RuntimeSwitchClientOptions;
using southbound::SessionOptions;
using southbound::SwitchSession;

IntentTranslator Translator() {
  auto translator = IntentTranslator::Create(*P4InfoIndex::EmbeddedIna());
  EXPECT_TRUE(translator.ok()) << translator.status();
  return *std::move(translator);
}

// A switch intent that uses every INA table and every action of ina_route: per job one ina_job
// entry (priorities of both signs) and its ina_live entry, `inputs` ina_worker entries, one
// forward route per worker, a multicast route for the result and a multicast group; job 0 also
// gets a drop route.
core::SwitchIntent MakeIntent(int jobs, int inputs, int64_t version) {
  core::SwitchIntent intent;
  intent.switch_id = "leaf1";
  intent.version = version;
  for (int j = 0; j < jobs; ++j) {
    const core::JobId job = 100 + j;
    const uint32_t tag = static_cast<uint32_t>(job * 8);
    const uint32_t group = static_cast<uint32_t>(1 + j);
    const uint32_t ps = 0x0b000000u + j;
    intent.jobs.push_back(core::JobAggregationIntent{
        tag, job, static_cast<uint32_t>(inputs),
        inputs >= 64 ? ~uint64_t{0} : (uint64_t{1} << inputs) - 1, group,
        static_cast<uint32_t>(j * 16), 16, static_cast<int32_t>(j % 5) - 2, ps});
    for (int i = 0; i < inputs; ++i) {
      const uint32_t worker = 0x0a000000u + static_cast<uint32_t>(j * 256 + i);
      intent.inputs.push_back(
          core::AggregationInputIntent{tag, job, worker, static_cast<uint32_t>(i)});
      intent.routes.push_back(
          core::RouteIntent{tag, job, worker, ps, static_cast<uint32_t>(1 + i % 32), 0});
    }
    intent.routes.push_back(core::RouteIntent{tag, job, ps, 0, 0, group});
    if (j == 0) intent.routes.push_back(core::RouteIntent{tag, job, ps, 0x0c000001u, 0, 0});
    intent.multicast_groups.push_back(core::MulticastGroupIntent{group, job, {1, 2, 3}});
  }
  return intent;
}

int64_t EntityCount(const core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// The canonical fingerprints of everything INAC owns on the switch, sorted.
std::vector<std::string> SwitchState(SwitchSession& session, const IntentTranslator& t) {
  auto read = session.Read(t.OwnedStateFilters());
  EXPECT_TRUE(read.ok()) << read.status();
  std::vector<std::string> out;
  if (!read.ok()) return out;
  for (const auto& e : *read) {
    auto canonical = southbound::CanonicalEntity(e);
    EXPECT_TRUE(canonical.ok()) << canonical.status();
    if (canonical.ok()) out.push_back(southbound::EntityFingerprint(*canonical));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> IntentState(const core::SwitchIntent& intent, const IntentTranslator& t) {
  std::vector<std::string> out;
  auto entities = t.Translate(intent);
  EXPECT_TRUE(entities.ok()) << entities.status();
  if (!entities.ok()) return out;
  for (const auto& e : *entities) out.push_back(southbound::EntityFingerprint(e));
  std::sort(out.begin(), out.end());
  return out;
}

p4::v1::Update MakeUpdate(p4::v1::Update::Type type, p4::v1::Entity entity) {
  p4::v1::Update update;
  update.set_type(type);
  *update.mutable_entity() = std::move(entity);
  return update;
}

// INSERT updates for every entity of `intent`.
std::vector<p4::v1::Update> Inserts(const IntentTranslator& t, const core::SwitchIntent& intent) {
  std::vector<p4::v1::Update> updates;
  auto entities = t.Translate(intent);
  EXPECT_TRUE(entities.ok()) << entities.status();
  if (!entities.ok()) return updates;
  for (auto& e : *entities) updates.push_back(MakeUpdate(p4::v1::Update::INSERT, std::move(e)));
  return updates;
}

// A raw P4Runtime stub, to see exactly what BMv2 answers (codes, details).
std::unique_ptr<p4::v1::P4Runtime::Stub> RawStub(const std::string& address) {
  return p4::v1::P4Runtime::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::chrono::system_clock::time_point RpcDeadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(20);
}

std::string CodeName(grpc::StatusCode code) {
  return google::rpc::Code_Name(static_cast<google::rpc::Code>(code));
}

void Bmv2Test::SetUp() {
  auto binary = FindBmv2();
  if (!binary) {
    GTEST_SKIP() << "BMv2 simple_switch_grpc not found; searched " << Bmv2SearchDescription()
                 << ". Set INAC_BMV2 to the binary or its folder to run the interop tests.";
  }
  binary_ = *binary;
  json_ = InaBmv2Json();
  ASSERT_FALSE(json_.empty()) << "cannot read api/p4/ina.json";
  dir_ = systest::MakeTempDir("interop");
  ASSERT_FALSE(dir_.empty());
  Bmv2Options options;
  options.binary = binary_;
  options.device_id = kDevice;
  options.dir = dir_;
  options.name = "bmv2";
  auto sw = Bmv2Switch::Start(options);
  ASSERT_TRUE(sw.ok()) << sw.status();
  sw_ = std::move(*sw);
}

void Bmv2Test::TearDown() {
  clients_.clear();
  sessions_.clear();
  observer_ = nullptr;
  const bool failed = HasFailure();
  if (failed && sw_) std::printf("%s\n", sw_->Logs().c_str());
  sw_.reset();
  if (dir_.empty()) return;
  if (failed) {
    std::printf("[ info ] logs kept in %s\n", dir_.c_str());
  } else {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

SessionOptions Bmv2Test::Session(ElectionId id) const {
  SessionOptions options;
  options.address = sw_->address();
  options.device_id = kDevice;
  options.election_id = id;
  options.backoff = BackoffPolicy{absl::Milliseconds(5), absl::Milliseconds(100), 2.0, 0.2};
  options.rpc_timeout = absl::Seconds(30);
  return options;
}

SwitchSession* Bmv2Test::NewSession(ElectionId id, bool claim_primary_when_vacant) {
  SessionOptions options = Session(id);
  options.claim_primary_when_vacant = claim_primary_when_vacant;
  sessions_.push_back(std::make_unique<SwitchSession>(options));
  return sessions_.back().get();
}

P4RuntimeSwitchClient* Bmv2Test::NewClient(ElectionId id) {
  P4RuntimeSwitchClientOptions options;
  options.switch_id = "leaf1";
  options.session = Session(id);
  options.device_config = json_;
  auto client = P4RuntimeSwitchClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  clients_.push_back(std::move(*client));
  return clients_.back().get();
}

P4RuntimeSwitchClient* Bmv2Test::ReadyClient(ElectionId id) {
  P4RuntimeSwitchClient* client = NewClient(id);
  if (client == nullptr) return nullptr;
  absl::Status connected = client->Connect();
  EXPECT_TRUE(connected.ok()) << connected;
  EXPECT_TRUE(client->AwaitPrimary(kWait));
  auto pushed = client->EnsurePipeline();
  EXPECT_TRUE(pushed.ok()) << pushed.status();
  return client;
}

std::vector<std::string> Bmv2Test::Observed() {
  if (observer_ == nullptr) observer_ = NewSession({0, 1});
  return SwitchState(*observer_, translator_);
}

}  // namespace inac::interop
