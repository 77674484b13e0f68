// Planning benchmarks (incremental planning), one JSON line per scenario:
//   multi_job   fat-tree k=8 (128 hosts, INA on the edge switches, 100 Gbps links, switch
//               processing 400 Gbps), 20 / 100 / 200 PS jobs of 8..32 random workers and one PS
//               each (hosts shared between jobs), planned from scratch by scheduler::ComputePlan
//               (grid, esa): min and mean evaluated rate, Jain's fairness index of the rates, how
//               the routing ran (joint LP or sequential), solve wall and CPU time.
//   admission   the 20-job plan in force, one more job admitted (scheduler::AdmitJobs) -- N
//               different random jobs, each onto the same 20-job plan: p50 / p99 / max latency,
//               the new job's rate against a full re-plan's, and flows of running jobs moved (0
//               by construction, checked).
//   replan      full re-plan of the 21 jobs with the 20-job plan as `previous` (running jobs):
//               wall and CPU time, flows of the 20 running jobs moved with the default move
//               threshold (0.10) and without stability (-1), and the min / mean rate of both.
//   scale       fat-tree k=32, one job of 1024 workers and 4 PSs (routing_bench's scale case)
//               through ComputePlan: wall and CPU time (getrusage: user + system of the process).
//   intents     the switch intents of the 20-job plan (core::DeriveSwitchIntents, part of every
//               admission and re-plan): p50 / max of 10 derivations, entries derived.
//   warm_start  the 20-job plan (sequential) with CLP warm start off and on: time, same plan.
// Usage: planning_bench [--quick] [--algorithm=A]
//                       [multi_job|warm_start|intents|admission|replan|scale]
//   (--quick: 20 admissions instead of 100, no k=32, no 200-job multi_job; --algorithm: the
//   routing algorithm of multi_job, admission, replan and scale (with grid beside it), default
//   the planner's (trees) -- e.g. grid or grid-split, to compare what each costs as the
//   controller's algorithm)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/generators.h"
#include "core/plan.h"
#include "scheduler/incremental.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/planner.h"
#include "tests/fixtures/sample_jobs.h"

namespace {

using inac::core::Job;
using inac::scheduler::PlanRequest;
using Json = nlohmann::json;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Round3(double v) { return std::round(v * 1000) / 1000; }

inac::core::Topology FatTree(int k, double lo, double hi) {
  inac::core::GeneratorOptions o;
  o.seed = 1;
  o.link_gbps = 100;
  o.processing_gbps_lo = lo;
  o.processing_gbps_hi = hi;
  auto t = inac::core::GenerateFatTree(k, o);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
    std::exit(1);
  }
  return *t;
}

