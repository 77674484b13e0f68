#include "cli/cmd_sim.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/files.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/trace.h"

namespace inac::cli {
namespace {

using scheduler::MemoryPolicy;

struct SimArgs {
  std::string topology;
  std::string trace;
  std::string generate;
  int jobs = 0;
  uint64_t seed = 1;
  int64_t iterations = 1000;
  std::string workers = "2,4,8";
  std::vector<std::string> models;
  std::string policy = "esa";
  std::string routing;  // default: no_ina for --policy no_ina, atp otherwise
  std::string placement = "shared";
  double spread_us = 2.0;
  std::string stragglers = "none";
  double straggler_us = 0;
  double link_latency_us = 1.0;
  double host_turnaround_us = 2.0;
  double milestone = 0.1;
  std::string traffic = "onoff";
  bool json = false;
  std::string timeline;
  // InGo (docs/batch-size.md): fixed | adaptive | compare (both, and the reduction).
  std::string batch = "fixed";
  int batch_size = 32;
  std::string batch_sizes = "8,16,32,64,128,256";
};

[[noreturn]] void Fail(int code, const std::string& message) {
  std::cerr << "inac sim: " << message << "\n";
  throw CLI::RuntimeError(code);
}

int ExitCodeFor(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
}

// A progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  ProgressBar() : enabled_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() {
    if (enabled_ && drawn_ >= 0) std::cerr << "\r\033[K" << std::flush;
  }
  void Update(double fraction) {
    if (!enabled_) return;
    const int percent = static_cast<int>(fraction * 100);
    if (percent == drawn_) return;
    drawn_ = percent;
    const int width = 40;
    const int filled = percent * width / 100;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] "
              << percent << "%" << std::flush;
  }

 private:
  bool enabled_;
  int drawn_ = -1;
};

nlohmann::json ToJson(const SimArgs& a, const scheduler::SimResult& r) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const scheduler::SimJobResult& j : r.jobs) {
    jobs.push_back({{"id", j.id},
                    {"name", j.name},
                    {"model", j.model},
                    {"workers", j.workers},
                    {"hosts", j.hosts},
                    {"parameter_servers", j.parameter_servers},
                    {"arrival_s", j.arrival_s},
                    {"start_s", j.start_s},
                    {"finish_s", j.finish_s},
                    {"jct_s", j.jct_s},
                    {"fallback_bytes", j.fallback_bytes},
                    {"preemptions", j.preemptions},
                    {"batch_size", j.batch_size},
                    {"batch_changes", j.batch_changes}});
  }
  nlohmann::json switches = nlohmann::json::object();
  for (const auto& [id, s] : r.summary.switches) {
    switches[id] = {{"aggregators", s.aggregators},
                    {"mean_utilisation", s.mean_utilisation},
                    {"peak_in_use", s.peak_in_use}};
  }
  const scheduler::SimSummary& s = r.summary;
  return {{"policy", a.policy},
          {"routing", a.routing},
          {"batch", a.batch},
          {"traffic", a.traffic},
          {"jobs", jobs},
          {"summary",
           {{"jobs", s.jobs},
            {"mean_jct_s", s.mean_jct_s},
            {"p50_jct_s", s.p50_jct_s},
            {"p99_jct_s", s.p99_jct_s},
            {"makespan_s", s.makespan_s},
            {"switches", switches},
            {"preemptions", s.preemptions},
            {"fallback_bytes", s.fallback_bytes},
            {"events", s.events},
            {"routings", s.routings}}}};
}

