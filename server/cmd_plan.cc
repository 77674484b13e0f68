#include "server/cmd_plan.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "core/json.h"
#include "scheduler/routing/routing_algorithm.h"
#include "server/cli.h"
#include "server/cli_util.h"

namespace inac::server {
namespace {

struct PlanArgs {
  std::string topology;
  std::string jobs;
  std::string algorithm = "grid";
  uint64_t seed = 1;
  int rounds = 32;
  int paths = 4;
  double time_limit_s = 30;
  bool compact = false;
};

// JSON numbers cannot be infinite: unbounded rates print as null.
core::Json Number(double v) { return std::isfinite(v) ? core::Json(v) : core::Json(nullptr); }

int Run(const PlanArgs& a) {
  bool bad = false;
  std::optional<core::Topology> topology = LoadTopologyFile(a.topology);
  if (!topology) bad = true;
  auto text = ReadFile(a.jobs);
  std::optional<std::vector<core::JobSpec>> specs;
  if (!text.ok()) {
    std::cerr << "inac: " << text.status().message() << "\n";
    bad = true;
  } else {
    std::vector<core::Problem> problems;
    specs = core::ParseJobsFile(*text, topology ? &*topology : nullptr, &problems);
    if (!specs) {
      PrintProblems(a.jobs, problems);
      bad = true;
    }
  }
  if (a.paths < 1) {
    std::cerr << "inac: --paths must be at least 1\n";
    bad = true;
  }
  if (a.rounds < 0) {
    std::cerr << "inac: --rounds must not be negative\n";
    bad = true;
  }
  if (bad) return kExitBadInput;

  scheduler::PlanningInput input;
  input.topology = *std::move(topology);
  // Job ids are positions in the jobs file (1-based). Ring all-reduce jobs are not routed by
  // these algorithms (they have no PS); they are listed under "not_planned".
  core::Json not_planned = core::Json::array();
  for (size_t i = 0; i < specs->size(); ++i) {
    const core::JobSpec& spec = (*specs)[i];
    const auto id = static_cast<core::JobId>(i + 1);
    if (spec.allreduce == core::AllReduce::kRing || spec.parameter_servers.empty()) {
      not_planned.push_back({{"job_id", id},
                             {"name", spec.name},
                             {"reason",
                              "ring all-reduce: the routing algorithms of inac plan "
                              "route parameter-server jobs only"}});
      continue;
    }
    input.jobs.push_back(scheduler::JobInput{id, spec});
  }
  input.seed = a.seed;
  input.options.rounds = a.rounds;
  input.options.paths = a.paths;
  input.options.mip_time_limit_s = a.time_limit_s;
  input.options.lp_time_limit_s = a.time_limit_s;

  auto algorithm = scheduler::MakeRoutingAlgorithm(a.algorithm);
  if (!algorithm.ok()) {
    std::cerr << "inac: " << algorithm.status().message() << "\n";
    return kExitBadInput;
  }
  auto start = std::chrono::steady_clock::now();
  auto planned = scheduler::PlanRouting(**algorithm, input);
  double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!planned.ok()) {
    std::cerr << "inac: " << planned.status().message() << "\n";
    return planned.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput
                                                                         : kExitFailure;
  }
  planned->plan.solve_ms = solve_ms;
  core::Json out = core::PlanToJson(planned->plan);
  for (size_t j = 0; j < planned->plan.jobs.size(); ++j) {
    const core::JobPlan& jp = planned->plan.jobs[j];
    const scheduler::JobEvaluation& ev = planned->evaluation.jobs[j];
    const scheduler::JobDiagnostics& d = planned->diagnostics[j];
    core::Json& job = out["jobs"][j];
    job["name"] = input.jobs[j].spec.name;
    job["rate_gbps"] = Number(jp.rate_gbps);
    job["down_gbps"] = Number(ev.down_gbps);
    job["comm_ms"] = Number(jp.comm_ms);
    job["iteration_ms"] = Number(jp.iteration_ms);
    job["bottleneck"] = ev.bottleneck;
    if (jp.lp_bound_gbps && *jp.lp_bound_gbps > 0) {
      job["rate_over_lp_bound"] = Number(jp.rate_gbps / *jp.lp_bound_gbps);
    }
    core::Json planner = {{"source", d.source}, {"joint", d.joint}};
    if (!d.lp_status.empty()) {
      planner["lp_status"] = d.lp_status;
      planner["lp_columns"] = d.lp_columns;
      planner["lp_rows"] = d.lp_rows;
    }
    job["planner"] = planner;
  }
  if (!not_planned.empty()) out["not_planned"] = not_planned;
  std::cout << out.dump(a.compact ? -1 : 2) << "\n";
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "Plan routing offline: topology + jobs -> plan JSON (what the controller would do)");
  auto args = std::make_shared<PlanArgs>();
  cmd->add_option("--topology", args->topology, "Topology JSON file")->required();
  cmd->add_option("--jobs", args->jobs, "Jobs JSON file ({\"jobs\": [...]})")->required();
  cmd->add_option("--algorithm", args->algorithm, "no_ina|atp|switchml|grid|inart|optimal")
      ->check(CLI::IsMember(scheduler::RoutingAlgorithmNames()))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the randomised rounding")->capture_default_str();
  cmd->add_option("--rounds", args->rounds, "Randomised rounding repetitions R")
      ->capture_default_str();
  cmd->add_option("--paths", args->paths, "Candidate paths k per (source, destination)")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit_s, "Solver time limit per LP/MIP, seconds")
      ->capture_default_str();
  cmd->add_flag("--compact", args->compact, "Print JSON on one line");
  cmd->callback([args] {
    int code = Run(*args);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace inac::server
