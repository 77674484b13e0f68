// The emulated switch over loopback, driven with the raw generated P4Runtime stubs (not the
// southbound client, so that the two are checked independently against the specification).
#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "southbound/emulator/emulated_switch.h"

namespace inac::southbound::emulator {
namespace {

using p4::v1::P4Runtime;
using p4::v1::Update;

constexpr uint64_t kDevice = 7;
constexpr uint32_t kInaJob = 0x02000001;
constexpr uint32_t kInaWorker = 0x02000002;
constexpr uint32_t kInaRoute = 0x02000003;
constexpr uint32_t kIpv4Forward = 0x02000004;
constexpr uint32_t kInaLive = 0x02000006;
constexpr uint32_t kSetJob = 0x01000001;
constexpr uint32_t kSetInput = 0x01000002;
constexpr uint32_t kForward = 0x01000003;
constexpr uint32_t kDrop = 0x01000005;
constexpr uint32_t kOccupantLive = 0x01000010;
constexpr uint32_t kJobAggregated = 0x12000001;
constexpr uint32_t kJobFallback = 0x12000003;

p4::config::v1::P4Info InaP4Info() {
  std::ifstream in(std::string(INAC_P4_DIR) + "/ina.p4info.txtpb");
  std::stringstream ss;
  ss << in.rdbuf();
  p4::config::v1::P4Info info;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(ss.str(), &info));
  return info;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

std::string Be32(uint32_t v) {
  return Bytes({static_cast<int>(v >> 24), static_cast<int>((v >> 16) & 0xFF),
                static_cast<int>((v >> 8) & 0xFF), static_cast<int>(v & 0xFF)});
}

// ina_worker entry (tag, source) -> set_input(index); values as given (possibly non-canonical).
p4::v1::TableEntry WorkerEntry(const std::string& tag, const std::string& src,
                               const std::string& index) {
  p4::v1::TableEntry e;
  e.set_table_id(kInaWorker);
  auto* m1 = e.add_match();
  m1->set_field_id(1);
  m1->mutable_exact()->set_value(tag);
  auto* m2 = e.add_match();
  m2->set_field_id(2);
  m2->mutable_exact()->set_value(src);
  auto* a = e.mutable_action()->mutable_action();
  a->set_action_id(kSetInput);
  auto* p = a->add_params();
  p->set_param_id(1);
  p->set_value(index);
  return e;
}

p4::v1::TableEntry Worker(uint32_t tag, uint32_t src, int index) {
  return WorkerEntry(Be32(tag), Be32(src), Bytes({index}));
}

p4::v1::TableEntry LpmRoute(uint32_t dst, int prefix_len, int port) {
  p4::v1::TableEntry e;
  e.set_table_id(kIpv4Forward);
  auto* m = e.add_match();
  m->set_field_id(1);
  m->mutable_lpm()->set_value(Be32(dst));
  m->mutable_lpm()->set_prefix_len(prefix_len);
  auto* a = e.mutable_action()->mutable_action();
  a->set_action_id(kForward);
  auto* p = a->add_params();
  p->set_param_id(1);
  p->set_value(Bytes({port >> 8, port & 0xFF}));
  return e;
}

Update MakeUpdate(Update::Type type, const p4::v1::TableEntry& e) {
  Update u;
  u.set_type(type);
  *u.mutable_entity()->mutable_table_entry() = e;
  return u;
}

Update GroupUpdate(Update::Type type, uint32_t id, const std::vector<int>& ports) {
  Update u;
  u.set_type(type);
  auto* g = u.mutable_entity()
                ->mutable_packet_replication_engine_entry()
                ->mutable_multicast_group_entry();
  g->set_multicast_group_id(id);
  for (int port : ports) {
    auto* r = g->add_replicas();
    r->set_port(Bytes({port}));
    r->set_instance(1);
  }
  return u;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  // A hang guard only: no test waits for this deadline.
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return ctx;
}

// One controller's StreamChannel.
class Session {
 public:
  Session(P4Runtime::Stub* stub, uint64_t election_id, uint64_t device_id = kDevice)
      : stub_(stub), election_id_(election_id), device_id_(device_id), ctx_(Context()) {
    stream_ = stub_->StreamChannel(ctx_.get());
  }
  ~Session() { Drop(); }

  void Arbitrate() { Arbitrate(election_id_); }
  void Arbitrate(uint64_t election_id) {
    election_id_ = election_id;
    p4::v1::StreamMessageRequest req;
    auto* a = req.mutable_arbitration();
    a->set_device_id(device_id_);
    a->mutable_election_id()->set_low(election_id_);
    ASSERT_TRUE(stream_->Write(req));
  }
  // Next arbitration answer; code -1 when the stream ended.
  p4::v1::MasterArbitrationUpdate Next() {
    p4::v1::StreamMessageResponse resp;
    if (!stream_->Read(&resp)) {
      p4::v1::MasterArbitrationUpdate ended;
      ended.mutable_status()->set_code(-1);
      return ended;
    }
    return resp.arbitration();
  }
  int NextCode() { return Next().status().code(); }
  grpc::Status Finish() {
    dropped_ = true;
    return stream_->Finish();
  }
  void Drop() {
    if (!dropped_) {
      ctx_->TryCancel();
      stream_->Finish();
      dropped_ = true;
    }
  }
  uint64_t election_id() const { return election_id_; }

