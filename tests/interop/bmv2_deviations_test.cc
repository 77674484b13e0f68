// Where BMv2 simple_switch_grpc (behavioral-model 1.15.5 with PI, ../shared/peers) deviates
// from the P4Runtime specification (docs/southbound.md, "Target deviations handled"), against a
// real process (tests/interop/bmv2_fixture.h), and how INAC's southbound client copes. Where BMv2
// and the specification disagree, the assertions state what BMv2 really answers (the target wins).
//
// Skipped when simple_switch_grpc is not found (tests/interop/peers.h says where it looks).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/intent_translator.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_session.h"
#include "tests/interop/bmv2_fixture.h"
#include "tests/interop/bmv2_switch.h"

namespace inac::interop {
namespace {

using southbound::ElectionId;
using southbound::P4RuntimeSwitchClient;
using southbound::SessionOptions;
using southbound::SwitchSession;

// --- BMv2's deviations from the specification ---

// Spec (section 5.4): when the primary's stream ends there is no primary until a controller
// arbitrates with an election id >= the old primary's. BMv2 (PI) promotes the backup with the
// highest election id at once and tells it so (arbitration status OK).
TEST_F(Bmv2Test, TheBackupIsPromotedAtOnceWhenThePrimaryStreamDrops) {
  SwitchSession* backup = NewSession({0, 10}, /*claim_primary_when_vacant=*/false);
  SwitchSession* primary = NewSession({0, 20});
  ASSERT_TRUE(primary->Connect().ok());
  ASSERT_TRUE(primary->AwaitPrimary(kWait));
  ASSERT_TRUE(backup->Connect().ok());
  EXPECT_FALSE(backup->IsPrimary());

  primary->Disconnect();
  // No re-arbitration (claim_primary_when_vacant is off): BMv2 itself makes it primary.
  ASSERT_TRUE(backup->AwaitPrimary(kWait)) << "BMv2 did not promote the backup";
  EXPECT_EQ(backup->state().election_id, (ElectionId{0, 10}));
  const auto& p4info = translator_.p4info().p4info();
  EXPECT_TRUE(backup->SetPipeline(p4info, json_, 7).ok());
}

// Only the primary may change the switch: a backup's SetForwardingPipelineConfig, Write and
// Reconcile are refused with PERMISSION_DENIED; reads need no arbitration.
TEST_F(Bmv2Test, OnlyThePrimaryWrites) {
  P4RuntimeSwitchClient* primary = ReadyClient({0, 100});
  ASSERT_NE(primary, nullptr);
  P4RuntimeSwitchClient* backup = NewClient({0, 50});
  ASSERT_TRUE(backup->Connect().ok());
  EXPECT_FALSE(backup->IsPrimary());

  const core::SwitchIntent intent = MakeIntent(2, 2);
  EXPECT_EQ(backup->Reconcile(intent).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(backup->EnsurePipeline().status().code(), absl::StatusCode::kOk)
      << "the cookie matches, so a backup's EnsurePipeline pushes nothing";
  EXPECT_FALSE(*backup->EnsurePipeline());

  SwitchSession* backup_session = NewSession({0, 60});
  ASSERT_TRUE(backup_session->Connect().ok());
  EXPECT_FALSE(backup_session->IsPrimary());
  const auto& p4info = translator_.p4info().p4info();
  EXPECT_EQ(backup_session->SetPipeline(p4info, json_, 99).code(),
            absl::StatusCode::kPermissionDenied);
  std::vector<p4::v1::Update> updates = Inserts(translator_, intent);
  EXPECT_EQ(backup_session->Write(updates).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Observed().empty());

  auto stats = primary->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  // The backups read what the primary wrote.
  EXPECT_EQ(SwitchState(*backup_session, translator_), IntentState(intent, translator_));
}

// A device id the switch does not have (a topology with a wrong device id). Spec: NOT_FOUND.
// BMv2 (PI) answers:
//  - Write (no stream for that id): PERMISSION_DENIED "Not primary";
//  - Read: FAILED_PRECONDITION "No forwarding pipeline config set for this device", the same as
//    an empty switch, so a reader cannot tell a wrong id from a switch without pipeline;
//  - arbitration on the stream: OK, primary (PI keeps arbitration state per device id, for any
//    id); Write and Read as that primary: FAILED_PRECONDITION (no pipeline);
//  - SetForwardingPipelineConfig: UNKNOWN "Error when trying to assign device" (BMv2 logs the
//    mismatch with its --device-id); the real device keeps its pipeline and entries;
//  - and then a Write for that device id crashes simple_switch_grpc (SIGSEGV) in the BMv2 1.15.5
//    / PI build measured here. INAC's controller does not get there (a failed pipeline push ends
//    the switch's pass before any Write), and the test only prints whether the process survived.
TEST_F(Bmv2Test, AWrongDeviceIdIsRefusedOrLooksLikeAnEmptySwitch) {
  P4RuntimeSwitchClient* client = ReadyClient({0, 100});
  ASSERT_NE(client, nullptr);
  const core::SwitchIntent intent = MakeIntent(1, 1);
  ASSERT_TRUE(client->Reconcile(intent).ok());
  const std::vector<std::string> held = Observed();
  auto stub = RawStub(sw_->address());

  p4::v1::WriteRequest write;
  write.set_device_id(kDevice + 1);
  write.mutable_election_id()->set_low(100);  // the primary's election id
  for (auto& u : Inserts(translator_, MakeIntent(2, 1))) *write.add_updates() = std::move(u);
  p4::v1::WriteResponse write_response;
  grpc::ClientContext write_context;
  write_context.set_deadline(RpcDeadline());
  grpc::Status status = stub->Write(&write_context, write, &write_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  p4::v1::ReadRequest read;
  read.set_device_id(kDevice + 1);
  read.add_entities()->mutable_table_entry()->set_table_id(translator_.job_table_id());
  grpc::ClientContext read_context;
  read_context.set_deadline(RpcDeadline());
  auto reader = stub->Read(&read_context, read);
  p4::v1::ReadResponse read_response;
  while (reader->Read(&read_response)) {
  }
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();

  SessionOptions wrong = Session({0, 300});
  wrong.device_id = kDevice + 1;
  SwitchSession stranger(wrong);
  absl::Status connect = stranger.Connect();
  EXPECT_TRUE(connect.ok()) << connect;
  EXPECT_TRUE(stranger.AwaitPrimary(kWait));
  EXPECT_TRUE(client->IsPrimary()) << "arbitration for another device id changed ours";
  // The whole batch is refused (top-level status, no per-update details).
  auto written = stranger.Write(Inserts(translator_, MakeIntent(2, 1)));
  EXPECT_EQ(written.status().code(), absl::StatusCode::kFailedPrecondition) << written.status();
  auto cookie = stranger.GetPipelineCookie();
  ASSERT_TRUE(cookie.ok()) << cookie.status();
  EXPECT_FALSE(cookie->has_value());

  absl::Status set = stranger.SetPipeline(translator_.p4info().p4info(), json_, 999);
  EXPECT_EQ(set.code(), absl::StatusCode::kUnknown) << set;
  SwitchSession* reader_session = NewSession({0, 2});
  auto real_cookie = reader_session->GetPipelineCookie();
  ASSERT_TRUE(real_cookie.ok()) << real_cookie.status();
  EXPECT_EQ(*real_cookie, std::optional<uint64_t>(client->cookie()));
  EXPECT_EQ(Observed(), held);

  // The crash (see above): printed, not asserted, so that a fixed BMv2 passes too.
  auto after = stranger.Write(Inserts(translator_, MakeIntent(2, 1)));
  stranger.Disconnect();
  bool died = false;
  if (!after.ok()) {
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (!(died = sw_->process()->Exited()) && absl::Now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::printf(
      "[ info ] Write for the wrong device id after its failed pipeline push: %s; "
      "simple_switch_grpc %s\n",
      after.ok() ? "answered" : after.status().ToString().c_str(), died ? "crashed" : "survived");
  EXPECT_TRUE(!after.ok() || !(*after)[0].ok());
}

// A batch with one failing update: BMv2 applies the others (CONTINUE_ON_ERROR) and answers the
// RPC with UNKNOWN plus one p4.v1.Error per update in the details (OK for the ones applied);
// SwitchSession::Write decodes them into one status per update.
TEST_F(Bmv2Test, AFailedBatchIsUnknownWithPerUpdateDetails) {
  P4RuntimeSwitchClient* client = ReadyClient({0, 100});
  ASSERT_NE(client, nullptr);
  const core::SwitchIntent intent = MakeIntent(2, 3);
  auto entities = translator_.Translate(intent);
  ASSERT_TRUE(entities.ok());
  // Insert one ina_worker entry first, so that inserting it again in the batch fails.
  std::vector<p4::v1::Update> updates;
  for (auto& e : *entities) updates.push_back(MakeUpdate(p4::v1::Update::INSERT, e));
  size_t duplicate = 0;
  while (updates[duplicate].entity().table_entry().table_id() != translator_.worker_table_id()) {
    ++duplicate;
  }
  // Writes carry the primary's election id; the session needs no stream of its own for that
  // (a second stream with the same id would be refused as a duplicate).
  SwitchSession* session = NewSession({0, 100});
  auto single = session->Write({updates[duplicate]});
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE((*single)[0].ok()) << (*single)[0];

  // Raw: the code and the details as BMv2 sends them.
  auto stub = RawStub(sw_->address());
  p4::v1::WriteRequest write;
  write.set_device_id(kDevice);
  write.mutable_election_id()->set_low(100);
  for (const auto& u : updates) *write.add_updates() = u;
  p4::v1::WriteResponse response;
  grpc::ClientContext context;
  context.set_deadline(RpcDeadline());
  grpc::Status status = stub->Write(&context, write, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNKNOWN) << status.error_message();
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  ASSERT_EQ(details.details_size(), write.updates_size());
  for (int i = 0; i < details.details_size(); ++i) {
    p4::v1::Error error;
    ASSERT_TRUE(details.details(i).UnpackTo(&error));
    if (static_cast<size_t>(i) == duplicate) {
      EXPECT_EQ(error.canonical_code(), google::rpc::ALREADY_EXISTS) << error.message();
    } else {
      EXPECT_EQ(error.canonical_code(), google::rpc::OK) << i << ": " << error.message();
    }
  }
  EXPECT_EQ(Observed(), IntentState(intent, translator_));

  // Decoded by the session: the batch again, every update now a duplicate except none.
  auto decoded = session->Write(updates);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), updates.size());
  for (const absl::Status& s : *decoded) EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);

  // A value that does not fit its field, next to a valid MODIFY: per-update statuses again.
  std::vector<p4::v1::Update> mixed = {MakeUpdate(p4::v1::Update::MODIFY, (*entities)[0]),
                                       updates[duplicate]};
  mixed[1].set_type(p4::v1::Update::MODIFY);
  mixed[1]
      .mutable_entity()
      ->mutable_table_entry()
      ->mutable_action()
      ->mutable_action()
      ->mutable_params(0)
      ->set_value(std::string(2, '\xff'));  // index is bit<8>
  auto results = session->Write(mixed);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  EXPECT_TRUE((*results)[0].ok()) << (*results)[0];
  std::printf("[ info ] MODIFY with a too-wide parameter: %s\n", (*results)[1].ToString().c_str());
  EXPECT_EQ((*results)[1].code(), absl::StatusCode::kInvalidArgument) << (*results)[1];
  EXPECT_EQ(Observed(), IntentState(intent, translator_));
}

// BMv2's P4Runtime server refuses register reads and writes (UNIMPLEMENTED): aggregator memory
// is data-plane state only.
TEST_F(Bmv2Test, RegistersAreUnimplemented) {
  P4RuntimeSwitchClient* client = ReadyClient({0, 100});
  ASSERT_NE(client, nullptr);
  const auto& registers = translator_.p4info().p4info().registers();
  ASSERT_FALSE(registers.empty());
  const uint32_t register_id = registers[0].preamble().id();

  SwitchSession* session = NewSession({0, 100});  // the primary's id, no stream of its own
  p4::v1::Entity cell;
  cell.mutable_register_entry()->set_register_id(register_id);
  cell.mutable_register_entry()->mutable_index()->set_index(0);
  auto read = session->Read({cell});
  std::printf("[ info ] register read: %s\n", read.status().ToString().c_str());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnimplemented);

  cell.mutable_register_entry()->mutable_data()->mutable_bitstring()->assign("\x01", 1);
  auto write = session->Write({MakeUpdate(p4::v1::Update::MODIFY, cell)});
  ASSERT_TRUE(write.ok()) << write.status();
  std::printf("[ info ] register write: %s\n", (*write)[0].ToString().c_str());
  EXPECT_EQ((*write)[0].code(), absl::StatusCode::kUnimplemented);
}

// Only CONTINUE_ON_ERROR: other atomicity modes are refused as a whole, nothing is applied.
TEST_F(Bmv2Test, OnlyContinueOnErrorIsSupported) {
  P4RuntimeSwitchClient* client = ReadyClient({0, 100});
  ASSERT_NE(client, nullptr);
  auto stub = RawStub(sw_->address());
  for (auto atomicity :
       {p4::v1::WriteRequest::ROLLBACK_ON_ERROR, p4::v1::WriteRequest::DATAPLANE_ATOMIC}) {
    p4::v1::WriteRequest write;
    write.set_device_id(kDevice);
    write.mutable_election_id()->set_low(100);
    write.set_atomicity(atomicity);
    for (auto& u : Inserts(translator_, MakeIntent(1, 1))) *write.add_updates() = std::move(u);
    p4::v1::WriteResponse response;
    grpc::ClientContext context;
    context.set_deadline(RpcDeadline());
    grpc::Status status = stub->Write(&context, write, &response);
    std::printf("[ info ] Write with %s: %s \"%s\"\n",
                p4::v1::WriteRequest::Atomicity_Name(atomicity).c_str(),
                CodeName(status.error_code()).c_str(), status.error_message().c_str());
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  EXPECT_TRUE(Observed().empty());
}

// An empty BMv2 (--no-p4): GetForwardingPipelineConfig answers FAILED_PRECONDITION (the spec
// answers OK with the config unset); the session reports "no cookie" either way.
TEST_F(Bmv2Test, GetWithoutAPipelineIsFailedPrecondition) {
  auto stub = RawStub(sw_->address());
  p4::v1::GetForwardingPipelineConfigRequest request;
  request.set_device_id(kDevice);
  request.set_response_type(p4::v1::GetForwardingPipelineConfigRequest::COOKIE_ONLY);
  p4::v1::GetForwardingPipelineConfigResponse response;
  grpc::ClientContext context;
  context.set_deadline(RpcDeadline());
  grpc::Status status = stub->GetForwardingPipelineConfig(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();

  SwitchSession* session = NewSession({0, 1});
  auto cookie = session->GetPipelineCookie();
  ASSERT_TRUE(cookie.ok()) << cookie.status();
  EXPECT_FALSE(cookie->has_value());
  // A read of an empty switch.
  auto read = session->Read(translator_.OwnedStateFilters());
  std::printf("[ info ] Read without a pipeline: %s\n", read.status().ToString().c_str());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Multicast group ids: INAC assigns 1..65535 (core/plan.h: group = 1 + (tag mod 65535), probing
// upwards). BMv2 (PI's packet replication manager) accepts group ids 1..32767 only and refuses
// 32768..65535 with OUT_OF_RANGE "Group id value is too high" (not a matter of --max-mc-groups:
// 4096 groups by default, yet ids above 4096 are accepted). With DeriveSwitchIntents' rule, tags
// >= 32767, i.e. job ids >= 4096, get groups BMv2 refuses.
TEST_F(Bmv2Test, MulticastGroupIdsAbove32767AreRefused) {
  P4RuntimeSwitchClient* client = ReadyClient({0, 100});
  ASSERT_NE(client, nullptr);
  core::SwitchIntent accepted;
  accepted.switch_id = "leaf1";
  for (uint32_t group : {1u, 4096u, 4097u, 16384u, 32767u}) {
    accepted.multicast_groups.push_back(core::MulticastGroupIntent{group, 1, {1, 2}});
  }
  auto stats = client->Reconcile(accepted);
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const std::string& e : stats->errors) ADD_FAILURE() << e;
  EXPECT_EQ(stats->inserted, 5);
  EXPECT_EQ(Observed(), IntentState(accepted, translator_));

  core::SwitchIntent refused = accepted;
  for (uint32_t group : {32768u, 40000u, 65535u}) {
    refused.multicast_groups.push_back(core::MulticastGroupIntent{group, 1, {1, 2}});
  }
  stats = client->Reconcile(refused);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, 0);
  EXPECT_EQ(stats->failed, 3);
  for (const std::string& e : stats->errors) {
    EXPECT_NE(e.find("OUT_OF_RANGE"), std::string::npos) << e;
  }
  EXPECT_EQ(Observed(), IntentState(accepted, translator_));
}

}  // namespace
}  // namespace inac::interop
