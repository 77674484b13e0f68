// Test harness for the system tests (tests/system/): real `inac` processes on loopback.
//
// - ChildProcess: runs the `inac` binary of this build (INAC_BINARY), or any other program
//   (StartProgram, e.g. BMv2 for tests/interop/), with stdout and stderr appended to a log file,
//   and finds the `listening on HOST:PORT` line that `inac serve` and `inac switch` print once
//   they accept connections.
// - EmulatedFabric: one `inac switch` process per switch of a topology, their addresses written
//   into the topology; a switch can be killed (SIGKILL) and restarted empty on the same port.
// - ControllerProcess: `inac serve` on port 0 with a config file and a database file.
// - SwitchReader: reads a switch's INA state back over P4Runtime (wildcard Read, no
//   arbitration) and compares it with a core::SwitchIntent translated by the production
//   IntentTranslator.
// - Rest: JSON calls to the controller's /api/v1 through the production client
//   (northbound/api_client.h), whatever the answer's status.
// - The sample fabric and jobs (LeafSpine, LongRunningJob) are the shared ones of
//   tests/fixtures/.
//
// Everything binds 127.0.0.1 and picks ports with port 0. Every wait has a bound.
//
// A child gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a test that
// crashes leaves no process behind: start children from the test's main thread.
//
// Thread safety: a ChildProcess may be signalled from any thread; the other classes are used by
// one test thread (Rest: one instance per thread).
#pragma once

#include <csignal>

#include <sys/types.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/plan.h"
#include "core/topology.h"
#include "nlohmann/json.hpp"
#include "northbound/api_client.h"
#include "southbound/intent_translator.h"
#include "southbound/switch_session.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/fixtures/temp_dir.h"

namespace inac::systest {

using Json = nlohmann::json;

// The `inac` binary under test.
const char* InacBinary();

// A fresh directory under the test's TMPDIR for logs, configs and databases, left behind.
using fixtures::MakeTempDir;  // tests/fixtures/temp_dir.h

// One finished `inac` command-line run.
struct CliRun {
  int exit = -1;
  std::string out;  // stdout; stderr is appended after a "--stderr--" line
};

// Runs `inac <args>` through the shell (args are shell words: quote paths with spaces) with
// stderr captured in `dir`/stderr.txt, and waits for it.
CliRun RunInac(const std::string& args, const std::string& dir);

// Writes `text` to `path` and returns `path`.
std::string WriteFile(const std::string& path, const std::string& text);

class ChildProcess {
 public:
  // Starts `InacBinary() args...`. stdout and stderr go to `log_path` (appended).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& args,
                                                             const std::string& log_path);
  // Starts `program args...` (an absolute path; no PATH search) the same way.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> StartProgram(
      const std::string& program, const std::vector<std::string>& args,
      const std::string& log_path);
  ~ChildProcess();  // SIGKILL and reap if still running.
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The HOST:PORT of the first `listening on HOST:PORT` line on stdout. DeadlineExceeded after
  // `timeout`; Unavailable when the process exited first (its log names the reason).
  absl::StatusOr<std::string> AwaitListening(absl::Duration timeout);
  // Sends `signal` (no-op once reaped).
  void Signal(int signal);
  // Waits for the exit (at most `timeout`, then `signal`, and SIGKILL 10 s after any other
  // signal). Returns the exit code, or -signal when killed by a signal.
  int Wait(absl::Duration timeout = absl::Seconds(20), int signal = SIGKILL);
  // Reaps the process if it has exited, without blocking; true once it is gone.
  bool Exited();
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

 private:
  ChildProcess() = default;
  void Drain(int fd);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_ = 0;
  std::string log_path_;
  int log_fd_ = -1;
  std::thread drain_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> listening_;  // guarded by mu_
  bool eof_ = false;                      // guarded by mu_
};

// The last `max_bytes` of a log file (for failure messages).
std::string LogTail(const std::string& path, size_t max_bytes = 4000);

