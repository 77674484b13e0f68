// `inac ps` (cli/cmd_agent.h): the parameter-server agent of a job -- a run of --iterations
// all-reduces, or --serve for client sessions -- over the shared plumbing of
// cli/cmd_agent_common.h; it reports the job's progress at the end.
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/config_feed.h"
#include "agent/job_config.h"
#include "agent/ps.h"
#include "agent/ps_serve.h"
#include "agent/report.h"
#include "cli/cli.h"
#include "cli/cmd_agent_common.h"
#include "nlohmann/json.hpp"
#include "northbound/api_client.h"

namespace inac::cli::agent_verbs {
namespace {

using Json = nlohmann::json;

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

void AddPsCommand(CLI::App& app) {
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

}  // namespace inac::cli::agent_verbs