void PrintText(const SimArgs& a, const scheduler::SimResult& r) {
  std::printf("%-12s %-11s %7s %10s %10s %10s %10s %14s %12s\n", "job", "model", "workers",
              "arrival_s", "start_s", "finish_s", "jct_s", "fallback_bytes", "preemptions");
  for (const scheduler::SimJobResult& j : r.jobs) {
    std::printf("%-12s %-11s %7d %10.3f %10.3f %10.3f %10.3f %14.4g %12.4g\n", j.name.c_str(),
                j.model.empty() ? "-" : j.model.c_str(), j.workers, j.arrival_s, j.start_s,
                j.finish_s, j.jct_s, j.fallback_bytes, j.preemptions);
  }
  const scheduler::SimSummary& s = r.summary;
  std::printf("\npolicy %s, routing %s, traffic %s: %d jobs\n", a.policy.c_str(), a.routing.c_str(),
              a.traffic.c_str(), s.jobs);
  std::printf("mean JCT %.3f s, p50 %.3f s, p99 %.3f s, makespan %.3f s\n", s.mean_jct_s,
              s.p50_jct_s, s.p99_jct_s, s.makespan_s);
  std::printf("preemptions %.4g, fallback bytes %.4g\n", s.preemptions, s.fallback_bytes);
  for (const auto& [id, sw] : s.switches) {
    std::printf("switch %s: %lld aggregators, mean utilisation %.1f %%, peak in use %.0f\n",
                id.c_str(), static_cast<long long>(sw.aggregators), 100 * sw.mean_utilisation,
                sw.peak_in_use);
  }
}

