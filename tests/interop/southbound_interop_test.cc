// The southbound client (SwitchSession, P4RuntimeSwitchClient, IntentReconciler) against a real
// BMv2 simple_switch_grpc process (tests/interop/bmv2_fixture.h), loaded with p4c's output for
// api/p4/ina.p4 (P4Info + BMv2 JSON): the pipeline by cookie, reconciliation of every INA table
// and of multicast groups (insert, modify, delete), counters, and a restart of the switch.
//
// Skipped when simple_switch_grpc is not found (tests/interop/peers.h says where it looks).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
using southbound::SwitchSession;

// --- Pipeline ---

TEST_F(Bmv2Test, EnsurePipelinePushesP4InfoAndJsonOnceThenTheCookieMatches) {
  P4RuntimeSwitchClient* client = NewClient({0, 100});
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Connect().ok());
  ASSERT_TRUE(client->AwaitPrimary(kWait));

  auto first = client->EnsurePipeline();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first) << "an empty BMv2 must get the pipeline";
  auto second = client->EnsurePipeline();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second) << "the cookie matches: no second push (it would clear the tables)";

  // What BMv2 holds: the cookie, the P4Info and the JSON the client pushed.
  auto stub = RawStub(sw_->address());
  p4::v1::GetForwardingPipelineConfigRequest request;
  request.set_device_id(kDevice);
  request.set_response_type(p4::v1::GetForwardingPipelineConfigRequest::ALL);
  p4::v1::GetForwardingPipelineConfigResponse response;
  grpc::ClientContext context;
  context.set_deadline(RpcDeadline());
  grpc::Status status = stub->GetForwardingPipelineConfig(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.config().cookie().cookie(), client->cookie());
  EXPECT_EQ(response.config().p4info().tables_size(), translator_.p4info().p4info().tables_size());
  std::printf("[ info ] BMv2 returns a p4_device_config of %zu bytes (pushed %zu)\n",
              response.config().p4_device_config().size(), json_.size());

  // A controller that restarts (new client, higher election id) finds the cookie and keeps the
  // pipeline and the forwarding state.
  ASSERT_TRUE(client->Reconcile(MakeIntent(1, 2)).ok());
  client->Disconnect();
  P4RuntimeSwitchClient* again = NewClient({0, 200});
  ASSERT_TRUE(again->Connect().ok());
  ASSERT_TRUE(again->AwaitPrimary(kWait));
  auto third = again->EnsurePipeline();
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(*third);
  EXPECT_EQ(Observed(), IntentState(MakeIntent(1, 2), translator_));
}

// --- Reconciliation ---

