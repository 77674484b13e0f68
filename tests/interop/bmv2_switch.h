// BMv2 simple_switch_grpc processes for the interop tests and bench (real P4Runtime servers).
//
// - Bmv2Switch: one `simple_switch_grpc --device-id N --no-p4 -- --grpc-server-addr
//   127.0.0.1:PORT` process, started empty (no pipeline). BMv2 cannot pick its own port and does
//   not print when it listens, so the port is reserved first (a socket bound to 127.0.0.1:0 with
//   SO_REUSEPORT, kept open, never listening, for the object's whole life: no other bind to
//   port 0 can get the port, while BMv2's gRPC server, which binds with SO_REUSEPORT too, can),
//   and readiness is "a P4Runtime RPC answers" (GetForwardingPipelineConfig: FAILED_PRECONDITION
//   without a pipeline). A BMv2 whose bind fails keeps running without a server: a start that
//   does not answer within the bound is killed and retried on a fresh port (Restart: same port).
//   The process is SIGKILLed and reaped in the destructor; a restarted process keeps the port
//   and device id, so the topology's endpoint stays valid.
//   simple_switch_grpc captures its notifications in-process (no nanomsg IPC socket) and is
//   built without Thrift, so several instances on one machine share nothing but what they are
//   given: the port (reserved) and the log files (per instance). Device ids need not differ
//   between processes; a fabric still numbers its switches 1..n.
// - Bmv2Fabric: one Bmv2Switch per switch of a topology, endpoints written into the topology
//   with target kind bmv2 (as EmulatedFabric does for `inac switch`).
// - AwaitP4RuntimeAnswers: the readiness poll, usable against any P4Runtime server.
// - AwaitPipeline: waits until a switch has a pipeline (GetForwardingPipelineConfig polls).
//   BMv2 1.15.5 / PI crashes (SIGSEGV) when a Read arrives while SetForwardingPipelineConfig
//   runs on a device without pipeline (measured: 11 of 30 restarts with a tight read loop; never
//   with GetForwardingPipelineConfig polls). Anyone who reads a restarted BMv2 while a
//   controller pushes its pipeline (a read-back poll, a monitoring tool, a standby controller's
//   reconcile) must wait for the pipeline first.
// - InaBmv2Json: api/p4/ina.json (p4c's BMv2 device config), read from INAC_P4_DIR.
//
// Every wait is bounded. Thread safety: one thread uses an object at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/topology.h"
#include "tests/system/harness.h"

namespace inac::interop {

struct Bmv2Options {
  std::string binary;  // simple_switch_grpc (FindBmv2())
  uint64_t device_id = 1;
  // Files: <dir>/<name>.out (stdout and stderr) and, with `log`, <dir>/<name>-bmv2.txt
  // (BMv2's own log at level `log_level`, flushed per line so that a SIGKILL loses nothing;
  // empty: $INAC_BMV2_LOG_LEVEL, else "warn").
  std::string dir;
  std::string name = "bmv2";
  bool log = true;
  std::string log_level;
  absl::Duration start_timeout = absl::Seconds(30);
};

class Bmv2Switch {
 public:
  // Reserves a port, starts the process and waits until it answers P4Runtime (at most
  // `start_timeout` per attempt, 3 attempts on fresh ports). Unavailable with the log's tail
  // when it never answers.
  static absl::StatusOr<std::unique_ptr<Bmv2Switch>> Start(Bmv2Options options);
  ~Bmv2Switch();  // SIGKILL and reap; releases the port.
  Bmv2Switch(const Bmv2Switch&) = delete;
  Bmv2Switch& operator=(const Bmv2Switch&) = delete;

  // "127.0.0.1:PORT"
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  uint64_t device_id() const { return options_.device_id; }
  // The process (nullptr between Kill and Restart).
  systest::ChildProcess* process() { return process_.get(); }

  // SIGKILL, reaped. The port stays reserved for Restart.
  void Kill();
  // Kills the process if running and starts a new, empty one on the same port and device id;
  // returns once it answers P4Runtime (attempts as in Start, all on this port).
  absl::Status Restart();
  // The tails of the process's files, for failure messages.
  std::string Logs(size_t max_bytes = 3000) const;

 private:
  explicit Bmv2Switch(Bmv2Options options) : options_(std::move(options)) {}
  absl::Status Reserve();
  absl::Status Launch();

  Bmv2Options options_;
  int reservation_fd_ = -1;
  int port_ = 0;
  std::string address_;
  std::unique_ptr<systest::ChildProcess> process_;
};

// Polls `address` every ~10 ms (a TCP connect, then GetForwardingPipelineConfig on a fresh
// channel) until a P4Runtime RPC answers with anything but UNAVAILABLE / DEADLINE_EXCEEDED.
// `alive`, when set, is checked on every attempt: Unavailable as soon as it returns false.
// DeadlineExceeded after `timeout`.
absl::Status AwaitP4RuntimeAnswers(const std::string& address, uint64_t device_id,
                                   absl::Duration timeout, const std::function<bool()>& alive = {});

// Polls the pipeline cookie (GetForwardingPipelineConfig, COOKIE_ONLY; never a Read) every
// ~10 ms until the switch has a pipeline. DeadlineExceeded after `timeout` with the last answer.
absl::Status AwaitPipeline(const std::string& address, uint64_t device_id, absl::Duration timeout);

class Bmv2Fabric {
 public:
  // Starts one BMv2 per switch of `topology` (device id i+1, logs in `dir`) and sets each
  // switch's p4runtime endpoint to {its address, device id, TargetKind::kBmv2}.
  absl::Status Start(core::Topology* topology, const std::string& dir, const std::string& binary);
  // SIGKILL and restart empty on the same port and device id.
  absl::Status KillAndRestart(const std::string& switch_id);
  // nullptr for an unknown switch id.
  Bmv2Switch* at(const std::string& switch_id);
  std::string Logs() const;  // every switch's log tail

 private:
  std::map<std::string, std::unique_ptr<Bmv2Switch>> switches_;
};

// The contents of ${INAC_P4_DIR}/ina.json; "" when unreadable.
std::string InaBmv2Json();

}  // namespace inac::interop