 private:
  P4Runtime::Stub* stub_;
  uint64_t election_id_;
  uint64_t device_id_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<
      grpc::ClientReaderWriter<p4::v1::StreamMessageRequest, p4::v1::StreamMessageResponse>>
      stream_;
  bool dropped_ = false;
};

class EmulatorTest : public ::testing::Test {
 protected:
  void StartSwitch(bool with_pipeline, Bmv2Deviations deviations = {},
                   std::optional<p4::config::v1::P4Info> p4info = std::nullopt) {
    EmulatedSwitchOptions options;
    options.device_id = kDevice;
    options.deviations = deviations;
    if (with_pipeline) options.p4info = p4info.has_value() ? *p4info : InaP4Info();
    auto sw = EmulatedSwitch::Start(options);
    ASSERT_TRUE(sw.ok()) << sw.status();
    switch_ = std::move(*sw);
    ASSERT_GT(switch_->port(), 0);
    channel_ = grpc::CreateChannel(switch_->address(), grpc::InsecureChannelCredentials());
    stub_ = P4Runtime::NewStub(channel_);
  }

  // Becomes primary with `election_id` (kept open for the test).
  void BecomePrimary(uint64_t election_id = 100) {
    primary_ = std::make_unique<Session>(stub_.get(), election_id);
    primary_->Arbitrate();
    ASSERT_EQ(primary_->NextCode(), google::rpc::OK);
  }

  grpc::Status Write(
      const std::vector<Update>& updates, uint64_t election_id = 100, uint64_t device_id = kDevice,
      p4::v1::WriteRequest::Atomicity atomicity = p4::v1::WriteRequest::CONTINUE_ON_ERROR) {
    p4::v1::WriteRequest req;
    req.set_device_id(device_id);
    req.mutable_election_id()->set_low(election_id);
    req.set_atomicity(atomicity);
    for (const Update& u : updates) *req.add_updates() = u;
    p4::v1::WriteResponse resp;
    return stub_->Write(Context().get(), req, &resp);
  }

  // Entities read for one query; `status` receives the RPC status.
  std::vector<p4::v1::Entity> Read(const p4::v1::Entity& query, grpc::Status* status = nullptr,
                                   uint64_t device_id = kDevice) {
    p4::v1::ReadRequest req;
    req.set_device_id(device_id);
    *req.add_entities() = query;
    auto ctx = Context();
    auto reader = stub_->Read(ctx.get(), req);
    std::vector<p4::v1::Entity> out;
    p4::v1::ReadResponse resp;
    while (reader->Read(&resp)) {
      for (const auto& e : resp.entities()) out.push_back(e);
    }
    grpc::Status s = reader->Finish();
    if (status != nullptr) *status = s;
    return out;
  }

  std::vector<p4::v1::Entity> ReadTable(uint32_t table_id) {
    p4::v1::Entity q;
    q.mutable_table_entry()->set_table_id(table_id);
    grpc::Status s;
    auto out = Read(q, &s);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  grpc::Status SetPipeline(p4::v1::SetForwardingPipelineConfigRequest::Action action,
                           std::optional<uint64_t> cookie, bool with_config = true,
                           uint64_t election_id = 100) {
    p4::v1::SetForwardingPipelineConfigRequest req;
    req.set_device_id(kDevice);
    req.mutable_election_id()->set_low(election_id);
    req.set_action(action);
    if (with_config) {
      *req.mutable_config()->mutable_p4info() = InaP4Info();
      req.mutable_config()->set_p4_device_config("bmv2 json");
      if (cookie.has_value()) req.mutable_config()->mutable_cookie()->set_cookie(*cookie);
    }
    p4::v1::SetForwardingPipelineConfigResponse resp;
    return stub_->SetForwardingPipelineConfig(Context().get(), req, &resp);
  }

  grpc::Status GetPipeline(p4::v1::GetForwardingPipelineConfigRequest::ResponseType type,
                           p4::v1::ForwardingPipelineConfig* config) {
    p4::v1::GetForwardingPipelineConfigRequest req;
    req.set_device_id(kDevice);
    req.set_response_type(type);
    p4::v1::GetForwardingPipelineConfigResponse resp;
    grpc::Status s = stub_->GetForwardingPipelineConfig(Context().get(), req, &resp);
    *config = resp.config();
    return s;
  }

  std::unique_ptr<EmulatedSwitch> switch_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<P4Runtime::Stub> stub_;
  std::unique_ptr<Session> primary_;
};

// The per-update errors of a failed Write (P4Runtime spec v1.3, section 12.3).
std::vector<p4::v1::Error> UpdateErrors(const grpc::Status& status) {
  google::rpc::Status details;
  EXPECT_TRUE(details.ParseFromString(status.error_details()));
  EXPECT_EQ(details.code(), google::rpc::UNKNOWN);
  std::vector<p4::v1::Error> out;
  for (const auto& any : details.details()) {
    p4::v1::Error e;
    EXPECT_TRUE(any.UnpackTo(&e));
    out.push_back(e);
  }
  return out;
}

// --- Arbitration ---

TEST_F(EmulatorTest, HigherElectionIdWritesLowerIsRefused) {
  StartSwitch(true);
  Session high(stub_.get(), 10);
  high.Arbitrate();
  EXPECT_EQ(high.NextCode(), google::rpc::OK);
  Session low(stub_.get(), 5);
  low.Arbitrate();
  p4::v1::MasterArbitrationUpdate answer = low.Next();
  EXPECT_EQ(answer.status().code(), google::rpc::ALREADY_EXISTS);
  EXPECT_EQ(answer.election_id().low(), 10u);  // the highest election id seen

  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 5).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 11).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 10).ok());
  EXPECT_EQ(ReadTable(kInaWorker).size(), 1u);
}

