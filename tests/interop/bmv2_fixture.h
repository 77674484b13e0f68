// The shared fixture of the BMv2 interop tests (southbound_interop_test.cc,
// bmv2_deviations_test.cc): Bmv2Test starts one empty simple_switch_grpc (device id kDevice, logs
// in a temporary folder kept only when the test fails) and owns the sessions and clients a test
// opens, closing them before it kills the switch; it skips, saying where it looked, when BMv2 is
// not found (peers.h). Helpers build INA intents that use every table, read a switch's INA state
// back in canonical form, and make raw P4Runtime calls (to see exactly what BMv2 answers).
// One test thread uses a fixture.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/plan.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/intent_translator.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_session.h"
#include "tests/interop/bmv2_switch.h"

namespace inac::interop {

// Generous bounds for events that take milliseconds; never part of an assertion on time.
inline constexpr absl::Duration kWait = absl::Seconds(20);
inline constexpr uint64_t kDevice = 5;

// The translator of the embedded ina.p4 P4Info.
southbound::IntentTranslator Translator();

// A switch intent that uses every INA table and every action of ina_route: per job one ina_job
// entry (priorities of both signs) and its ina_live entry, `inputs` ina_worker entries, one
// forward route per worker, a multicast route for the result and a multicast group; job 0 also
// gets a drop route. Job j has id 100 + j and multicast group 1 + j.
core::SwitchIntent MakeIntent(int jobs, int inputs, int64_t version = 1);
// The number of P4Runtime entities `intent` requires: two per aggregation (ina_job, ina_live),
// one per input, route, multicast group and host port.
int64_t EntityCount(const core::SwitchIntent& intent);

// The canonical fingerprints of everything INAC owns on the switch, sorted (a failed read is a
// test failure and yields nothing).
std::vector<std::string> SwitchState(southbound::SwitchSession& session,
                                     const southbound::IntentTranslator& t);
// The same for what `intent` requires.
std::vector<std::string> IntentState(const core::SwitchIntent& intent,
                                     const southbound::IntentTranslator& t);

p4::v1::Update MakeUpdate(p4::v1::Update::Type type, p4::v1::Entity entity);
// INSERT updates for every entity of `intent`.
std::vector<p4::v1::Update> Inserts(const southbound::IntentTranslator& t,
                                    const core::SwitchIntent& intent);

// A raw P4Runtime stub and a 20 s deadline for its calls.
std::unique_ptr<p4::v1::P4Runtime::Stub> RawStub(const std::string& address);
std::chrono::system_clock::time_point RpcDeadline();
// "PERMISSION_DENIED", ...
std::string CodeName(grpc::StatusCode code);

class Bmv2Test : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  southbound::SessionOptions Session(southbound::ElectionId id) const;
  // A session owned by the fixture (closed before the switch is killed).
  southbound::SwitchSession* NewSession(southbound::ElectionId id,
                                        bool claim_primary_when_vacant = true);
  // A client as the controller builds it for a BMv2 target: P4Info + p4c's JSON.
  southbound::P4RuntimeSwitchClient* NewClient(southbound::ElectionId id);
  // A primary client with the INA pipeline loaded.
  southbound::P4RuntimeSwitchClient* ReadyClient(southbound::ElectionId id = {0, 100});
  // What the switch holds, read by an observer session that never arbitrates.
  std::vector<std::string> Observed();

  std::string binary_;
  std::string json_;
  std::string dir_;
  std::unique_ptr<Bmv2Switch> sw_;
  southbound::IntentTranslator translator_ = Translator();
  std::vector<std::unique_ptr<southbound::P4RuntimeSwitchClient>> clients_;
  std::vector<std::unique_ptr<southbound::SwitchSession>> sessions_;
  southbound::SwitchSession* observer_ = nullptr;
};

}  // namespace inac::interop