// The fabric of the system tests: fixtures::LeafSpine (INA on the leaves, 4096 aggregators, no
// p4runtime endpoints yet; EmulatedFabric::Start sets them).
using fixtures::LeafSpine;

class EmulatedFabric {
 public:
  // Starts one `inac switch --listen 127.0.0.1:0 --device-id i+1` per switch of `topology` (all
  // started before any is awaited) and sets each switch's p4runtime endpoint to its address.
  absl::Status Start(core::Topology* topology, const std::string& dir);
  // SIGKILLs the switch's process and starts a new, empty one on the same port.
  absl::Status KillAndRestart(const std::string& switch_id);
  // The process of one switch (nullptr for an unknown id).
  ChildProcess* process(const std::string& switch_id);

  // Instead of Start, for fabrics of hundreds or thousands of switches: one
  // `inac switch --listen 127.0.0.1:0 --devices N` serving every switch of `topology` (device ids
  // 1..N in topology order, all behind the one address), its log in dir/switches.log. Not to be
  // mixed with Start on the same object (KillAndRestart and process() know only Start's
  // switches).
  absl::Status StartShared(core::Topology* topology, const std::string& dir);
  // The process of StartShared (nullptr before).
  ChildProcess* shared_process() { return shared_.get(); }

 private:
  struct Member {
    std::string address;
    uint64_t device_id = 0;
    std::string log;
    std::unique_ptr<ChildProcess> process;
  };
  std::map<std::string, Member> members_;
  std::unique_ptr<ChildProcess> shared_;
};

class ControllerProcess {
 public:
  // Writes `config` (JSON, cli/config.h) to dir/<name>.json and starts
  // `inac serve --config ... --db <db> --listen 127.0.0.1:0 --log-level debug` plus `extra`.
  absl::Status Start(const std::string& dir, const std::string& name, const std::string& db,
                     const Json& config, const std::vector<std::string>& extra = {});
  // "http://127.0.0.1:PORT"
  const std::string& base_url() const { return base_url_; }
  const std::string& host_port() const { return host_port_; }
  ChildProcess* process() { return process_.get(); }
  // SIGKILL, reaped.
  void Kill9();
  // SIGTERM; returns the exit code.
  int Terminate();

 private:
  std::unique_ptr<ChildProcess> process_;
  std::string base_url_;
  std::string host_port_;
};

// One HTTP answer.
struct Response {
  int status = 0;  // 0: no answer (connection refused or reset, timeout)
  Json body;       // parsed body (null when empty or not JSON)
  std::string text;
};

// JSON over HTTP to one controller's /api/v1 (`path` is below it), on one kept-alive connection
// of a northbound::ApiClient (ApiClient::SendRaw: every status is an answer). Not thread-safe: one
// per thread.
class Rest {
 public:
  explicit Rest(const std::string& host_port, absl::Duration timeout = absl::Seconds(20));
  ~Rest();
  Response Get(const std::string& path);
  Response Post(const std::string& path, const Json& body,
                const std::map<std::string, std::string>& headers = {});
  Response Put(const std::string& path, const Json& body);
  Response Patch(const std::string& path, const Json& body);
  Response Delete(const std::string& path);

 private:
  Response Send(const std::string& method, const std::string& path, const std::string& body,
                const std::map<std::string, std::string>& headers = {});

  std::unique_ptr<northbound::ApiClient> client_;  // null when host_port is not usable
};

// POSTs `job` to /jobs and waits (at most 30 s) until GET /jobs/{id} says "running" (every
// switch programmed). The job's id, or 0 with the reason in `error`.
int64_t SubmitAndAwaitRunning(Rest& rest, const Json& job, std::string* error);

// What one switch holds: canonical INA entities by key.
struct SwitchContent {
  std::map<std::string, std::string> by_key;  // EntityKey -> EntityFingerprint
  std::vector<p4::v1::Entity> entities;       // canonical, as read
  int64_t duplicates = 0;                     // keys read more than once
};