TEST_F(EmulatorTest, PrimaryDropsAndBackupBecomesPrimaryAfterReArbitration) {
  StartSwitch(true);
  Session primary(stub_.get(), 10);
  primary.Arbitrate();
  ASSERT_EQ(primary.NextCode(), google::rpc::OK);
  Session backup(stub_.get(), 5);
  backup.Arbitrate();
  ASSERT_EQ(backup.NextCode(), google::rpc::ALREADY_EXISTS);

  primary.Drop();
  // Every remaining client hears that there is no primary; nobody may write.
  p4::v1::MasterArbitrationUpdate vacant = backup.Next();
  EXPECT_EQ(vacant.status().code(), google::rpc::NOT_FOUND);
  EXPECT_EQ(vacant.election_id().low(), 10u);  // the highest id ever accepted
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 5).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 10).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Re-sending a lower id does not make a primary (the switch does not promote on its own) ...
  backup.Arbitrate(5);
  EXPECT_EQ(backup.NextCode(), google::rpc::NOT_FOUND);
  // ... an id at least the old primary's does.
  backup.Arbitrate(11);
  EXPECT_EQ(backup.NextCode(), google::rpc::OK);
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 5).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 11).ok());

  // The old primary comes back with its old id: it is now a backup.
  Session returning(stub_.get(), 10);
  returning.Arbitrate();
  EXPECT_EQ(returning.NextCode(), google::rpc::ALREADY_EXISTS);
}

TEST_F(EmulatorTest, AReconnectingPrimaryKeepsItsRole) {
  StartSwitch(true);
  Session first(stub_.get(), 10);
  first.Arbitrate();
  ASSERT_EQ(first.NextCode(), google::rpc::OK);
  first.Drop();
  // The same controller reconnects with the same id (>= the highest accepted): primary again.
  // The client's cancel reaches the switch asynchronously; until the switch has seen the old
  // stream end, the id is still taken and the new stream is closed with INVALID_ARGUMENT
  // (DuplicateElectionIdClosesTheStream), so a reconnecting client retries, as SwitchSession does.
  int code = -1;
  std::unique_ptr<Session> again;
  for (int attempt = 0; attempt < 500 && code != google::rpc::OK; ++attempt) {
    again = std::make_unique<Session>(stub_.get(), 10);
    again->Arbitrate();
    code = again->NextCode();
    if (code == -1) {
      EXPECT_EQ(again->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(code, google::rpc::OK);
  EXPECT_TRUE(Write({}, 10).ok());
}

TEST_F(EmulatorTest, AHigherClientTakesOverAndEveryoneIsTold) {
  StartSwitch(true);
  Session first(stub_.get(), 5);
  first.Arbitrate();
  ASSERT_EQ(first.NextCode(), google::rpc::OK);
  Session second(stub_.get(), 9);
  second.Arbitrate();
  EXPECT_EQ(second.NextCode(), google::rpc::OK);
  p4::v1::MasterArbitrationUpdate demoted = first.Next();
  EXPECT_EQ(demoted.status().code(), google::rpc::ALREADY_EXISTS);
  EXPECT_EQ(demoted.election_id().low(), 9u);
  EXPECT_EQ(Write({}, 5).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Write({}, 9).ok());
}

TEST_F(EmulatorTest, DuplicateElectionIdClosesTheStream) {
  StartSwitch(true);
  Session a(stub_.get(), 10);
  a.Arbitrate();
  ASSERT_EQ(a.NextCode(), google::rpc::OK);
  Session b(stub_.get(), 10);
  b.Arbitrate();
  EXPECT_EQ(b.NextCode(), -1);
  EXPECT_EQ(b.Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Write({}, 10).ok());  // the first client is still primary
}

TEST_F(EmulatorTest, WrongDeviceOnTheStreamIsNotFound) {
  StartSwitch(true);
  Session s(stub_.get(), 10, /*device_id=*/8);
  s.Arbitrate();
  EXPECT_EQ(s.NextCode(), -1);
  EXPECT_EQ(s.Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(EmulatorTest, Bmv2DeviationPromotesTheBackupAtOnce) {
  Bmv2Deviations deviations;
  deviations.promote_backup_immediately = true;
  StartSwitch(true, deviations);
  Session primary(stub_.get(), 10);
  primary.Arbitrate();
  ASSERT_EQ(primary.NextCode(), google::rpc::OK);
  Session backup(stub_.get(), 5);
  backup.Arbitrate();
  ASSERT_EQ(backup.NextCode(), google::rpc::ALREADY_EXISTS);
  primary.Drop();
  EXPECT_EQ(backup.NextCode(), google::rpc::OK);
  EXPECT_TRUE(Write({}, 5).ok());
}

TEST_F(EmulatorTest, NoClientNoWrite) {
  StartSwitch(true);
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// --- Write ---

TEST_F(EmulatorTest, OneFailingUpdateReportsExactlyItsErrorAndOthersApply) {
  StartSwitch(true);
  BecomePrimary();
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).ok());
  grpc::Status s = Write({MakeUpdate(Update::INSERT, Worker(8, 2, 1)),
                          MakeUpdate(Update::INSERT, Worker(8, 1, 5)),  // key exists
                          MakeUpdate(Update::INSERT, Worker(8, 3, 2))});
  ASSERT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN);
  std::vector<p4::v1::Error> errors = UpdateErrors(s);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].canonical_code(), google::rpc::OK);
  EXPECT_EQ(errors[1].canonical_code(), google::rpc::ALREADY_EXISTS);
  EXPECT_EQ(errors[2].canonical_code(), google::rpc::OK);
  EXPECT_EQ(ReadTable(kInaWorker).size(), 3u);
  EXPECT_EQ(switch_->NumTableEntries(), 3);
}

TEST_F(EmulatorTest, ModifyAndDeleteNeedAnExistingEntry) {
  StartSwitch(true);
  BecomePrimary();
  grpc::Status s = Write(
      {MakeUpdate(Update::MODIFY, Worker(8, 1, 0)), MakeUpdate(Update::DELETE, Worker(8, 1, 0))});
  std::vector<p4::v1::Error> errors = UpdateErrors(s);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].canonical_code(), google::rpc::NOT_FOUND);
  EXPECT_EQ(errors[1].canonical_code(), google::rpc::NOT_FOUND);

  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).ok());
  ASSERT_TRUE(Write({MakeUpdate(Update::MODIFY, Worker(8, 1, 3))}).ok());
  auto entries = ReadTable(kInaWorker);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].table_entry().action().action().params(0).value(), Bytes({3}));
  // DELETE needs only the key.
  p4::v1::TableEntry key = Worker(8, 1, 0);
  key.clear_action();
  ASSERT_TRUE(Write({MakeUpdate(Update::DELETE, key)}).ok());
  EXPECT_TRUE(ReadTable(kInaWorker).empty());
}

