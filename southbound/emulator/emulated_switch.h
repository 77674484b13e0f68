// EmulatedSwitch: an emulated INA switch that is a real P4Runtime gRPC server (`inac switch`).
// It holds the control-plane state of the installed pipeline (api/p4/ina.p4 or any P4Info) in
// memory: table entries, multicast groups and counter cells; there is no data plane. State is
// lost when the process ends, like a real switch's.
//
// One server may host several devices (`inac switch --devices N`, for fabrics of hundreds or
// thousands of switches): device ids device_id .. device_id+N-1 behind one listen address, each
// device with its own pipeline, state, arbitration and write log, as if each were its own switch.
// Every request is routed by its P4Runtime device_id (a stream by the device_id of its first
// arbitration update); an id outside the range is answered as a wrong id is below. Why one
// server rather than N: a gRPC server has its own completion queues and polling threads, and
// `inac switch` processes each cost tens of MiB; one server costs one thread per open stream
// and RPC in flight, whatever N (docs/southbound.md "Many devices in one process").
//
// Behaviour, per the P4Runtime specification v1.3:
//  - Arbitration (section 5 "Client Arbitration and Controller Replication"), per role name: a
//    client becomes primary when its MasterArbitrationUpdate carries an election id >= the highest
//    id the role has ever accepted as primary (so a higher id takes over from a live primary, and
//    after the primary's stream ends nobody is primary until a client arbitrates with an id >= the
//    old primary's). Every client of the role is told when the primary changes (or re-confirms);
//    others get an answer to their own update only. Answers carry the highest accepted election id
//    and a status: OK to the primary, ALREADY_EXISTS to backups while there is a primary,
//    NOT_FOUND while there is none. A second connected stream with an election id already in use
//    is closed with INVALID_ARGUMENT; a wrong device id closes the stream with NOT_FOUND
//    (INVALID_ARGUMENT when missing). Streams without an election id are backups.
//  - Write / SetForwardingPipelineConfig need the primary's election id (else PERMISSION_DENIED);
//    Read / GetForwardingPipelineConfig / Capabilities need no arbitration.
//  - Every RPC checks the device id: 0 when the switch's id is not 0 is INVALID_ARGUMENT
//    ("missing"), another id is NOT_FOUND. Write / Read without a pipeline: FAILED_PRECONDITION.
//  - SetForwardingPipelineConfig: VERIFY (check only), VERIFY_AND_SAVE (the config becomes the one
//    requests refer to, with empty forwarding state, not yet committed), VERIFY_AND_COMMIT (install
//    and clear state), COMMIT (commit the saved config; no config allowed in the request),
//    RECONCILE_AND_COMMIT: UNIMPLEMENTED. The cookie is stored with the config.
//  - GetForwardingPipelineConfig: ALL, COOKIE_ONLY, P4INFO_AND_COOKIE, DEVICE_CONFIG_AND_COOKIE;
//    with no pipeline, OK and an empty config.
//  - Write: CONTINUE_ON_ERROR only (other atomicity modes: UNIMPLEMENTED). Each update is checked
//    and applied on its own (switch_state.h); if any fails the RPC answers UNKNOWN with a
//    google.rpc.Status whose details hold one p4.v1.Error per update, in order (OK for those
//    applied).
//  - Read: the wildcards of the spec; results stream in ReadResponses of up to 1024 entities.
//  - StreamChannel packet-out / digest ack / other: answered with a StreamError UNIMPLEMENTED.
//
// Optional deviations reproduce BMv2's simple_switch_grpc for client tests (docs/southbound.md,
// "Target deviations handled"); they are off unless asked for.
//
// Thread safety: all methods of EmulatedSwitch are safe from any thread. Inside, per device, one
// absl::Mutex guards the pipeline, the state and the arbitration tables; a Write batch holds it for
// the whole batch, so reads see a batch entirely or not at all. Arbitration answers are sent
// outside that mutex, serialised by a second mutex so that every client sees them in decision
// order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "p4/config/v1/p4info.pb.h"

namespace grpc {
class Server;
}

namespace inac::southbound::emulator {

struct Bmv2Deviations {
  // When the primary's stream ends, the highest remaining client becomes primary at once (the
  // spec waits for a client to arbitrate with an id >= the old primary's).
  bool promote_backup_immediately = false;
  // GetForwardingPipelineConfig without a pipeline answers FAILED_PRECONDITION.
  bool get_without_pipeline_fails = false;
};

struct EmulatedSwitchOptions {
  // "host:port"; port 0 picks a free port (see EmulatedSwitch::port()).
  std::string listen_address = "127.0.0.1:0";
  // The first device's id; the others follow (device_id + 1, ...).
  uint64_t device_id = 1;
  // Number of devices served (>= 1).
  int num_devices = 1;
  // Installed at start as if by VERIFY_AND_COMMIT without a cookie; none: no pipeline until a
  // client sets one.
  std::optional<p4::config::v1::P4Info> p4info;
  Bmv2Deviations deviations;
  // Non-empty: every Write and SetForwardingPipelineConfig is appended to this file as one line
  // "<rpc> election_id=<high>:<low> result=<grpc code>" once arbitration decided it (tests of
  // controller fencing read it: docs/ha.md). With several devices, each device has its own file:
  // this path with ".<device id>" appended.
  std::string write_log_path;
};

class EmulatedSwitch {
 public:
  // Starts serving. InvalidArgument when the P4Info fails verification or num_devices < 1,
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<EmulatedSwitch>> Start(EmulatedSwitchOptions options);

  ~EmulatedSwitch();
  EmulatedSwitch(const EmulatedSwitch&) = delete;
  EmulatedSwitch& operator=(const EmulatedSwitch&) = delete;

  // The bound port and "host:port" to dial.
  int port() const { return port_; }
  std::string address() const;
  // The first device's id, and the number of devices (ids device_id() .. + num_devices() - 1).
  uint64_t device_id() const { return first_device_id_; }
  int num_devices() const;

  // Stops serving: open streams and calls are cancelled. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has been called and the server has stopped.
  void Wait();

  // Number of table entries currently held (all tables, all devices); 0 without a pipeline. For
  // tests and logs.
  int64_t NumTableEntries() const;
  // The same for one device (0 for an id this server does not hold).
  int64_t NumTableEntries(uint64_t device_id) const;

  class Device;
  class Router;

 private:
  EmulatedSwitch() = default;

  std::string host_;
  int port_ = 0;
  uint64_t first_device_id_ = 1;
  // Declared before server_: the server (and its handlers) go first.
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace inac::southbound::emulator