class SwitchReader {
 public:
  // The embedded ina.p4 P4Info's translator.
  SwitchReader();
  // Reads every INA table entry and multicast group of the switch at `address` (no arbitration).
  absl::StatusOr<SwitchContent> Read(const std::string& address, uint64_t device_id);
  // The canonical entities `intent` requires.
  absl::StatusOr<SwitchContent> Expected(const core::SwitchIntent& intent);
  // "" when `actual` holds exactly `expected`; otherwise a description of the difference.
  static std::string Diff(const SwitchContent& expected, const SwitchContent& actual);

 private:
  std::optional<southbound::IntentTranslator> translator_;
};

// The intents of every switch of `topology` under `plan` (core::DeriveSwitchIntents), by switch
// id; switches without entries map to an empty intent.
std::map<std::string, core::SwitchIntent> IntentsBySwitch(const core::Topology& topology,
                                                          const core::Plan& plan);

// Compares every managed switch of `topology` with `intents` (missing: empty). "" when all
// match; otherwise one line per differing switch.
std::string CompareFabric(const core::Topology& topology,
                          const std::map<std::string, core::SwitchIntent>& intents,
                          SwitchReader& reader);

// The controller's current topology and plan over REST. nullopt when either is not there yet.
struct ControllerView {
  core::Topology topology;
  core::Plan plan;
  int64_t topology_version = 0;
};
std::optional<ControllerView> FetchView(Rest& rest);

// Polls until the controller's current plan (GET /plan) is final (not an admission plan awaiting
// its background re-plan, fingerprint "admitted:..."), holds `jobs` jobs (any number when
// negative) and is fully programmed: every managed switch reports applied_version == the plan's
// version with no error, and every emulator read back equals DeriveSwitchIntents(topology, plan).
// Returns the view it converged on, or DeadlineExceeded with the last difference.
absl::StatusOr<ControllerView> AwaitConverged(Rest& rest, SwitchReader& reader,
                                              absl::Duration timeout, int jobs = -1);

// Like CompareFabric, reading the switches from `threads` threads at once (each with its own
// SwitchReader): for fabrics of hundreds of switches. "" when all match.
std::string CompareFabricParallel(const core::Topology& topology,
                                  const std::map<std::string, core::SwitchIntent>& intents,
                                  int threads);

// What a controller's GET /plan and GET /switches say about its fleet at one instant.
struct FleetReport {
  int64_t plan_version = 0;
  size_t plan_jobs = 0;
  bool admission_plan = false;  // fingerprint "admitted:...": its re-plan is still to come
  double solve_ms = 0;          // the plan's planning time
  int managed = 0;
  // Managed switches this controller reconciled to plan_version in a visit that contacted the
  // switch at or after `since_unix_ms`, as primary, without error.
  int reconciled = 0;
  std::string first_lagging;  // one switch that is not (id and why), for messages
};
// One GET /plan and one GET /switches; nullopt when either is not 200.
std::optional<FleetReport> ReportFleet(Rest& rest, int64_t since_unix_ms);

// Polls ReportFleet every `poll` until the plan is final, holds `jobs` jobs (any number when
// negative) and every managed switch is reconciled since `since_unix_ms` (see FleetReport). It
// reads no switch: the switches' records are the controller's own (a visit confirms a version
// only after its read-back and writes succeeded: server/switch_fleet.h), and `since_unix_ms` rules
// out records a previous leader left in the store. DeadlineExceeded with the last lagging switch.
absl::StatusOr<FleetReport> AwaitFleetReconciled(Rest& rest, int64_t since_unix_ms,
                                                 absl::Duration timeout, int jobs = -1,
                                                 absl::Duration poll = absl::Milliseconds(100));

// The wall clock in Unix ms (the controllers' clock for last_contact_ms).
int64_t UnixMs();

// Every job of a controller, all pages of GET /jobs (stops at the first non-200 page).
std::vector<Json> AllJobs(Rest& rest);

// The jobs of the system tests: fixtures::LongRunningJob (ResNet50, tenant "systest", runs until
// cancelled).
using fixtures::LongRunningJob;

}  // namespace inac::systest