TEST_F(EmulatorTest, BadInputGetsInvalidArgument) {
  StartSwitch(true);
  BecomePrimary();
  p4::v1::TableEntry unknown_table = Worker(8, 1, 0);
  unknown_table.set_table_id(0x02000099);
  p4::v1::TableEntry too_wide = WorkerEntry(Bytes({1, 0, 0, 0, 8}), Be32(1), Bytes({0}));
  p4::v1::TableEntry wide_param = LpmRoute(0x0A000000, 8, 512);  // port is bit<9>
  p4::v1::TableEntry lpm_bits = LpmRoute(0x0A000001, 8, 1);      // bits beyond the prefix
  p4::v1::TableEntry wrong_action = Worker(8, 1, 0);
  wrong_action.mutable_action()->mutable_action()->set_action_id(kDrop);
  p4::v1::TableEntry missing_field = Worker(8, 1, 0);
  missing_field.mutable_match()->RemoveLast();
  p4::v1::TableEntry missing_param = Worker(8, 1, 0);
  missing_param.mutable_action()->mutable_action()->clear_params();
  p4::v1::TableEntry empty_value = WorkerEntry("", Be32(1), Bytes({0}));
  p4::v1::TableEntry no_action = Worker(8, 1, 0);
  no_action.clear_action();
  Update no_entity;
  no_entity.set_type(Update::INSERT);
  grpc::Status s =
      Write({MakeUpdate(Update::INSERT, unknown_table), MakeUpdate(Update::INSERT, too_wide),
             MakeUpdate(Update::INSERT, wide_param), MakeUpdate(Update::INSERT, lpm_bits),
             MakeUpdate(Update::INSERT, wrong_action), MakeUpdate(Update::INSERT, missing_field),
             MakeUpdate(Update::INSERT, missing_param), MakeUpdate(Update::INSERT, empty_value),
             MakeUpdate(Update::INSERT, no_action), no_entity});
  ASSERT_EQ(s.error_code(), grpc::StatusCode::UNKNOWN);
  std::vector<p4::v1::Error> errors = UpdateErrors(s);
  ASSERT_EQ(errors.size(), 10u);
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_EQ(errors[i].canonical_code(), google::rpc::INVALID_ARGUMENT)
        << "update " << i << ": " << errors[i].message();
    EXPECT_FALSE(errors[i].message().empty());
  }
  EXPECT_EQ(switch_->NumTableEntries(), 0);

  // Request-level problems.
  EXPECT_EQ(Write({}, 100, /*device_id=*/0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Write({}, 100, /*device_id=*/99).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Write({}, 100, kDevice, p4::v1::WriteRequest::ROLLBACK_ON_ERROR).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  grpc::Status rs;
  p4::v1::Entity q;
  q.mutable_table_entry()->set_table_id(0x02000099);
  Read(q, &rs);
  EXPECT_EQ(rs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  q.mutable_table_entry()->set_table_id(kInaWorker);
  Read(q, &rs, /*device_id=*/0);
  EXPECT_EQ(rs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(EmulatorTest, ValuesAreStoredCanonical) {
  StartSwitch(true);
  BecomePrimary();
  // Padded (non-canonical) strings are accepted when the value fits, and read back canonical.
  p4::v1::TableEntry padded = WorkerEntry(Bytes({0, 0, 0, 8}), Bytes({0, 0, 0, 0, 1}), Bytes({0}));
  padded.set_metadata("job=1");
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, padded)}).ok());
  auto entries = ReadTable(kInaWorker);
  ASSERT_EQ(entries.size(), 1u);
  const p4::v1::TableEntry& e = entries[0].table_entry();
  EXPECT_EQ(e.match(0).exact().value(), Bytes({8}));
  EXPECT_EQ(e.match(1).exact().value(), Bytes({1}));
  EXPECT_EQ(e.action().action().params(0).value(), Bytes({0}));
  EXPECT_EQ(e.metadata(), "job=1");
  // The same key in canonical form is the same entry.
  grpc::Status s =
      Write({MakeUpdate(Update::INSERT, WorkerEntry(Bytes({8}), Bytes({1}), Bytes({2})))});
  EXPECT_EQ(UpdateErrors(s).at(0).canonical_code(), google::rpc::ALREADY_EXISTS);
}

