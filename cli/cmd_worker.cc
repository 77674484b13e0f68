// `inac worker` (cli/cmd_agent.h): the worker agent of a job -- the plain INA worker, and the
// ring roles of Rina jobs (docs/rina.md) -- over the shared plumbing of cli/cmd_agent_common.h.
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/config_feed.h"
#include "agent/gradient.h"
#include "agent/job_config.h"
#include "agent/report.h"
#include "agent/rina_agent.h"
#include "agent/ring.h"
#include "agent/worker.h"
#include "cli/cli.h"
#include "cli/cmd_agent_common.h"
#include "nlohmann/json.hpp"

namespace inac::cli::agent_verbs {
namespace {

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

// A ring job's rack worker: the worker agent on its rack's tag, a whole iteration at a time;
// --check verifies the ring's sum over every worker of the job. Closes `netns`.
void RunRackWorker(const WorkerArgs& a, const agent::JobConfig& config,
                   const agent::SocketOptions& socket, const std::vector<int32_t>& input, int netns,
                   int workers,
                   const std::function<void(const agent::IterationStats&)>& print_line) {
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
    RunRackWorker(a, config, socket, input, netns, workers, print_line);
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

}  // namespace

void AddWorkerCommand(CLI::App& app) {
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

}  // namespace inac::cli::agent_verbs