TEST_F(Bmv2Test, ReconcileInsertsModifiesAndDeletesEveryInaTableAndMulticastGroups) {
  P4RuntimeSwitchClient* client = ReadyClient();
  ASSERT_NE(client, nullptr);
  const core::SwitchIntent intent = MakeIntent(3, 4);

  auto stats = client->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  EXPECT_EQ(stats->deleted + stats->modified + stats->failed, 0) << stats->errors.size();
  for (const std::string& e : stats->errors) ADD_FAILURE() << e;
  EXPECT_EQ(Observed(), IntentState(intent, translator_));

  auto again = client->Reconcile(intent);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->writes(), 0);
  EXPECT_EQ(again->batches, 0);
  EXPECT_EQ(again->read, EntityCount(intent));
  EXPECT_EQ(again->unchanged, EntityCount(intent));

  // Modify: one changed action parameter per table with parameters (ina_live has none, so the
  // job's ina_live entry stays), an action change (forward -> multicast), and a multicast group
  // with other replicas.
  core::SwitchIntent modified = intent;
  modified.version = 2;
  modified.jobs[0].priority = -7;          // ina_job: set_job's priority (two's complement)
  modified.inputs[1].index = 9;            // ina_worker: set_input's index
  modified.routes[0].egress_port = 31;     // ina_route: forward's port
  modified.routes[1].egress_port = 0;      // ina_route: forward -> multicast
  modified.routes[1].multicast_group = 2;  //
  modified.multicast_groups[1].egress_ports = {2, 5, 7, 9};
  stats = client->Reconcile(modified);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->modified, 5);
  EXPECT_EQ(stats->inserted + stats->deleted + stats->failed, 0);
  for (const std::string& e : stats->errors) ADD_FAILURE() << e;
  EXPECT_EQ(Observed(), IntentState(modified, translator_));
  EXPECT_EQ(client->Reconcile(modified)->writes(), 0);

  // Delete and insert: job 102 leaves (its group too), job 103 arrives.
  core::SwitchIntent moved = MakeIntent(4, 4, 3);
  core::SwitchIntent next = modified;
  next.version = 3;
  auto of_job = [](core::JobId job) { return [job](const auto& e) { return e.job_id == job; }; };
  std::erase_if(next.jobs, of_job(102));
  std::erase_if(next.inputs, of_job(102));
  std::erase_if(next.routes, of_job(102));
  std::erase_if(next.multicast_groups, of_job(102));
  for (const auto& e : moved.jobs) {
    if (e.job_id == 103) next.jobs.push_back(e);
  }
  for (const auto& e : moved.inputs) {
    if (e.job_id == 103) next.inputs.push_back(e);
  }
  for (const auto& e : moved.routes) {
    if (e.job_id == 103) next.routes.push_back(e);
  }
  for (const auto& e : moved.multicast_groups) {
    if (e.job_id == 103) next.multicast_groups.push_back(e);
  }
  stats = client->Reconcile(next);
  ASSERT_TRUE(stats.ok()) << stats.status();
  // ina_job and ina_live, 4 inputs, 4 forward routes and the multicast route, the group.
  EXPECT_EQ(stats->deleted, 2 + 4 + 5 + 1);
  EXPECT_EQ(stats->inserted, 2 + 4 + 5 + 1);
  EXPECT_EQ(stats->modified + stats->failed, 0);
  for (const std::string& e : stats->errors) ADD_FAILURE() << e;
  EXPECT_EQ(Observed(), IntentState(next, translator_));

  // The empty intent deletes everything INAC owns.
  core::SwitchIntent empty;
  empty.switch_id = "leaf1";
  stats = client->Reconcile(empty);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->deleted, EntityCount(next));
  EXPECT_EQ(stats->failed, 0);
  EXPECT_TRUE(Observed().empty());
  EXPECT_EQ(client->Reconcile(empty)->writes(), 0);
}

TEST_F(Bmv2Test, CountersOfEveryAggregationReadAsZero) {
  P4RuntimeSwitchClient* client = ReadyClient();
  ASSERT_NE(client, nullptr);
  const core::SwitchIntent intent = MakeIntent(3, 2);
  ASSERT_TRUE(client->Reconcile(intent).ok());
  auto counters = client->ReadCounters(intent);
  ASSERT_TRUE(counters.ok()) << counters.status();
  ASSERT_EQ(counters->size(), intent.jobs.size());
  for (size_t i = 0; i < counters->size(); ++i) {
    const auto& c = (*counters)[i];
    EXPECT_EQ(c.tag, intent.jobs[i].tag);
    EXPECT_EQ(c.job_id, intent.jobs[i].job_id);
    EXPECT_EQ(c.multicast_group, intent.jobs[i].multicast_group);
    EXPECT_EQ(c.aggregated, southbound::CounterValue{});  // no traffic through this BMv2
    EXPECT_EQ(c.preempted, southbound::CounterValue{});
    EXPECT_EQ(c.fallback, southbound::CounterValue{});
  }
}

TEST_F(Bmv2Test, ALargeIntentIsRestoredAfterTheSwitchRestartsEmpty) {
  P4RuntimeSwitchClient* client = ReadyClient();
  ASSERT_NE(client, nullptr);
  const core::SwitchIntent intent = MakeIntent(40, 16);  // 40 * (2 + 16 + 17 + 1) + 1 = 1441
  auto stats = client->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->inserted, EntityCount(intent));

  ASSERT_TRUE(sw_->Restart().ok());
  ASSERT_TRUE(client->AwaitNotPrimary(kWait));  // the client saw its stream end
  // The session reconnects by itself; then the controller's usual sequence.
  ASSERT_TRUE(client->AwaitPrimary(kWait)) << client->arbitration().last_error;
  auto pushed = client->EnsurePipeline();
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  EXPECT_TRUE(*pushed) << "the restarted BMv2 has no pipeline";
  stats = client->Reconcile(intent);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->read, 0);
  EXPECT_EQ(stats->inserted, EntityCount(intent));
  EXPECT_EQ(Observed(), IntentState(intent, translator_));
  EXPECT_EQ(client->Reconcile(intent)->writes(), 0);
}

}  // namespace
}  // namespace inac::interop
