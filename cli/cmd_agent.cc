// The shared plumbing of `inac worker` and `inac ps` (cli/cmd_agent_common.h) and the
// registration of both verbs (cli/cmd_agent.h); the verbs are cli/cmd_worker.cc and
// cli/cmd_ps.cc.
#include "cli/cmd_agent.h"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/config_feed.h"
#include "agent/job_config.h"
#include "agent/packet.h"
#include "agent/udp_socket.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/cmd_agent_common.h"
#include "core/files.h"
#include "core/topology.h"
#include "nlohmann/json.hpp"
#include "northbound/api_client.h"

namespace inac::cli {
namespace agent_verbs {
namespace {

using Json = nlohmann::json;

extern "C" void OnStopSignal(int) { g_stop.store(true); }

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(fallback);
}

}  // namespace

std::atomic<bool> g_stop{false};

// SIGINT / SIGTERM end the run cleanly (the agent loops poll g_stop).
void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

[[noreturn]] void Fail(int code, const std::string& message) {
  std::cerr << "inac: " << message << "\n";
  throw CLI::RuntimeError(code);
}

[[noreturn]] void Fail(const absl::Status& status) {
  Fail(northbound::ExitCodeFor(status), std::string(status.message()));
}

void AddCommonOptions(CLI::App* cmd, CommonArgs* a) {
  a->server = EnvOr("INAC_SERVER", "http://127.0.0.1:8080");
  a->server_given = std::getenv("INAC_SERVER") != nullptr && *std::getenv("INAC_SERVER") != '\0';
  a->token = EnvOr("INAC_TOKEN", "");
  cmd->add_option("--job", a->job, "Job id")->required()->check(CLI::PositiveNumber);
  a->server_option = cmd->add_option(
      "--server", a->server, "Controller URL (default $INAC_SERVER or http://127.0.0.1:8080)");
  cmd->add_option("--token", a->token, "Bearer token (default $INAC_TOKEN)");
  AddCaCertOption(cmd, &a->ca_cert);
  cmd->add_option("--netns", a->netns,
                  "Run the data-plane socket inside network namespace /var/run/netns/NAME (the "
                  "REST calls stay in the caller's namespace)");
  cmd->add_option("--config-file", a->config_file,
                  "Read the job configuration (the JSON of GET /jobs/{id}/config) from a file");
  a->size_option = cmd->add_option("--size", a->size_bytes,
                                   "Gradient size in bytes, a multiple of 4 (suffixes K, M, G: "
                                   "powers of 1024; worker and PS must agree). Default: the "
                                   "job's gradient_bytes (rounded down to a multiple of 4), or "
                                   "1 MiB when the configuration has none")
                       ->transform(CLI::AsSizeValue(false))
                       ->capture_default_str();
  cmd->add_option("--iterations", a->iterations, "All-reduces to run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--window", a->window,
                  "Chunks in flight per tag (0: the grant, or 64 without one, 1024 straight to the "
                  "PS). A window larger "
                  "than the grant forces aggregator contention (testing)");
  cmd->add_flag("--no-congestion-control", a->no_congestion_control,
                "Workers: send the whole window at once, unpaced, never shrinking it on loss "
                "(the behaviour before congestion control; for comparisons)");
  cmd->add_flag("--json", a->json, "Print one JSON object instead of the table");
  cmd->add_option("--bind", a->bind, "IPv4 address of the data-plane socket")
      ->capture_default_str();
  cmd->add_option("--port", a->port,
                  "UDP port of every agent (testing only: switches parse INA on 48864 alone)")
      ->capture_default_str();
  cmd->add_option("--refresh-ms", a->refresh_ms,
                  "Poll the job's configuration this often and follow re-plans (0: never; "
                  "not with --config-file)")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}))
      ->capture_default_str();
  cmd->add_option("--gso", a->gso,
                  "UDP segmentation offload for batches of packets to one destination: auto "
                  "(loopback destinations only: a packet socket on a veth, as BMv2's, would see "
                  "one unsegmented frame), on (every destination: real NICs), off")
      ->check(CLI::IsMember({"off", "auto", "on"}))
      ->capture_default_str();
  cmd->add_option("--drop-percent", a->drop_percent,
                  "Testing: discard this percentage of sent packets (deterministic)")
      ->check(CLI::Range(0.0, 100.0));
}

// The gradient size: --size, else the job's gradient_bytes (a multiple of 4), else 1 MiB.
int64_t GradientBytes(const CommonArgs& a, const agent::JobConfig& config) {
  if (a.size_option->count() > 0 || config.gradient_bytes < 4) return a.size_bytes;
  return config.gradient_bytes / 4 * 4;
}

