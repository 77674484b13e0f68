#include "cli/cmd_agent.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/config_feed.h"
#include "agent/gradient.h"
#include "agent/job_config.h"
#include "agent/packet.h"
#include "agent/ps.h"
#include "agent/ps_serve.h"
#include "agent/report.h"
#include "agent/rina_agent.h"
#include "agent/ring.h"
#include "agent/worker.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/files.h"
#include "core/topology.h"
#include "northbound/api_client.h"

namespace inac::cli {
namespace {

using Json = nlohmann::json;

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

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

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : std::string(fallback);
}

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

// While the data plane runs, polls GET /jobs/{id}/config every --refresh-ms on a thread of its
// own (in the caller's namespace, where the controller is) and publishes each configuration with
// another plan version to `feed`, which the agent's loop follows (agent/config_feed.h). A failed
// poll (controller restarting, job gone) is retried at the next period; the first failure of a
// series is reported on stderr.
class ConfigWatcher {
 public:
  ConfigWatcher(const CommonArgs& a, int64_t plan_version, agent::ConfigFeed* feed) {
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

 private:
  std::unique_ptr<agent::ConfigPoller> poller_;
};

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
int DistinctWorkers(const agent::JobConfig& config, const std::string& ps = "") {
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

struct WorkerArgs : CommonArgs {
  std::string worker;
  uint64_t seed = 1;
  std::string input;
  bool is_float = false;
  int scale_bits = 16;
  std::string output;
  int64_t timeout_ms = 20;
  int64_t max_timeout_ms = 1000;
  int64_t give_up_ms = 30000;
  bool check = false;
};

// The options every worker agent takes from the command line (the plain worker and a Rina
// rack-worker); the caller adds its socket, input and role-specific fields.
void SetWorkerOptions(const WorkerArgs& a, const agent::JobConfig& config,
                      agent::WorkerOptions* o) {
  o->worker = a.worker;
  o->lanes = GradientBytes(a, config) / 4;
  o->iterations = a.iterations;
  o->seed = a.seed;
  o->window = a.window;
  o->congestion_control = !a.no_congestion_control;
  o->timeout_ms = a.timeout_ms;
  o->max_timeout_ms = std::max(a.max_timeout_ms, a.timeout_ms);
  o->give_up_ms = a.give_up_ms;
  o->check = a.check;
  o->stop = &g_stop;
}

// Ring all-reduce jobs (docs/rina.md "Host roles"): members and agents run
// agent::RunRingMember (an agent also sums its rack as the PS of the rack's tag); rack workers
// run the worker agent on their rack's tag, a whole iteration at a time, and --check verifies the
// ring's sum over every worker of the job.
void RunRingWorker(const WorkerArgs& a, const agent::JobConfig& config,
                   const agent::SocketOptions& socket) {
  std::string role;
  for (const auto& r : config.ring_roles) {
    if (r.worker == a.worker) role = r.role;
  }
  if (role.empty()) {
    Fail(kExitBadInput,
         absl::StrCat("worker \"", a.worker, "\" has no ring role in job ", config.job_id));
  }
  std::vector<int32_t> input;
  if (!a.input.empty()) {
    if (a.size_option->count() > 0) Fail(kExitBadInput, "--size and --input: choose one");
    auto file = agent::ReadGradientFile(a.input, agent::FileFormat{a.is_float, a.scale_bits});
    if (!file.ok()) Fail(kExitBadInput, std::string(file.status().message()));
    input = std::move(file->lanes);
  }
  const int workers = static_cast<int>(agent::RingJobWorkers(config).size());
  bool header = false;
  auto print_line = [&](const agent::IterationStats& s) {
    if (a.json) return;
    if (!header) {
      std::cout << "# inac worker: ring job " << config.job_id << " (plan " << config.plan_version
                << "), worker " << a.worker << " (" << role << "), " << s.size_bytes << " bytes, "
                << a.iterations << " iterations\n"
                << agent::TableHeader() << "\n";
      header = true;
    }
    std::cout << agent::TableLine(s, workers) << std::endl;
  };
  const int netns = OpenNamespace(a);
  InstallStopHandlers();
  if (role == "rack-worker") {
    auto rack = agent::RackConfigFor(config, a.worker);
    if (!rack.ok()) Fail(kExitFailure, std::string(rack.status().message()));
    agent::WorkerOptions o;
    SetWorkerOptions(a, config, &o);
    o.socket = socket;
    if (!input.empty()) o.input = &input;
    o.check_workers = agent::RingJobWorkers(config);
    o.acknowledged_window = true;
    o.netns_fd = netns;
    o.on_iteration = print_line;
    auto report = agent::RunWorker(*rack, o);
    if (netns >= 0) ::close(netns);
    if (!report.ok()) Fail(ExitFor(report.status()), std::string(report.status().message()));
    if (a.json) {
      nlohmann::json j = agent::WorkerReportJson(*report);
      j["role"] = "rack-worker";
      std::cout << j.dump() << "\n";
    } else {
      std::cout << agent::SummaryLine(report->iterations, workers) << "\n"
                << "# rack worker of " << rack->tags.front().ps
                << "  retransmitted: " << report->retransmissions
                << "  check: " << (report->checked ? "ok" : "skipped") << std::endl;
    }
    return;
  }
  agent::RinaOptions o;
  o.worker = a.worker;
  o.lanes = GradientBytes(a, config) / 4;
  if (!input.empty()) o.input = &input;
  o.iterations = a.iterations;
  o.seed = a.seed;
  o.check = a.check;
  o.window = a.window > 0 ? static_cast<int>(a.window) : o.window;
  o.timeout_us = a.timeout_ms * 1000;
  o.max_timeout_us = std::max(a.max_timeout_ms, a.timeout_ms) * 1000;
  o.give_up_ms = a.give_up_ms;
  o.socket = socket;
  o.netns_fd = netns;
  o.stop = &g_stop;
  o.on_iteration = [&](const agent::IterationStats& s, const agent::RingReport&) { print_line(s); };
  auto report = agent::RunRingMember(config, o);
  if (netns >= 0) ::close(netns);
  if (!report.ok()) Fail(ExitFor(report.status()), std::string(report.status().message()));
  if (a.json) {
    std::cout << agent::RinaReportJson(*report).dump() << "\n";
  } else {
    std::cout << agent::SummaryLine(report->iterations, workers) << "\n"
              << "# ring " << report->role << " " << a.worker << ": " << report->members
              << " members";
    if (report->has_rack) std::cout << ", rack of " << report->rack_workers << " more workers";
    std::cout << "  check: " << (report->checked ? "ok" : "skipped") << std::endl;
  }
}

void RunWorkerVerb(const WorkerArgs& a) {
  agent::WorkerOptions o;
  agent::JobConfig config = LoadConfig(a, &o.socket);
  if (!config.ring.empty()) {
    RunRingWorker(a, config, o.socket);
    return;
  }
  agent::FileFormat format{a.is_float, a.scale_bits};
  std::vector<int32_t> input;
  if (!a.input.empty()) {
    if (a.size_option->count() > 0) Fail(kExitBadInput, "--size and --input: choose one");
    auto file = agent::ReadGradientFile(a.input, format);
    if (!file.ok()) Fail(kExitBadInput, std::string(file.status().message()));
    if (file->saturated > 0) {
      std::cerr << "inac: warning: " << file->saturated << " values of " << a.input
                << " saturated the int32 range at --scale-bits " << a.scale_bits << "\n";
    }
    input = std::move(file->lanes);
    o.input = &input;
  } else if (a.is_float) {
    Fail(kExitBadInput, "--float: needs --input");
  }
  SetWorkerOptions(a, config, &o);
  std::vector<int32_t> result;
  if (!a.output.empty()) o.result = &result;
  bool header = false;
  const int netns = OpenNamespace(a);
  const int workers = DistinctWorkers(config);
  if (!a.json) {
    o.on_iteration = [&](const agent::IterationStats& s) {
      if (!header) {
        std::cout << "# inac worker: job " << config.job_id << " (plan " << config.plan_version
                  << "), worker " << a.worker << ", " << s.size_bytes << " bytes, " << a.iterations
                  << " iterations\n"
                  << agent::TableHeader() << "\n";
        header = true;
      }
      std::cout << agent::TableLine(s, workers) << std::endl;
    };
  }
  o.netns_fd = netns;
  InstallStopHandlers();
  agent::ConfigFeed feed;
  o.updates = &feed;
  absl::StatusOr<agent::WorkerReport> report;
  {
    ConfigWatcher watcher(a, config.plan_version, &feed);
    report = agent::RunWorker(config, o);
  }
  if (netns >= 0) ::close(netns);
  if (!report.ok()) Fail(ExitFor(report.status()), std::string(report.status().message()));
  if (a.json) {
    std::cout << agent::WorkerReportJson(*report).dump() << "\n";
  } else {
    std::cout << agent::SummaryLine(report->iterations, report->workers) << "\n"
              << "# workers: " << report->workers << "  tags: " << report->tags
              << "  packets sent: " << report->packets_sent
              << "  retransmitted: " << report->retransmissions
              << "  duplicate results: " << report->duplicate_results
              << "  check: " << (report->checked ? "ok" : "skipped") << std::endl;
  }
  if (!a.output.empty()) {
    if (absl::Status s = agent::WriteGradientFile(a.output, result, format); !s.ok()) {
      Fail(kExitFailure, std::string(s.message()));
    }
  }
}

// The cores this process may run on (the PS's default --threads).
int DefaultThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, agent::kMaxPsThreads);
}

struct PsArgs : CommonArgs {
  std::string ps;
  double duration_s = 0;
  int64_t linger_ms = 1000;
  bool no_progress = false;
  bool unicast_results = false;
  int threads = DefaultThreads();
  bool serve = false;
};

// POST /jobs/{id}/progress; a job that is no longer running (another PS completed it, or it was
// cancelled) is a warning, not a failure.
void ReportProgress(const PsArgs& a, int64_t iterations_done) {
  auto client = northbound::ApiClient::Create(
      northbound::ApiClientOptions{a.server, a.token, 10000, false, a.ca_cert});
  if (!client.ok()) Fail(client.status());
  auto reply = (*client)->Call("POST", absl::StrCat("/jobs/", a.job, "/progress"),
                               Json{{"iterations_done", iterations_done}});
  if (reply.ok()) return;
  if (reply.status().code() == absl::StatusCode::kFailedPrecondition ||
      reply.status().code() == absl::StatusCode::kInvalidArgument) {
    std::cerr << "inac: warning: progress not recorded: " << reply.status().message() << "\n";
    return;
  }
  Fail(kExitFailure, absl::StrCat("POST /jobs/", a.job, "/progress: ", reply.status().message()));
}

// Runs a PS agent (`run`: RunPs or ServePs) with `o` as `inac ps` does: contract violations
// logged on stderr, the data plane in --netns, SIGINT/SIGTERM stopping it, re-plans followed
// from the controller. Exits (Fail) when it fails; its report otherwise.
template <typename Report>
absl::StatusOr<Report> RunPsAgent(
    const PsArgs& a, const agent::JobConfig& config, agent::PsOptions& o,
    const std::function<absl::StatusOr<Report>(const agent::PsOptions&)>& run) {
  o.log = [job = a.job, ps = a.ps](const std::string& line) {
    std::cerr << "level=warn event=ina_contract_violation job=" << job << " ps=" << ps
              << " detail=\"" << line << "\"" << std::endl;
  };
  const int netns = OpenNamespace(a);
  o.netns_fd = netns;
  InstallStopHandlers();
  agent::ConfigFeed feed;
  o.updates = &feed;
  absl::StatusOr<Report> report;
  {
    ConfigWatcher watcher(a, config.plan_version, &feed);
    report = run(o);
  }
  if (netns >= 0) ::close(netns);
  if (!report.ok()) Fail(ExitFor(report.status()), std::string(report.status().message()));
  return report;
}

// `inac ps --serve`: the PS of client sessions (agent/ps_serve.h) until SIGTERM.
void ServePsVerb(const PsArgs& a, const agent::JobConfig& config, agent::PsOptions o) {
  o.ps = a.ps;
  o.unicast_results = a.unicast_results;
  o.window = a.window;
  o.stop = &g_stop;
  if (!a.json) {
    o.on_ready = [&] {
      std::cout << "# inac ps: job " << config.job_id << " (plan " << config.plan_version
                << "), ps " << a.ps << ", serving sessions until SIGTERM, results "
                << (a.unicast_results ? "unicast" : "to the switches") << std::endl;
    };
  }
  absl::StatusOr<agent::ServeReport> report = RunPsAgent<agent::ServeReport>(
      a, config, o, [&](const agent::PsOptions& run) { return agent::ServePs(config, run); });
  const agent::PsCounters& c = report->ps.counters;
  if (a.json) {
    Json j = agent::PsReportJson(report->ps);
    j["serve"] = {{"chunks_completed", report->chunks_completed},
                  {"dropped_idle", report->dropped_idle},
                  {"stale_restarted", report->stale_restarted},
                  {"sessions", report->sessions}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "# chunks completed: " << report->chunks_completed << "  sessions "
              << report->sessions << "  dropped idle " << report->dropped_idle
              << "\n# packets: received " << c.received << "  raw " << c.raw << "  aggregate "
              << c.aggregate << "  fallback " << c.fallback << "  retransmit " << c.retransmit
              << "  duplicate " << c.duplicate << "  violation " << c.violation << "  unknown "
              << c.unknown_source + c.unknown_tag + c.malformed << "  results sent "
              << c.results_sent << " (+" << c.results_resent << " resent)"
              << "\n# contributions: " << c.contributions << "  in the network: " << c.in_network
              << std::endl;
  }
}

void RunPsVerb(const PsArgs& a) {
  agent::PsOptions o;
  agent::JobConfig config = LoadConfig(a, &o.socket);
  if (a.serve) {
    if (a.size_option->count() > 0 || a.iterations != 1 || a.duration_s > 0) {
      Fail(kExitBadInput,
           "--serve: serves all-reduces of any size until SIGTERM; drop --size, "
           "--iterations and --duration");
    }
    ServePsVerb(a, config, std::move(o));
    return;
  }
  o.ps = a.ps;
  o.lanes = GradientBytes(a, config) / 4;
  o.iterations = a.iterations;
  o.duration_ms = static_cast<int64_t>(a.duration_s * 1000);
  o.linger_ms = a.linger_ms;
  o.unicast_results = a.unicast_results;
  o.window = a.window;
  o.threads = a.threads;
  o.stop = &g_stop;
  const int workers = DistinctWorkers(config, a.ps);
  bool header = false;
  if (!a.json) {
    // Printed once the socket is bound: the PS is ready for the workers.
    o.on_ready = [&] {
      std::cout << "# inac ps: job " << config.job_id << " (plan " << config.plan_version
                << "), ps " << a.ps << ", gradient " << o.lanes * 4 << " bytes, " << a.iterations
                << " iterations, results " << (a.unicast_results ? "unicast" : "to the switches")
                << std::endl;
    };
    o.on_iteration = [&](const agent::IterationStats& s) {
      if (!header) {
        std::cout << agent::TableHeader() << "\n";
        header = true;
      }
      std::cout << agent::TableLine(s, workers) << std::endl;
    };
  }
  absl::StatusOr<agent::PsReport> report = RunPsAgent<agent::PsReport>(
      a, config, o, [&](const agent::PsOptions& run) { return agent::RunPs(config, run); });
  const agent::PsCounters& c = report->counters;
  if (a.json) {
    std::cout << agent::PsReportJson(*report).dump() << "\n";
  } else {
    std::cout << agent::SummaryLine(report->iterations, report->workers) << "\n"
              << "# packets: received " << c.received << "  raw " << c.raw << "  aggregate "
              << c.aggregate << "  fallback " << c.fallback << "  retransmit " << c.retransmit
              << "  duplicate " << c.duplicate << "  violation " << c.violation
              << "  re-plan overlaps " << c.replan_overlap << "  unknown "
              << c.unknown_source + c.unknown_tag + c.out_of_range + c.malformed
              << "  results sent " << c.results_sent << " (+" << c.results_resent << " resent)"
              << "\n"
              << "# contributions: " << c.contributions << "  in the network: " << c.in_network
              << "  iterations done: " << report->iterations_done << "/" << a.iterations
              << std::endl;
  }
  const bool report_progress =
      !a.no_progress && report->iterations_done > 0 &&
      (a.config_file.empty() || a.server_given || a.server_option->count() > 0);
  if (report_progress) ReportProgress(a, report->iterations_done);
  if (!report->complete && g_stop.load()) Fail(kExitFailure, "interrupted");
  if (!report->complete) {
    std::cerr << "inac: warning: --duration ended the run after " << report->iterations_done
              << " of " << a.iterations << " iterations\n";
  }
}

}  // namespace

void AddAgentCommands(CLI::App& app) {
  {
    auto a = std::make_shared<WorkerArgs>();
    CLI::App* cmd = app.add_subcommand(
        "worker", "Host agent: all-reduce a gradient through the job's switches and PSs");
    cmd->add_option("--worker", a->worker, "This host's id (a worker of the job)")->required();
    AddCommonOptions(cmd, a.get());
    cmd->add_option("--seed", a->seed, "Seed of the synthetic gradient")->capture_default_str();
    cmd->add_option("--input", a->input,
                    "Gradient file: raw little-endian int32 (float32 with --float)");
    cmd->add_flag("--float", a->is_float,
                  "--input holds float32: fixed point by 2^--scale-bits, rounded to nearest");
    cmd->add_option("--scale-bits", a->scale_bits, "Fixed-point scale of --float")
        ->check(CLI::Range(0, 30))
        ->capture_default_str();
    cmd->add_option("--output", a->output,
                    "Write the last iteration's sum (int32, or float32 with --float)");
    cmd->add_option("--timeout-ms", a->timeout_ms, "First retransmission timeout per chunk")
        ->check(CLI::Range(int64_t{1}, int64_t{60000}))
        ->capture_default_str();
    cmd->add_option("--max-timeout-ms", a->max_timeout_ms, "Largest retransmission timeout")
        ->check(CLI::Range(int64_t{1}, int64_t{600000}))
        ->capture_default_str();
    cmd->add_option("--give-up-ms", a->give_up_ms, "Fail when no result arrives for this long")
        ->check(CLI::Range(int64_t{1}, int64_t{86400000}))
        ->capture_default_str();
    cmd->add_flag("--check", a->check,
                  "Verify every result lane against the members' synthetic gradients");
    cmd->callback([a] { RunWorkerVerb(*a); });
  }
  {
    auto a = std::make_shared<PsArgs>();
    CLI::App* cmd = app.add_subcommand(
        "ps", "Host agent: the parameter server of a job's tags (completes sums, sends results)");
    cmd->add_option("--ps", a->ps, "This host's id (a PS of the job)")->required();
    AddCommonOptions(cmd, a.get());
    cmd->add_option("--duration", a->duration_s, "Stop after this many seconds (0: no limit)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("--linger-ms", a->linger_ms,
                    "After the last iteration, answer retransmissions until quiet this long")
        ->check(CLI::Range(int64_t{0}, int64_t{600000}))
        ->capture_default_str();
    cmd->add_flag("--no-progress", a->no_progress, "Do not POST /jobs/{id}/progress at the end");
    cmd->add_flag("--serve", a->serve,
                  "Serve client sessions (libinac_client, python/inac_torch) until SIGTERM: any "
                  "number of all-reduces of any sizes, in order (one thread)");
    cmd->add_flag("--unicast-results", a->unicast_results,
                  "Send each result to every member (no switch replicates it)");
    cmd->add_option("--threads", a->threads,
                    "Threads serving the data plane, each completing its own blocks of gradient "
                    "chunks (default: the cores)")
        ->check(CLI::Range(1, agent::kMaxPsThreads))
        ->capture_default_str();
    cmd->callback([a] { RunPsVerb(*a); });
  }
}

}  // namespace inac::cli