TEST_F(EmulatorTest, FullTableIsResourceExhausted) {
  p4::config::v1::P4Info info = InaP4Info();
  for (auto& t : *info.mutable_tables()) {
    if (t.preamble().id() == kInaWorker) t.set_size(2);
  }
  StartSwitch(true, {}, info);
  BecomePrimary();
  grpc::Status s = Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0)),
                          MakeUpdate(Update::INSERT, Worker(8, 2, 1)),
                          MakeUpdate(Update::INSERT, Worker(8, 3, 2))});
  std::vector<p4::v1::Error> errors = UpdateErrors(s);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[2].canonical_code(), google::rpc::RESOURCE_EXHAUSTED);
  // Room again after a delete.
  ASSERT_TRUE(Write({MakeUpdate(Update::DELETE, Worker(8, 1, 0)),
                     MakeUpdate(Update::INSERT, Worker(8, 3, 2))})
                  .ok());
}

TEST_F(EmulatorTest, NoPipelineIsFailedPrecondition) {
  StartSwitch(false);
  BecomePrimary();
  EXPECT_EQ(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  grpc::Status s;
  p4::v1::Entity q;
  q.mutable_table_entry();
  Read(q, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// --- Read ---

TEST_F(EmulatorTest, WildcardReads) {
  StartSwitch(true);
  BecomePrimary();
  p4::v1::TableEntry job;
  job.set_table_id(kInaJob);
  auto* m = job.add_match();
  m->set_field_id(1);
  m->mutable_exact()->set_value(Bytes({8}));
  auto* a = job.mutable_action()->mutable_action();
  a->set_action_id(kSetJob);
  std::vector<std::string> values = {
      Bytes({2}),       Bytes({3}),       Bytes({0, 9}),
      Bytes({0}),       Bytes({16}),      Bytes({0xFF, 0xFF, 0xFF, 0xFF}),
      Be32(0x0A000001), Be32(0x0AFF0001), Bytes({0})};
  for (size_t i = 0; i < values.size(); ++i) {
    auto* p = a->add_params();
    p->set_param_id(static_cast<uint32_t>(i + 1));
    p->set_value(values[i]);
  }
  job.set_metadata("1");
  // The tag's ina_live entry: occupant_live, no parameters.
  p4::v1::TableEntry live;
  live.set_table_id(kInaLive);
  auto* occupant = live.add_match();
  occupant->set_field_id(1);
  occupant->mutable_exact()->set_value(Bytes({8}));
  live.mutable_action()->mutable_action()->set_action_id(kOccupantLive);
  live.set_metadata("1");
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, job), MakeUpdate(Update::INSERT, live),
                     MakeUpdate(Update::INSERT, Worker(8, 1, 0)),
                     MakeUpdate(Update::INSERT, Worker(8, 2, 1)),
                     MakeUpdate(Update::INSERT, LpmRoute(0x0A000000, 8, 3))})
                  .ok());
  // All tables.
  p4::v1::Entity all;
  all.mutable_table_entry();
  grpc::Status s;
  EXPECT_EQ(Read(all, &s).size(), 5u);
  EXPECT_TRUE(s.ok());
  // One table; one entry by key; an absent key reads nothing.
  EXPECT_EQ(ReadTable(kInaWorker).size(), 2u);
  EXPECT_TRUE(ReadTable(kInaRoute).empty());
  p4::v1::Entity one;
  *one.mutable_table_entry() = Worker(8, 2, 0);
  one.mutable_table_entry()->clear_action();
  auto got = Read(one, &s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].table_entry().action().action().params(0).value(), Bytes({1}));
  *one.mutable_table_entry() = Worker(8, 9, 0);
  EXPECT_TRUE(Read(one, &s).empty());
  // The per-job entry comes back with its metadata and canonical params.
  auto jobs = ReadTable(kInaJob);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].table_entry().metadata(), "1");
  EXPECT_EQ(jobs[0].table_entry().action().action().params(2).value(), Bytes({9}));
  EXPECT_EQ(jobs[0].table_entry().action().action().params_size(), 9);
  auto lives = ReadTable(kInaLive);
  ASSERT_EQ(lives.size(), 1u);
  EXPECT_EQ(lives[0].table_entry().action().action().action_id(), kOccupantLive);
  EXPECT_EQ(lives[0].table_entry().action().action().params_size(), 0);
}