// Checks the shared options, loads the configuration; exit 2 / 1 on failure.
agent::JobConfig LoadConfig(const CommonArgs& a, agent::SocketOptions* socket) {
  std::optional<uint32_t> bind = core::ParseIpv4(a.bind);
  if (!bind.has_value()) Fail(kExitBadInput, absl::StrCat("--bind: not an IPv4 address: ", a.bind));
  if (a.size_bytes <= 0 || a.size_bytes % 4 != 0) {
    Fail(kExitBadInput, "--size: must be a positive multiple of 4 bytes");
  }
  socket->bind_address = *bind;
  socket->port = a.port;
  socket->drop_percent = a.drop_percent;
  auto gso = agent::ParseGsoMode(a.gso);
  if (!gso.ok()) Fail(kExitBadInput, std::string(gso.status().message()));
  socket->gso = *gso;
  socket->drop_seed = (static_cast<uint64_t>(*bind) << 16) ^ a.port ^ static_cast<uint64_t>(a.job);
  Json json;
  std::string source;
  if (!a.config_file.empty()) {
    auto text = core::ReadFile(a.config_file);
    if (!text.ok()) Fail(kExitBadInput, std::string(text.status().message()));
    auto config = agent::ParseJobConfig(*text);
    if (!config.ok())
      Fail(kExitBadInput, absl::StrCat(a.config_file, ": ", config.status().message()));
    if (config->job_id != a.job) {
      Fail(kExitBadInput,
           absl::StrCat(a.config_file, ": job_id ", config->job_id, " is not --job ", a.job));
    }
    return std::move(*config);
  }
  auto client = northbound::ApiClient::Create(
      northbound::ApiClientOptions{a.server, a.token, 10000, false, a.ca_cert});
  if (!client.ok()) Fail(client.status());
  auto reply = (*client)->Call("GET", absl::StrCat("/jobs/", a.job, "/config"));
  if (!reply.ok()) Fail(reply.status());
  auto config = agent::JobConfigFromJson(reply->body);
  if (!config.ok()) {
    Fail(kExitFailure, absl::StrCat("GET /jobs/", a.job, "/config: ", config.status().message()));
  }
  return std::move(*config);
}

ConfigWatcher::ConfigWatcher(const CommonArgs& a, int64_t plan_version, agent::ConfigFeed* feed) {
  if (!a.config_file.empty() || a.refresh_ms <= 0) return;
  auto client = northbound::ApiClient::Create(
      northbound::ApiClientOptions{a.server, a.token, 2000, false, a.ca_cert});
  if (!client.ok()) return;
  poller_ = std::make_unique<agent::ConfigPoller>(
      [client = std::shared_ptr<northbound::ApiClient>(std::move(*client)),
       job = a.job]() -> absl::StatusOr<agent::JobConfig> {
        auto reply = client->Call("GET", absl::StrCat("/jobs/", job, "/config"));
        if (!reply.ok()) return reply.status();
        return agent::JobConfigFromJson(reply->body);
      },
      plan_version, absl::Milliseconds(a.refresh_ms), feed,
      [job = a.job](const absl::Status& s) {
        std::cerr << "inac: warning: cannot follow re-plans of job " << job << ": " << s.message()
                  << " (retrying)" << std::endl;
      });
}

// The netns fd (or -1); exit 2 when the namespace does not exist, 1 otherwise.
int OpenNamespace(const CommonArgs& a) {
  if (a.netns.empty()) return -1;
  auto fd = agent::OpenNetns(a.netns);
  if (!fd.ok()) {
    const bool bad = fd.status().code() == absl::StatusCode::kNotFound ||
                     fd.status().code() == absl::StatusCode::kInvalidArgument;
    Fail(bad ? kExitBadInput : kExitFailure, std::string(fd.status().message()));
  }
  return *fd;
}

// Distinct members of the tags (all of them, or those of PS `ps`): n of busbw.
int DistinctWorkers(const agent::JobConfig& config, const std::string& ps) {
  std::set<std::string> names;
  for (const auto& t : config.tags) {
    if (!ps.empty() && t.ps != ps) continue;
    for (const auto& m : t.members) names.insert(m.worker);
  }
  return static_cast<int>(names.size());
}

int ExitFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

}  // namespace agent_verbs

void AddAgentCommands(CLI::App& app) {
  agent_verbs::AddWorkerCommand(app);
  agent_verbs::AddPsCommand(app);
}

}  // namespace inac::cli