void Run(SimArgs a) {
  // Every problem of the files and options is reported before exiting (exit 2).
  std::optional<core::Topology> topology = LoadTopologyFile(a.topology);
  bool bad = !topology;

  std::vector<std::string> problems;
  std::optional<MemoryPolicy> policy = scheduler::ParseMemoryPolicy(a.policy);
  if (!policy) problems.push_back("--policy must be esa, atp, switchml or no_ina");
  if (a.routing.empty()) a.routing = policy == MemoryPolicy::kNoIna ? "no_ina" : "atp";
  auto routing = scheduler::MakeRoutingAlgorithm(a.routing);
  if (!routing.ok()) problems.push_back(std::string(routing.status().message()));
  std::optional<scheduler::PlacementRule> placement = scheduler::ParsePlacementRule(a.placement);
  if (!placement) problems.push_back("--placement must be shared, pack, spread or random");
  std::optional<scheduler::StragglerDistribution> stragglers;
  if (a.stragglers == "none") stragglers = scheduler::StragglerDistribution::kNone;
  if (a.stragglers == "uniform") stragglers = scheduler::StragglerDistribution::kUniform;
  if (a.stragglers == "exponential") stragglers = scheduler::StragglerDistribution::kExponential;
  if (!stragglers) problems.push_back("--stragglers must be none, uniform or exponential");
  if (!(a.straggler_us >= 0)) problems.push_back("--straggler-us must be >= 0");
  if (a.trace.empty() == a.generate.empty()) {
    problems.push_back("give exactly one of --trace FILE and --generate ARRIVALS");
  }
  if (!a.generate.empty() && a.jobs < 1) problems.push_back("--generate needs --jobs N (N >= 1)");
  if (!a.generate.empty()) {
    auto arrivals = scheduler::ParseArrivalProcess(a.generate);
    if (!arrivals.ok()) problems.push_back(std::string(arrivals.status().message()));
  }
  if (!(a.milestone > 0 && a.milestone <= 1)) problems.push_back("--milestone must be in (0, 1]");
  if (a.traffic != "onoff" && a.traffic != "continuous") {
    problems.push_back("--traffic must be onoff or continuous");
  }
  if (a.batch != "fixed" && a.batch != "adaptive" && a.batch != "compare") {
    problems.push_back("--batch must be fixed, adaptive or compare");
  }
  std::vector<int> batch_choices;
  for (absl::string_view part : absl::StrSplit(a.batch_sizes, ',', absl::SkipEmpty())) {
    int b = 0;
    if (!absl::SimpleAtoi(part, &b) || b < 1 || b > (1 << 20)) {
      problems.push_back("--batch-sizes must be a comma-separated list of sizes in [1, 2^20]");
      break;
    }
    batch_choices.push_back(b);
  }
  if (a.batch_size < 1 || a.batch_size > (1 << 20)) {
    problems.push_back("--batch-size must be in [1, 2^20]");
  }
  std::vector<int> worker_counts;
  for (absl::string_view part : absl::StrSplit(a.workers, ',', absl::SkipEmpty())) {
    int w = 0;
    if (!absl::SimpleAtoi(part, &w) || w < 1) {
      problems.push_back("--workers must be a comma-separated list of counts >= 1");
      break;
    }
    worker_counts.push_back(w);
  }
  for (const std::string& p : problems) std::cerr << "inac sim: " << p << "\n";
  bad = bad || !problems.empty();

  std::vector<scheduler::TraceJob> trace;
  if (!a.trace.empty()) {
    absl::StatusOr<std::string> text = core::ReadFile(a.trace);
    if (!text.ok()) Fail(kExitBadInput, std::string(text.status().message()));
    std::vector<core::Problem> trace_problems;
    auto parsed = scheduler::ParseTrace(*text, &trace_problems);
    if (parsed && topology) {
      // Hosts named by the trace must be hosts of the topology.
      for (size_t i = 0; i < parsed->size(); ++i) {
        const scheduler::TraceJob& job = (*parsed)[i];
        for (const auto& [field, list] : {std::pair{"hosts", &job.hosts},
                                          std::pair{"parameter_servers", &job.parameter_servers}}) {
          for (size_t k = 0; k < list->size(); ++k) {
            int v = -1;
            for (size_t h = 0; h < topology->hosts.size() && v < 0; ++h) {
              if (topology->hosts[h].id == (*list)[k]) v = static_cast<int>(h);
            }
            if (v < 0) {
              trace_problems.push_back(
                  {absl::StrFormat("jobs[%d].%s[%d]", i, field, k),
                   absl::StrFormat("unknown host \"%s\" (not in the topology)", (*list)[k])});
            }
          }
        }
      }
    }
    if (!trace_problems.empty()) {
      PrintProblems(a.trace, trace_problems);
      bad = true;
    } else if (parsed) {
      trace = *std::move(parsed);
    }
    if (bad) throw CLI::RuntimeError(kExitBadInput);
  } else {
    if (bad) throw CLI::RuntimeError(kExitBadInput);
    auto arrivals = scheduler::ParseArrivalProcess(a.generate);
    if (!arrivals.ok()) Fail(kExitBadInput, std::string(arrivals.status().message()));
    auto generated = scheduler::GenerateTrace({.arrivals = *arrivals,
                                               .jobs = a.jobs,
                                               .seed = a.seed,
                                               .models = a.models,
                                               .worker_counts = worker_counts,
                                               .iterations = a.iterations});
    if (!generated.ok()) Fail(kExitBadInput, std::string(generated.status().message()));
    trace = *std::move(generated);
  }

  // Jobs without a batch (generated, or a trace without the columns) get --batch-size and, unless
  // --batch fixed, the choices of --batch-sizes.
  for (scheduler::TraceJob& job : trace) {
    if (job.batch_size > 0) continue;
    job.batch_size = a.batch_size;
    if (a.batch != "fixed") job.batch_sizes = batch_choices;
  }
  scheduler::SimOptions options;
  options.policy = *policy;
  options.routing = routing->get();
  options.placement = *placement;
  options.seed = a.seed;
  options.milestone_fraction = a.milestone;
  options.traffic = a.traffic == "continuous" ? scheduler::TrafficModel::kContinuous
                                              : scheduler::TrafficModel::kOnOff;
  options.timing = {
      .default_link_latency_us = a.link_latency_us,
      .host_turnaround_us = a.host_turnaround_us,
      .arrival_spread_us = a.spread_us,
      .stragglers = {.distribution = *stragglers, .spread_us = a.straggler_us, .seed = a.seed}};
  options.record_timeline = !a.timeline.empty();
  absl::StatusOr<scheduler::SimResult> result;
  auto simulate = [&](bool adaptive) {
    options.adaptive_batch = adaptive;
    ProgressBar bar;
    absl::StatusOr<scheduler::SimResult> r = scheduler::Simulate(
        *topology, trace, options, [&bar](double fraction) { bar.Update(fraction); });
    if (!r.ok()) Fail(ExitCodeFor(r.status()), std::string(r.status().message()));
    return r;
  };
  if (a.batch == "compare") {
    // Fixed against adaptive batch on the same trace, routing and memory policy.
    SimArgs fixed_args = a, adaptive_args = a;
    fixed_args.batch = "fixed";
    adaptive_args.batch = "adaptive";
    absl::StatusOr<scheduler::SimResult> fixed = simulate(false);
    result = simulate(true);
    const double reduction = fixed->summary.mean_jct_s > 0
                                 ? 1 - result->summary.mean_jct_s / fixed->summary.mean_jct_s
                                 : 0;
    if (a.json) {
      nlohmann::json out = {{"fixed", ToJson(fixed_args, *fixed)},
                            {"adaptive", ToJson(adaptive_args, *result)},
                            {"mean_jct_reduction", reduction}};
      std::cout << out.dump(2) << "\n";
    } else {
      std::printf("== fixed batch ==\n");
      PrintText(fixed_args, *fixed);
      std::printf("\n== adaptive batch (InGo) ==\n");
      PrintText(adaptive_args, *result);
      std::printf("\nmean JCT: fixed %.3f s, adaptive %.3f s (%+.1f %%)\n",
                  fixed->summary.mean_jct_s, result->summary.mean_jct_s, -100 * reduction);
    }
    return;
  }
  result = simulate(a.batch == "adaptive");

  if (!a.timeline.empty()) {
    std::ofstream out(a.timeline, std::ios::binary | std::ios::trunc);
    out << scheduler::TimelineToCsv(result->timeline);
    out.close();
    if (!out) Fail(kExitFailure, "cannot write " + a.timeline);
  }
  if (a.json) {
    std::cout << ToJson(a, *result).dump(2) << "\n";
  } else {
    PrintText(a, *result);
  }
}

}  // namespace

void AddSimCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "sim", "Replay a job trace through the scheduler (flow-level) and report JCTs per policy");
  auto a = std::make_shared<SimArgs>();
  cmd->add_option("--topology", a->topology, "Topology JSON file")->required();
  cmd->add_option("--trace", a->trace, "Job trace, CSV or JSON (docs/memory.md)");
  cmd->add_option("--generate,--arrivals", a->generate,
                  "Generate the trace: poisson:RATE (jobs/s) or all-at-zero");
  cmd->add_option("--jobs", a->jobs, "Jobs to generate");
  cmd->add_option("--seed", a->seed, "Seed of the generator, random placement and routing")
      ->capture_default_str();
  cmd->add_option("--iterations", a->iterations, "Iterations of generated jobs")
      ->capture_default_str();
  cmd->add_option("--workers", a->workers, "Worker counts of generated jobs, drawn uniformly")
      ->capture_default_str();
  cmd->add_option("--models", a->models, "Models of generated jobs (default: every built-in)");
  cmd->add_option("--policy", a->policy, "Memory policy: esa|atp|switchml|no_ina")
      ->capture_default_str();
  cmd->add_option("--routing", a->routing,
                  "Routing algorithm (no_ina|atp|atp_sharded|switchml|grid|grid-split|inart|...; "
                  "default atp, no_ina "
                  "for --policy no_ina)");
  cmd->add_option("--placement", a->placement, "Host placement: shared|pack|spread|random")
      ->capture_default_str();
  cmd->add_option("--spread-us", a->spread_us, "Arrival spread of a chunk's fragments")
      ->capture_default_str();
  cmd->add_option("--stragglers", a->stragglers,
                  "Per-chunk worker arrival offsets: none|uniform|exponential (docs/memory.md)")
      ->capture_default_str();
  cmd->add_option("--straggler-us", a->straggler_us,
                  "Straggler spread: uniform on [0, this] or exponential of this mean")
      ->capture_default_str();
  cmd->add_option("--link-latency-us", a->link_latency_us, "Latency of links that state none")
      ->capture_default_str();
  cmd->add_option("--host-turnaround-us", a->host_turnaround_us, "PS turnaround per round trip")
      ->capture_default_str();
  cmd->add_option("--milestone", a->milestone, "Re-plan every this fraction of a job's iterations")
      ->capture_default_str();
  cmd->add_option("--traffic", a->traffic,
                  "onoff: jobs load links and memory only while communicating; continuous: "
                  "always (docs/memory.md)")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "Print JSON instead of a table");
  cmd->add_option("--batch", a->batch,
                  "Batch sizes: fixed (as submitted) | adaptive (InGo's joint choice) | compare")
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size,
                  "Per-worker batch of jobs whose trace gives none (compute_ms is at it)")
      ->capture_default_str();
  cmd->add_option("--batch-sizes", a->batch_sizes,
                  "Allowed per-worker batches of those jobs (--batch adaptive|compare)")
      ->capture_default_str();
  cmd->add_option("--timeline", a->timeline, "Write one CSV row per event to this file");
  cmd->callback([a] { Run(*a); });
}

}  // namespace inac::cli
