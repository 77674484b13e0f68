// The plumbing `inac worker` (cli/cmd_worker.cc) and `inac ps` (cli/cmd_ps.cc) share, implemented
// in cli/cmd_agent.cc: the options both take, loading the job configuration (REST or
// --config-file), following re-plans while the data plane runs, the network namespace, the stop
// signals and the exit codes of cli/cmd_agent.h. Internal to those three files.
//
// Errors end the verb: Fail prints "inac: <message>" on stderr and throws CLI::RuntimeError.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "agent/config_feed.h"
#include "agent/job_config.h"
#include "agent/packet.h"
#include "agent/udp_socket.h"

namespace inac::cli::agent_verbs {

// Set by SIGINT / SIGTERM once InstallStopHandlers ran; the agent loops poll it.
extern std::atomic<bool> g_stop;

// SIGINT / SIGTERM end the run cleanly (the agent loops poll g_stop).
void InstallStopHandlers();

[[noreturn]] void Fail(int code, const std::string& message);
// The exit code of northbound::ExitCodeFor(status).
[[noreturn]] void Fail(const absl::Status& status);

// What both verbs share.
struct CommonArgs {
  int64_t job = 0;
  std::string server;
  std::string token;
  std::string ca_cert;        // --ca-cert or $INAC_CA_CERT (https:// servers)
  bool server_given = false;  // --server or $INAC_SERVER
  std::string netns;
  std::string config_file;
  int64_t size_bytes = 1 << 20;
  int64_t iterations = 1;
  uint32_t window = 0;
  bool no_congestion_control = false;
  bool json = false;
  std::string bind = "0.0.0.0";
  uint16_t port = agent::kInaUdpPort;
  double drop_percent = 0;
  int64_t refresh_ms = 500;
  std::string gso = "auto";
  CLI::Option* server_option = nullptr;
  CLI::Option* size_option = nullptr;
};

// Adds the options of CommonArgs to `cmd` (defaults from $INAC_SERVER, $INAC_TOKEN).
void AddCommonOptions(CLI::App* cmd, CommonArgs* a);

// The gradient size: --size, else the job's gradient_bytes (a multiple of 4), else 1 MiB.
int64_t GradientBytes(const CommonArgs& a, const agent::JobConfig& config);

// Checks the shared options, loads the configuration; exit 2 / 1 on failure.
agent::JobConfig LoadConfig(const CommonArgs& a, agent::SocketOptions* socket);

// While the data plane runs, polls GET /jobs/{id}/config every --refresh-ms on a thread of its
// own (in the caller's namespace, where the controller is) and publishes each configuration with
// another plan version to `feed`, which the agent's loop follows (agent/config_feed.h). A failed
// poll (controller restarting, job gone) is retried at the next period; the first failure of a
// series is reported on stderr.
class ConfigWatcher {
 public:
  ConfigWatcher(const CommonArgs& a, int64_t plan_version, agent::ConfigFeed* feed);

 private:
  std::unique_ptr<agent::ConfigPoller> poller_;
};

// The netns fd (or -1); exit 2 when the namespace does not exist, 1 otherwise.
int OpenNamespace(const CommonArgs& a);

// Distinct members of the tags (all of them, or those of PS `ps`): n of busbw.
int DistinctWorkers(const agent::JobConfig& config, const std::string& ps = "");

// The exit code of an agent's failure: 2 for bad input (invalid argument, failed precondition,
// not found), else 1.
int ExitFor(const absl::Status& s);

// The verbs (cli/cmd_worker.cc, cli/cmd_ps.cc), registered by AddAgentCommands.
void AddWorkerCommand(CLI::App& app);
void AddPsCommand(CLI::App& app);

}  // namespace inac::cli::agent_verbs
