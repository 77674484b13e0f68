#include "cli/cmd_plan.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/files.h"
#include "core/json.h"
#include "core/plan.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "server/plan_fingerprint.h"

namespace inac::cli {
namespace {

// Defaults: scheduler::PlannerOptions, the controller's.
struct PlanArgs {
  std::string topology;
  std::string jobs;
  std::string algorithm = scheduler::PlannerOptions{}.algorithm;
  std::string memory_policy = scheduler::PlannerOptions{}.memory_policy;
  uint64_t seed = scheduler::PlannerOptions{}.seed;
  int rounds = scheduler::PlannerOptions{}.rounds;
  int paths = scheduler::PlannerOptions{}.paths;
  int64_t spread_min_columns = scheduler::PlannerOptions{}.spread_min_columns;
  int split_max_ranges = scheduler::PlannerOptions{}.split_max_ranges;
  double time_limit_s = 0;  // 0: the planner's (LP 60 s, MIP 30 s)
  // Valid bounds up to this LP size (scheduler::PlannerOptions::bound_max_columns); the
  // controller computes none, `inac plan` does for GRID-sized fabrics (k=8: ~19,000 columns).
  int64_t bound_max_columns = 100000;
  bool compact = false;
};

// JSON numbers cannot be infinite: unbounded rates print as null.
core::Json Number(double v) { return std::isfinite(v) ? core::Json(v) : core::Json(nullptr); }

int Run(const PlanArgs& a) {
  bool bad = false;
  std::optional<core::Topology> topology = LoadTopologyFile(a.topology);
  if (!topology) bad = true;
  auto text = core::ReadFile(a.jobs);
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
  if (a.spread_min_columns < -1) {
    std::cerr << "inac: --spread-min-columns must be -1 (never), 0 (always) or a column count\n";
    bad = true;
  }
  if (a.split_max_ranges < 0 || a.split_max_ranges > core::kTagSlotsPerJob) {
    std::cerr << "inac: --split-max-ranges must be 0 (the data plane's maximum) or 1.."
              << core::kTagSlotsPerJob << "\n";
    bad = true;
  }
  if (bad) return kExitBadInput;

  // Job ids are positions in the jobs file (1-based), every job pending and just submitted
  // (created at time 0, planned at time 0: the memory priorities of fresh jobs).
  scheduler::PlanRequest request;
  request.topology = &*topology;
  for (size_t i = 0; i < specs->size(); ++i) {
    core::Job job;
    job.id = static_cast<core::JobId>(i + 1);
    job.spec = (*specs)[i];
    request.jobs.push_back(std::move(job));
  }
  request.options.algorithm = a.algorithm;
  request.options.bound_max_columns = a.bound_max_columns;
  request.options.memory_policy = a.memory_policy;
  request.options.seed = a.seed;
  request.options.rounds = a.rounds;
  request.options.paths = a.paths;
  request.options.spread_min_columns = a.spread_min_columns;
  request.options.split_max_ranges = a.split_max_ranges;
  if (a.time_limit_s > 0) {
    request.options.lp_time_limit_s = a.time_limit_s;
    request.options.mip_time_limit_s = a.time_limit_s;
  }
  auto start = std::chrono::steady_clock::now();
  auto planned = scheduler::ComputePlan(request);
  double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!planned.ok()) {
    std::cerr << "inac: " << planned.status().message() << "\n";
    return planned.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput
                                                                         : kExitFailure;
  }
  planned->plan.solve_ms = solve_ms;
  planned->plan.fingerprint = server::PlanFingerprint(request);
  core::Json out = core::PlanToJson(planned->plan);
  for (size_t j = 0; j < planned->plan.jobs.size(); ++j) {
    const core::JobPlan& jp = planned->plan.jobs[j];
    core::Json& job = out["jobs"][j];
    job["name"] = (*specs)[static_cast<size_t>(jp.job_id - 1)].name;
    auto report = planned->reports.find(jp.job_id);
    if (report == planned->reports.end()) {
      // Ring all-reduce, planned as Rina (docs/rina.md): rate_gbps is the slowest hop's rate
      // b_ring; algbw as nccl-tests reports it (gradient bytes / all-reduce time).
      if (!jp.ring.empty() && jp.comm_ms > 0) {
        const double bytes =
            static_cast<double>((*specs)[static_cast<size_t>(jp.job_id - 1)].gradient_bytes);
        job["allreduce"] = "ring";
        job["ring_members"] = jp.ring.size();
        job["algbw_gbps"] = Number(bytes * 8 / (jp.comm_ms * 1e6));
      }
      continue;
    }
    const scheduler::JobEvaluation& ev = report->second.evaluation;
    const scheduler::JobDiagnostics& d = report->second.diagnostics;
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
    if (!d.lp_bound_source.empty()) planner["lp_bound"] = d.lp_bound_source;
    if (const auto& c = report->second.candidate_optimum_gbps) {
      planner["candidate_optimum_gbps"] = Number(*c);
    }
    job["planner"] = planner;
    if (const auto& b = report->second.batch) {
      // InGo's prediction (docs/batch-size.md): on/off sharing, steps to the target.
      const auto& f = *report->second.batch_fixed;
      job["batch"] = {{"method", report->second.batch_method},
                      {"batch_size", b->batch},
                      {"submitted_batch_size", f.batch},
                      {"steps", Number(b->steps)},
                      {"predicted_completion_ms", Number(b->completion_ms)},
                      {"submitted_completion_ms", Number(f.completion_ms)},
                      {"onoff_rate_gbps", Number(b->rate_gbps)},
                      {"active_fraction", Number(b->active_fraction)}};
    }
  }
  std::cout << out.dump(a.compact ? -1 : 2) << "\n";
  return kExitOk;
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan offline: topology + jobs -> plan JSON, exactly what the controller would plan "
      "(scheduler::ComputePlan, same defaults)");
  auto args = std::make_shared<PlanArgs>();
  cmd->add_option("--topology", args->topology, "Topology JSON file")->required();
  cmd->add_option("--jobs", args->jobs, "Jobs JSON file ({\"jobs\": [...]})")->required();
  cmd->add_option("--algorithm", args->algorithm,
                  "no_ina|atp|atp_sharded|switchml|grid|grid-split|inart|optimal|ingo")
      ->check(CLI::IsMember(scheduler::RoutingAlgorithmNames()))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the randomised rounding")->capture_default_str();
  cmd->add_option("--rounds", args->rounds, "Randomised rounding repetitions R")
      ->capture_default_str();
  cmd->add_option("--paths", args->paths, "Candidate paths k per (source, destination)")
      ->capture_default_str();
  cmd->add_option("--spread-min-columns", args->spread_min_columns,
                  "Spread candidates (arc-diverse paths, detours in a per-pair order) for jobs "
                  "whose LP is estimated above this many columns; 0: every job, -1: none")
      ->capture_default_str();
  cmd->add_option("--split-max-ranges", args->split_max_ranges,
                  "grid-split: chunk ranges (aggregation tags) per job and PS at most; 0: the "
                  "data plane's maximum (64 with one PS)")
      ->capture_default_str();
  cmd->add_option("--memory-policy", args->memory_policy, "esa|atp|switchml|no_ina")
      ->check(CLI::IsMember({"esa", "atp", "switchml", "no_ina"}))
      ->capture_default_str();
  cmd->add_option("--bound-max-columns", args->bound_max_columns,
                  "Compute each job's valid rate bound (lp_bound_gbps: every plan the data plane "
                  "runs) when its LP has at most this many columns; 0: none")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--time-limit", args->time_limit_s,
                  "Solver time limit per LP/MIP, seconds (default: the controller's, LP 60 s, "
                  "MIP 30 s)");
  cmd->add_flag("--compact", args->compact, "Print JSON on one line");
  cmd->callback([args] {
    int code = Run(*args);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace inac::cli