// A PS job of 8..32 random workers and one PS (not among them), state running.
Job RandomJob(const inac::core::Topology& t, int64_t id, std::mt19937_64& rng) {
  std::vector<std::string> hosts;
  for (const auto& h : t.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  const int workers = std::uniform_int_distribution<int>(8, 32)(rng);
  Job job;
  job.id = id;
  job.spec = inac::fixtures::PsJobSpec(
      "bench", std::vector<std::string>(hosts.begin(), hosts.begin() + workers), {hosts[workers]},
      {.iterations = 1000});
  job.state = inac::core::JobState::kRunning;
  job.created_ms = 1'000'000 + id;
  return job;
}

std::vector<Job> RandomJobs(const inac::core::Topology& t, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Job> jobs;
  for (int i = 1; i <= n; ++i) jobs.push_back(RandomJob(t, i, rng));
  return jobs;
}

struct Timed {
  inac::scheduler::PlannerOutput out;
  double wall_ms = 0, cpu_ms = 0;
};

Timed Plan(const PlanRequest& request) {
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto out = inac::scheduler::ComputePlan(request);
  Timed r;
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_ms = 1000 * (CpuSeconds() - cpu0);
  if (!out.ok()) {
    std::fprintf(stderr, "plan: %s\n", std::string(out.status().message()).c_str());
    std::exit(1);
  }
  r.out = std::move(*out);
  return r;
}

struct RateStats {
  double min = 0, mean = 0, jain = 0;
};

RateStats Rates(const inac::core::Plan& plan) {
  RateStats s;
  double sum = 0, sq = 0;
  int n = 0;
  s.min = INFINITY;
  for (const auto& jp : plan.jobs) {
    s.min = std::min(s.min, jp.rate_gbps);
    sum += jp.rate_gbps;
    sq += jp.rate_gbps * jp.rate_gbps;
    ++n;
  }
  if (n == 0) return RateStats{};
  s.mean = sum / n;
  s.jain = sq > 0 ? sum * sum / (n * sq) : 0;
  return s;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

void Print(const Json& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  std::string algorithm = inac::scheduler::PlannerOptions{}.algorithm;  // the default: trees
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strncmp(argv[i], "--algorithm=", 12) == 0) {
      algorithm = argv[i] + 12;
    } else {
      only = argv[i];
    }
  }
  auto want = [&](const char* s) { return only.empty() || only == s; };
  const inac::core::Topology k8 = FatTree(8, 400, 400);

  if (want("multi_job")) {
    std::vector<int> sizes = {20, 100};
    if (!quick) sizes.push_back(200);
    for (int n : sizes) {
      for (int64_t joint_columns : {int64_t{8000}, int64_t{20000}}) {
        if (joint_columns != 8000 && n != 20) continue;
        PlanRequest req;
        req.topology = &k8;
        req.jobs = RandomJobs(k8, n, 42);
        req.now_ms = 2'000'000;
        req.options.joint_lp_max_columns = joint_columns;
        req.options.algorithm = algorithm;
        Timed r = Plan(req);
        RateStats s = Rates(r.out.plan);
        bool joint = !r.out.reports.empty() && r.out.reports.begin()->second.diagnostics.joint;
        Print({{"bench", "planning"},
               {"scenario", "multi_job"},
               {"algorithm", algorithm},
               {"k", 8},
               {"jobs", n},
               {"routing", joint ? "joint_lp" : "sequential"},
               {"min_rate_gbps", Round3(s.min)},
               {"mean_rate_gbps", Round3(s.mean)},
               {"jain_fairness", Round3(s.jain)},
               {"solve_ms", Round3(r.wall_ms)},
               {"joint_lp_max_columns", joint_columns},
               {"solve_cpu_ms", Round3(r.cpu_ms)}});
      }
    }
  }

  if (want("warm_start")) {
    // The same 20-job sequential plan with and without CLP warm start (the standalone bound LPs
    // start from the basis of the job's routing LP); the plans must be equal.
    PlanRequest req;
    req.topology = &k8;
    req.jobs = RandomJobs(k8, 20, 42);
    req.now_ms = 2'000'000;
    req.options.algorithm = "grid";
    Json line = {{"bench", "planning"}, {"scenario", "warm_start"}, {"k", 8}, {"jobs", 20}};
    inac::core::Plan plans[2];
    for (int on = 0; on < 2; ++on) {
      inac::scheduler::lp::ClearBasisCache();
      inac::scheduler::lp::SetWarmStartEnabled(on == 1);
      Timed r = Plan(req);
      plans[on] = r.out.plan;
      line[on ? "warm" : "cold"] = {{"solve_ms", Round3(r.wall_ms)},
                                    {"solve_cpu_ms", Round3(r.cpu_ms)}};
    }
    inac::scheduler::lp::SetWarmStartEnabled(true);
    // Routes, grants and rates equal; the standalone bounds equal up to CLP's tolerance.
    double bound_diff = 0;
    for (size_t j = 0; j < plans[0].jobs.size() && j < plans[1].jobs.size(); ++j) {
      auto& a = plans[0].jobs[j];
      auto& b = plans[1].jobs[j];
      if (a.lp_bound_gbps && b.lp_bound_gbps) {
        bound_diff = std::max(bound_diff, std::abs(*a.lp_bound_gbps - *b.lp_bound_gbps) /
                                              std::max(1e-12, std::abs(*a.lp_bound_gbps)));
      }
      a.lp_bound_gbps.reset();
      b.lp_bound_gbps.reset();
    }
    line["same_plan_but_bounds"] = plans[0] == plans[1];
    line["max_bound_rel_diff"] = bound_diff;
    Print(line);
  }

  if (want("admission") || want("replan") || want("intents")) {
    PlanRequest base;
    base.topology = &k8;
    base.jobs = RandomJobs(k8, 20, 42);
    base.now_ms = 2'000'000;
    base.options.algorithm = algorithm;
    Timed first = Plan(base);
    const inac::core::Plan running = first.out.plan;
    std::mt19937_64 rng(7);
    if (want("intents")) {
      // The switch intents of the 20-job plan in force (every admission and re-plan derives
      // them for the whole plan): p50 / max of 10 derivations and the size of what they hold.
      std::vector<double> ms;
      std::vector<inac::core::SwitchIntent> intents;
      for (int i = 0; i < 10; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        intents = inac::core::DeriveSwitchIntents(k8, running);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      size_t jobs = 0, inputs = 0, routes = 0, groups = 0;
      for (const auto& si : intents) {
        jobs += si.jobs.size();
        inputs += si.inputs.size();
        routes += si.routes.size();
        groups += si.multicast_groups.size();
      }
      Print({{"bench", "planning"},
             {"scenario", "intents"},
             {"algorithm", algorithm},
             {"k", 8},
             {"jobs", 20},
             {"p50_ms", Round3(Percentile(ms, 0.5))},
             {"max_ms", Round3(Percentile(ms, 1.0))},
             {"ina_job_entries", jobs},
             {"input_entries", inputs},
             {"route_entries", routes},
             {"multicast_groups", groups}});
    }
    if (want("admission")) {
      const int trials = quick ? 20 : 100;
      std::vector<double> ms, cpu_ms;
      int moved = 0;
      double ratio_sum = 0;
      for (int i = 0; i < trials; ++i) {
        PlanRequest req = base;
        req.jobs.push_back(RandomJob(k8, 21, rng));
        req.jobs.back().state = inac::core::JobState::kPending;
        req.previous = &running;
        const double cpu0 = CpuSeconds();
        const auto t0 = std::chrono::steady_clock::now();
        auto admitted = inac::scheduler::AdmitJobs(req);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        cpu_ms.push_back(1000 * (CpuSeconds() - cpu0));
        if (!admitted.ok()) {
          std::fprintf(stderr, "admit: %s\n", std::string(admitted.status().message()).c_str());
          return 1;
        }
        moved += inac::scheduler::CountMovedFlows(running, admitted->output.plan).flows_moved;
        if (i < 5) {  // the admitted job's rate against a full re-plan's (a few, they are slow)
          PlanRequest full = req;
          full.previous = nullptr;
          Timed f = Plan(full);
          const auto* a = admitted->output.plan.FindJob(21);
          const auto* b = f.out.plan.FindJob(21);
          if (a && b && b->rate_gbps > 0) ratio_sum += a->rate_gbps / b->rate_gbps;
        }
      }
      Print({{"bench", "planning"},
             {"scenario", "admission"},
             {"algorithm", algorithm},
             {"k", 8},
             {"running_jobs", 20},
             {"admissions", trials},
             {"p50_ms", Round3(Percentile(ms, 0.5))},
             {"p99_ms", Round3(Percentile(ms, 0.99))},
             {"max_ms", Round3(Percentile(ms, 1.0))},
             {"p50_cpu_ms", Round3(Percentile(cpu_ms, 0.5))},
             {"p99_cpu_ms", Round3(Percentile(cpu_ms, 0.99))},
             {"running_flows_moved", moved},
             {"admitted_rate_over_full_replan_mean5", Round3(ratio_sum / 5)}});
    }
    if (want("replan")) {
      PlanRequest req = base;
      req.jobs.push_back(RandomJob(k8, 21, rng));
      req.jobs.back().state = inac::core::JobState::kScheduled;
      req.previous = &running;
      for (int64_t joint_columns : {int64_t{8000}, int64_t{20000}}) {
        Json line = {{"bench", "planning"},
                     {"scenario", "replan"},
                     {"algorithm", algorithm},
                     {"k", 8},
                     {"jobs", 21},
                     {"joint_lp_max_columns", joint_columns}};
        req.options.joint_lp_max_columns = joint_columns;
        // The running plan of the same mode.
        PlanRequest mode_base = base;
        mode_base.options.joint_lp_max_columns = joint_columns;
        const inac::core::Plan mode_running = Plan(mode_base).out.plan;
        req.previous = &mode_running;
        int total_flows = 0;
        for (double threshold : {0.10, -1.0}) {
          req.options.replan_move_threshold = threshold;
          Timed r = Plan(req);
          auto moves = inac::scheduler::CountMovedFlows(mode_running, r.out.plan);
          total_flows = moves.flows_compared;
          RateStats s = Rates(r.out.plan);
          line[threshold < 0 ? "no_threshold" : "threshold_0.10"] = {
              {"solve_ms", Round3(r.wall_ms)},    {"solve_cpu_ms", Round3(r.cpu_ms)},
              {"flows_moved", moves.flows_moved}, {"jobs_moved", moves.jobs_moved},
              {"min_rate_gbps", Round3(s.min)},   {"mean_rate_gbps", Round3(s.mean)}};
        }
        line["running_flows"] = total_flows;
        Print(line);
      }
    }
  }

  if (want("scale") && !quick) {
    const inac::core::Topology k32 = FatTree(32, 400, 3200);
    std::mt19937_64 rng(1 * 7919 + 1024);
    std::vector<std::string> hosts;
    for (const auto& h : k32.hosts) hosts.push_back(h.id);
    std::shuffle(hosts.begin(), hosts.end(), rng);
    Job job;
    job.id = 1;
    job.spec = inac::fixtures::PsJobSpec(
        "bench", std::vector<std::string>(hosts.begin(), hosts.begin() + 1024),
        std::vector<std::string>(hosts.begin() + 1024, hosts.begin() + 1028), {.iterations = 100});
    PlanRequest req;
    req.topology = &k32;
    req.jobs = {job};
    req.now_ms = 2'000'000;
    std::vector<std::string> names = {algorithm};
    if (algorithm != "grid") names.push_back("grid");
    for (const std::string& name : names) {
      req.options.algorithm = name;
      Timed r = Plan(req);
      const auto& d = r.out.reports.begin()->second.diagnostics;
      Print({{"bench", "planning"},
             {"scenario", "scale"},
             {"algorithm", name},
             {"k", 32},
             {"workers", 1024},
             {"ps", 4},
             {"rate_gbps", Round3(r.out.plan.jobs[0].rate_gbps)},
             {"candidate_optimum_gbps",
              Round3(r.out.reports.begin()->second.candidate_optimum_gbps.value_or(0))},
             {"lp_status", d.lp_status},
             {"lp_columns", d.lp_columns},
             {"solve_ms", Round3(r.wall_ms)},
             {"solve_cpu_ms", Round3(r.cpu_ms)}});
    }
  }
  return 0;
}