TEST_F(EmulatorTest, MulticastGroups) {
  StartSwitch(true);
  BecomePrimary();
  ASSERT_TRUE(
      Write({GroupUpdate(Update::INSERT, 9, {1, 2}), GroupUpdate(Update::INSERT, 3, {4})}).ok());
  p4::v1::Entity all;
  all.mutable_packet_replication_engine_entry()->mutable_multicast_group_entry();
  grpc::Status s;
  auto groups = Read(all, &s);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(
      groups[0].packet_replication_engine_entry().multicast_group_entry().multicast_group_id(), 3u);
  EXPECT_EQ(groups[1].packet_replication_engine_entry().multicast_group_entry().replicas_size(), 2);

  grpc::Status w =
      Write({GroupUpdate(Update::INSERT, 9, {1}), GroupUpdate(Update::MODIFY, 5, {1}),
             GroupUpdate(Update::INSERT, 0, {1}), GroupUpdate(Update::INSERT, 6, {1, 1}),
             GroupUpdate(Update::MODIFY, 9, {7})});
  std::vector<p4::v1::Error> errors = UpdateErrors(w);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[0].canonical_code(), google::rpc::ALREADY_EXISTS);
  EXPECT_EQ(errors[1].canonical_code(), google::rpc::NOT_FOUND);
  EXPECT_EQ(errors[2].canonical_code(), google::rpc::INVALID_ARGUMENT);
  EXPECT_EQ(errors[3].canonical_code(), google::rpc::INVALID_ARGUMENT);  // duplicate replica
  EXPECT_EQ(errors[4].canonical_code(), google::rpc::OK);

  p4::v1::Entity one = all;
  one.mutable_packet_replication_engine_entry()
      ->mutable_multicast_group_entry()
      ->set_multicast_group_id(9);
  auto g9 = Read(one, &s);
  ASSERT_EQ(g9.size(), 1u);
  const auto& replicas = g9[0].packet_replication_engine_entry().multicast_group_entry().replicas();
  ASSERT_EQ(replicas.size(), 1);
  EXPECT_EQ(replicas[0].port(), Bytes({7}));

  ASSERT_TRUE(Write({GroupUpdate(Update::DELETE, 9, {})}).ok());
  EXPECT_EQ(Read(all, &s).size(), 1u);
}

TEST_F(EmulatorTest, Counters) {
  StartSwitch(true);
  BecomePrimary();
  p4::v1::Entity q;
  q.mutable_counter_entry()->set_counter_id(kJobAggregated);
  grpc::Status s;
  auto cells = Read(q, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(cells.size(), 65536u);
  EXPECT_EQ(cells[42].counter_entry().index().index(), 42);
  EXPECT_EQ(cells[42].counter_entry().data().packet_count(), 0);

  Update u;
  u.set_type(Update::MODIFY);
  auto* c = u.mutable_entity()->mutable_counter_entry();
  c->set_counter_id(kJobFallback);
  c->mutable_index()->set_index(5);
  c->mutable_data()->set_packet_count(17);
  ASSERT_TRUE(Write({u}).ok());
  p4::v1::Entity cell;
  cell.mutable_counter_entry()->set_counter_id(kJobFallback);
  cell.mutable_counter_entry()->mutable_index()->set_index(5);
  auto one = Read(cell, &s);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].counter_entry().data().packet_count(), 17);

  // All counters: three arrays of 65536 cells.
  p4::v1::Entity every;
  every.mutable_counter_entry();
  EXPECT_EQ(Read(every, &s).size(), 3u * 65536u);

  Update insert = u;
  insert.set_type(Update::INSERT);
  Update out_of_range = u;
  out_of_range.mutable_entity()->mutable_counter_entry()->mutable_index()->set_index(65536);
  std::vector<p4::v1::Error> errors = UpdateErrors(Write({insert, out_of_range}));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].canonical_code(), google::rpc::INVALID_ARGUMENT);
  EXPECT_EQ(errors[1].canonical_code(), google::rpc::INVALID_ARGUMENT);

  // Registers are data-plane state.
  p4::v1::Entity reg;
  reg.mutable_register_entry()->set_register_id(0x16000001);
  Read(reg, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// --- Pipeline ---

TEST_F(EmulatorTest, PipelineCookieSemantics) {
  using Set = p4::v1::SetForwardingPipelineConfigRequest;
  using Get = p4::v1::GetForwardingPipelineConfigRequest;
  StartSwitch(false);
  p4::v1::ForwardingPipelineConfig config;
  ASSERT_TRUE(GetPipeline(Get::ALL, &config).ok());
  EXPECT_FALSE(config.has_cookie());
  EXPECT_FALSE(config.has_p4info());

  // Only the primary sets a pipeline.
  EXPECT_EQ(SetPipeline(Set::VERIFY_AND_COMMIT, 42).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  BecomePrimary();
  ASSERT_TRUE(SetPipeline(Set::VERIFY_AND_COMMIT, 42).ok());
  ASSERT_TRUE(GetPipeline(Get::COOKIE_ONLY, &config).ok());
  EXPECT_EQ(config.cookie().cookie(), 42u);
  EXPECT_FALSE(config.has_p4info());
  EXPECT_TRUE(config.p4_device_config().empty());
  ASSERT_TRUE(GetPipeline(Get::P4INFO_AND_COOKIE, &config).ok());
  EXPECT_EQ(config.p4info().tables_size(), 6);
  EXPECT_TRUE(config.p4_device_config().empty());
  ASSERT_TRUE(GetPipeline(Get::DEVICE_CONFIG_AND_COOKIE, &config).ok());
  EXPECT_FALSE(config.has_p4info());
  EXPECT_EQ(config.p4_device_config(), "bmv2 json");
  ASSERT_TRUE(GetPipeline(Get::ALL, &config).ok());
  EXPECT_TRUE(config.has_p4info());
  EXPECT_EQ(config.cookie().cookie(), 42u);

  // VERIFY changes nothing; a broken P4Info is refused.
  ASSERT_TRUE(SetPipeline(Set::VERIFY, 7).ok());
  ASSERT_TRUE(GetPipeline(Get::COOKIE_ONLY, &config).ok());
  EXPECT_EQ(config.cookie().cookie(), 42u);
  EXPECT_EQ(SetPipeline(Set::VERIFY, 7, /*with_config=*/false).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(SetPipeline(Set::UNSPECIFIED, 7).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Committing a new config clears the forwarding state.
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).ok());
  ASSERT_EQ(switch_->NumTableEntries(), 1);
  ASSERT_TRUE(SetPipeline(Set::VERIFY_AND_COMMIT, 43).ok());
  EXPECT_EQ(switch_->NumTableEntries(), 0);

  // Save, then commit exactly once; COMMIT takes no config.
  EXPECT_EQ(SetPipeline(Set::COMMIT, std::nullopt, false).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(SetPipeline(Set::VERIFY_AND_SAVE, 44).ok());
  ASSERT_TRUE(GetPipeline(Get::COOKIE_ONLY, &config).ok());
  EXPECT_EQ(config.cookie().cookie(), 44u);
  EXPECT_EQ(SetPipeline(Set::COMMIT, 44, true).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(SetPipeline(Set::COMMIT, std::nullopt, false).ok());
  EXPECT_EQ(SetPipeline(Set::COMMIT, std::nullopt, false).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(SetPipeline(Set::RECONCILE_AND_COMMIT, 45).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // A config without a cookie reads back without one.
  ASSERT_TRUE(SetPipeline(Set::VERIFY_AND_COMMIT, std::nullopt).ok());
  ASSERT_TRUE(GetPipeline(Get::COOKIE_ONLY, &config).ok());
  EXPECT_FALSE(config.has_cookie());
}

TEST_F(EmulatorTest, BrokenP4InfoIsRefused) {
  StartSwitch(false);
  BecomePrimary();
  p4::v1::SetForwardingPipelineConfigRequest req;
  req.set_device_id(kDevice);
  req.mutable_election_id()->set_low(100);
  req.set_action(p4::v1::SetForwardingPipelineConfigRequest::VERIFY_AND_COMMIT);
  *req.mutable_config()->mutable_p4info() = InaP4Info();
  // A table id without the table prefix.
  req.mutable_config()->mutable_p4info()->mutable_tables(0)->mutable_preamble()->set_id(0x01000009);
  p4::v1::SetForwardingPipelineConfigResponse resp;
  EXPECT_EQ(stub_->SetForwardingPipelineConfig(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  p4::v1::ForwardingPipelineConfig config;
  ASSERT_TRUE(GetPipeline(p4::v1::GetForwardingPipelineConfigRequest::ALL, &config).ok());
  EXPECT_FALSE(config.has_p4info());
}

TEST_F(EmulatorTest, Bmv2DeviationGetWithoutPipelineFails) {
  Bmv2Deviations deviations;
  deviations.get_without_pipeline_fails = true;
  StartSwitch(false, deviations);
  p4::v1::ForwardingPipelineConfig config;
  EXPECT_EQ(
      GetPipeline(p4::v1::GetForwardingPipelineConfigRequest::COOKIE_ONLY, &config).error_code(),
      grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(EmulatorTest, Capabilities) {
  StartSwitch(false);
  p4::v1::CapabilitiesRequest req;
  p4::v1::CapabilitiesResponse resp;
  ASSERT_TRUE(stub_->Capabilities(Context().get(), req, &resp).ok());
  EXPECT_EQ(resp.p4runtime_api_version(), "1.3.0");
}

TEST_F(EmulatorTest, StateIsLostOnRestart) {
  StartSwitch(true);
  BecomePrimary();
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}).ok());
  primary_.reset();
  stub_.reset();
  channel_.reset();
  switch_.reset();
  StartSwitch(true);
  EXPECT_TRUE(ReadTable(kInaWorker).empty());
}

// --- Several devices behind one server (`inac switch --devices N`) ---

class MultiDeviceTest : public EmulatorTest {
 protected:
  static constexpr int kDevices = 4;  // ids kDevice .. kDevice + 3

  void StartDevices(const std::string& write_log = "") {
    EmulatedSwitchOptions options;
    options.device_id = kDevice;
    options.num_devices = kDevices;
    options.p4info = InaP4Info();
    options.write_log_path = write_log;
    auto sw = EmulatedSwitch::Start(options);
    ASSERT_TRUE(sw.ok()) << sw.status();
    switch_ = std::move(*sw);
    channel_ = grpc::CreateChannel(switch_->address(), grpc::InsecureChannelCredentials());
    stub_ = P4Runtime::NewStub(channel_);
  }
};

TEST_F(MultiDeviceTest, EachDeviceHasItsOwnArbitration) {
  StartDevices();
  EXPECT_EQ(switch_->device_id(), kDevice);
  EXPECT_EQ(switch_->num_devices(), kDevices);
  // The same election id is primary on two devices: arbitration is per device.
  Session a(stub_.get(), 10, kDevice);
  a.Arbitrate();
  EXPECT_EQ(a.NextCode(), google::rpc::OK);
  Session b(stub_.get(), 10, kDevice + 1);
  b.Arbitrate();
  p4::v1::MasterArbitrationUpdate answer = b.Next();
  EXPECT_EQ(answer.status().code(), google::rpc::OK);
  EXPECT_EQ(answer.device_id(), kDevice + 1);
  // A lower id on device kDevice + 1 is a backup there.
  Session c(stub_.get(), 5, kDevice + 1);
  c.Arbitrate();
  EXPECT_EQ(c.NextCode(), google::rpc::ALREADY_EXISTS);
  // Writes need the primary of the device they name; device kDevice + 2 has none.
  EXPECT_TRUE(Write({}, 10, kDevice).ok());
  EXPECT_TRUE(Write({}, 10, kDevice + 1).ok());
  EXPECT_EQ(Write({}, 5, kDevice + 1).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Write({}, 10, kDevice + 2).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(MultiDeviceTest, EachDeviceHasItsOwnState) {
  StartDevices();
  Session a(stub_.get(), 10, kDevice);
  a.Arbitrate();
  ASSERT_EQ(a.NextCode(), google::rpc::OK);
  Session d(stub_.get(), 10, kDevice + 3);
  d.Arbitrate();
  ASSERT_EQ(d.NextCode(), google::rpc::OK);
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0))}, 10, kDevice).ok());
  ASSERT_TRUE(Write({MakeUpdate(Update::INSERT, Worker(8, 1, 0)),
                     MakeUpdate(Update::INSERT, Worker(8, 2, 1))},
                    10, kDevice + 3)
                  .ok());
  p4::v1::Entity q;
  q.mutable_table_entry()->set_table_id(kInaWorker);
  grpc::Status s;
  EXPECT_EQ(Read(q, &s, kDevice).size(), 1u);
  EXPECT_EQ(Read(q, &s, kDevice + 1).size(), 0u);
  EXPECT_EQ(Read(q, &s, kDevice + 3).size(), 2u);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(switch_->NumTableEntries(kDevice), 1);
  EXPECT_EQ(switch_->NumTableEntries(kDevice + 3), 2);
  EXPECT_EQ(switch_->NumTableEntries(kDevice + kDevices), 0);
  EXPECT_EQ(switch_->NumTableEntries(), 3);
}

TEST_F(MultiDeviceTest, IdsOutsideTheRangeAreRefusedAsByOneDevice) {
  StartDevices();
  EXPECT_EQ(Write({}, 10, kDevice + kDevices).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Write({}, 10, kDevice - 1).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Write({}, 10, 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  p4::v1::Entity q;
  q.mutable_table_entry()->set_table_id(kInaWorker);
  grpc::Status s;
  Read(q, &s, kDevice + kDevices);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  Session out(stub_.get(), 10, kDevice + kDevices);
  out.Arbitrate();
  EXPECT_EQ(out.NextCode(), -1);
  EXPECT_EQ(out.Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(MultiDeviceTest, APrimaryLeavingOneDeviceLeavesTheOthersAlone) {
  StartDevices();
  auto a = std::make_unique<Session>(stub_.get(), 10, kDevice);
  a->Arbitrate();
  ASSERT_EQ(a->NextCode(), google::rpc::OK);
  Session backup(stub_.get(), 5, kDevice);
  backup.Arbitrate();
  ASSERT_EQ(backup.NextCode(), google::rpc::ALREADY_EXISTS);
  Session b(stub_.get(), 10, kDevice + 1);
  b.Arbitrate();
  ASSERT_EQ(b.NextCode(), google::rpc::OK);
  a.reset();  // device kDevice loses its primary; its backup is told
  EXPECT_EQ(backup.NextCode(), google::rpc::NOT_FOUND);
  EXPECT_EQ(Write({}, 10, kDevice).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Write({}, 10, kDevice + 1).ok());
}

TEST_F(MultiDeviceTest, EachDeviceWritesItsOwnLog) {
  std::string path = ::testing::TempDir() + "/multi_device_writes";
  for (int i = 0; i < kDevices; ++i) std::remove(absl::StrCat(path, ".", kDevice + i).c_str());
  StartDevices(path);
  Session a(stub_.get(), 10, kDevice + 2);
  a.Arbitrate();
  ASSERT_EQ(a.NextCode(), google::rpc::OK);
  ASSERT_TRUE(Write({}, 10, kDevice + 2).ok());
  EXPECT_EQ(Write({}, 9, kDevice + 2).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  switch_.reset();  // closes the files
  std::ifstream in(absl::StrCat(path, ".", kDevice + 2));
  std::string l1, l2;
  ASSERT_TRUE(std::getline(in, l1));
  ASSERT_TRUE(std::getline(in, l2));
  EXPECT_EQ(l1, "write election_id=0:10 result=0");
  EXPECT_EQ(l2, "write election_id=0:9 result=7");
  std::ifstream other(absl::StrCat(path, ".", kDevice));  // opened at start, nothing written
  std::string line;
  EXPECT_FALSE(std::getline(other, line));
}

TEST(MultiDeviceStartTest, NoDevicesIsInvalid) {
  EmulatedSwitchOptions options;
  options.num_devices = 0;
  EXPECT_EQ(EmulatedSwitch::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::southbound::emulator
