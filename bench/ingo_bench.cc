// InGo (docs/batch-size.md): completion time of the joint batch-size choice against the same
// routing at each job's submitted batch size, and the distance of the coordinate descent to
// exhaustive search. One JSON line per scenario (figures are the model's, docs/batch-size.md;
// nothing tuned).
//
//   grid_setting: GRID's fat-tree (k = 8, 6 hosts per edge switch: 80 switches, 192 hosts),
//     100 Gbps links, PS ingress 100 Gbps, C_v uniform in [100, 3200], edge switches INA; 4 jobs
//     (ResNet50, VGG16, BERT-large, GoogLeNet) of W workers and one PS on random hosts; batch
//     choices 8..256 per worker (powers of two), submitted 32; iterations 1000 at the submitted
//     batch; noise scales the built-in defaults. scheduler::ComputePlan with --algorithm ingo
//     (GRID routing, ESA memory), compared with its own prediction at the submitted batches.
//   memory_scarce: one ToR of 48 hosts (100 Gbps, 6.4 Tbps INA) with 100, 300 or 20,000 aggregators
//   (ATP/ESA
//     pools shared: BuildBatchProblem's shared_memory), 8 jobs of the built-in models with 2-4
//     workers, same batch choices; atp routing (aggregate at the ToR).
//   vs_exhaustive: 200 synthetic contended problems (3-5 jobs, 4-6 choices, 1-3 shared
//     resources that bind) and 30 small instances (fat-tree k = 4 with 4 hosts per edge switch, 2-4
//     jobs of 2-4
//   workers, 3-5 choices
//     each): coordinate descent (forced) against the exhaustive optimum.
//
//   build/bench/ingo_bench [grid_setting|memory_scarce|vs_exhaustive]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/generators.h"
#include "core/models.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/model/network.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"

namespace {

using namespace inac;  // NOLINT: a benchmark's main file
using scheduler::BatchChoice;
using scheduler::BatchProblem;

const std::vector<int> kChoices = {8, 16, 32, 64, 128, 256};
constexpr int kSubmitted = 32;

double Ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

core::Topology FatTree(int k, int hosts_per_edge, uint64_t seed, double lo, double hi,
                       int64_t aggregators = 20000) {
  core::GeneratorOptions o;
  o.seed = seed;
  o.link_gbps = 100;
  o.processing_gbps_lo = lo;
  o.processing_gbps_hi = hi;
  o.aggregators = aggregators;
  auto t = core::GenerateFatTree(k, o, hosts_per_edge);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
    std::exit(1);
  }
  return *t;
}

core::JobSpec Spec(const std::string& model, std::vector<std::string> workers, std::string ps,
                   std::vector<int> choices) {
  const core::ModelProfile* m = core::FindModel(model);
  core::JobSpec s;
  s.name = absl::StrCat(model, "-", workers.size(), "w");
  s.workers = std::move(workers);
  s.parameter_servers = {std::move(ps)};
  s.gradient_bytes = m->gradient_bytes;
  s.compute_ms = m->compute_ms;
  s.iterations = 1000;
  s.batch_size = kSubmitted;
  s.batch_sizes = std::move(choices);
  s.model = std::string(m->name);
  return s;
}

std::string Pct(double x) { return absl::StrFormat("%.1f", 100 * x); }

// GRID's setting through the real planner.
void GridSetting() {
  const std::vector<std::string> models = {"ResNet50", "VGG16", "BERT-large", "GoogLeNet"};
  for (int workers : {10, 20, 40}) {
    std::vector<double> reductions;
    double fixed_sum = 0, ingo_sum = 0, solve = 0;
    std::string batches;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      core::Topology t = FatTree(8, 6, seed, 100, 3200);
      for (core::Switch& s : t.switches) {
        if (s.id.rfind("e", 0) != 0) s.ina = {};  // INA on edge switches only
      }
      std::vector<std::string> hosts;
      for (const auto& h : t.hosts) hosts.push_back(h.id);
      std::mt19937_64 rng(seed * 7919 + workers);
      std::shuffle(hosts.begin(), hosts.end(), rng);
      scheduler::PlanRequest request;
      request.topology = &t;
      request.options.algorithm = "ingo";
      size_t next = 0;
      for (size_t j = 0; j < models.size(); ++j) {
        std::vector<std::string> w(hosts.begin() + next, hosts.begin() + next + workers);
        next += workers;
        const std::string ps = hosts[next++];
        for (auto& h : t.hosts) {
          if (h.id == ps) h.ingress_gbps = 100;
        }
        core::Job job;
        job.id = static_cast<core::JobId>(j + 1);
        job.spec = Spec(models[j], w, ps, kChoices);
        request.jobs.push_back(std::move(job));
      }
      const auto start = std::chrono::steady_clock::now();
      auto out = scheduler::ComputePlan(request);
      solve += Ms(start);
      if (!out.ok()) {
        std::fprintf(stderr, "plan: %s\n", std::string(out.status().message()).c_str());
        std::exit(1);
      }
      double fixed = 0, ingo = 0;
      std::vector<std::string> b;
      for (const auto& [id, report] : out->reports) {
        if (!report.batch) continue;
        fixed += report.batch_fixed->completion_ms;
        ingo += report.batch->completion_ms;
        b.push_back(absl::StrCat(report.batch->batch));
      }
      fixed_sum += fixed;
      ingo_sum += ingo;
      reductions.push_back(1 - ingo / fixed);
      if (seed == 1) batches = absl::StrJoin(b, "/");
    }
    std::cout << absl::StrFormat(
        "{\"scenario\":\"grid_setting\",\"workers_per_job\":%d,\"jobs\":4,\"seeds\":3,"
        "\"mean_jct_fixed_s\":%.1f,\"mean_jct_ingo_s\":%.1f,\"reduction_pct\":%s,"
        "\"reduction_min_pct\":%s,\"reduction_max_pct\":%s,\"batches_seed1\":\"%s\","
        "\"plan_ms\":%.0f,\"paper_reduction_pct\":\"25.2-74.7\"}\n",
        workers, fixed_sum / 12 / 1000, ingo_sum / 12 / 1000, Pct(1 - ingo_sum / fixed_sum),
        Pct(*std::min_element(reductions.begin(), reductions.end())),
        Pct(*std::max_element(reductions.begin(), reductions.end())), batches, solve / 3);
  }
}

// A memory-scarce ToR: the pools are shared, so a larger batch frees aggregators for others.
void MemoryScarce() {
  const auto models = core::BuiltinModels();
  for (int64_t aggregators : {100, 300, 20000}) {
    std::vector<double> reductions;
    double fixed_sum = 0, ingo_sum = 0, indep_sum = 0;
    std::string method;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      scheduler::PlanningInput input;
      core::Topology& t = input.topology;
      core::Switch tor;
      tor.id = "tor";
      tor.ina.capable = true;
      tor.ina.processing_gbps = 6400;
      tor.ina.aggregators = aggregators;
      t.switches.push_back(tor);
      for (int h = 1; h <= 48; ++h) {
        core::Host host;
        host.id = absl::StrCat("h", h);
        t.hosts.push_back(host);
        core::Link l;
        l.id = core::DefaultLinkId("tor", host.id);
        l.a = "tor";
        l.b = host.id;
        l.gbps = 100;
        t.links.push_back(l);
      }
      std::mt19937_64 rng(seed);
      int next = 1;
      for (int j = 0; j < 8; ++j) {
        const int w = 2 + static_cast<int>(rng() % 3);
        std::vector<std::string> workers;
        for (int i = 0; i < w; ++i) workers.push_back(absl::StrCat("h", next++));
        const std::string ps = absl::StrCat("h", next++);
        scheduler::JobInput in;
        in.id = j + 1;
        in.spec = Spec(std::string(models[(j + seed) % models.size()].name), workers, ps, kChoices);
        input.jobs.push_back(std::move(in));
      }
      input.options.reaggregation = false;
      auto net = scheduler::Network::Create(input);
      auto algo = scheduler::MakeRoutingAlgorithm("atp");
      auto routed = (*algo)->Route(**net);
      if (!routed.ok()) {
        std::fprintf(stderr, "route: %s\n", std::string(routed.status().message()).c_str());
        std::exit(1);
      }
      for (auto& rj : routed->jobs) rj.aggregators.clear();
      auto problem = scheduler::BuildBatchProblem(**net, routed->jobs, {}, {.shared_memory = true});
      if (!problem.ok()) std::exit(1);
      const BatchChoice fixed = scheduler::FixedBatchSizes(*problem);
      const BatchChoice joint = scheduler::ChooseBatchSizes(*problem);
      const BatchChoice indep = scheduler::IndependentBatchSizes(*problem);
      fixed_sum += fixed.objective_ms;
      ingo_sum += joint.objective_ms;
      indep_sum += indep.objective_ms;
      reductions.push_back(1 - joint.objective_ms / fixed.objective_ms);
      method = joint.method;
    }
    std::cout << absl::StrFormat(
        "{\"scenario\":\"memory_scarce\",\"aggregators\":%d,\"jobs\":8,\"seeds\":3,"
        "\"mean_jct_fixed_s\":%.1f,\"mean_jct_independent_s\":%.1f,\"mean_jct_ingo_s\":%.1f,"
        "\"reduction_pct\":%s,\"reduction_min_pct\":%s,\"reduction_max_pct\":%s,"
        "\"method\":\"%s\",\"paper_reduction_pct\":\"25.2-74.7\"}\n",
        aggregators, fixed_sum / 24 / 1000, indep_sum / 24 / 1000, ingo_sum / 24 / 1000,
        Pct(1 - ingo_sum / fixed_sum), Pct(*std::min_element(reductions.begin(), reductions.end())),
        Pct(*std::max_element(reductions.begin(), reductions.end())), method);
  }
}

// Coordinate descent against exhaustive search on small instances.
void VsExhaustive() {
  const auto models = core::BuiltinModels();
  double worst = 1, sum = 0, indep_worst = 1;
  int exact = 0, n = 0;
  int64_t cd_evals = 0, ex_evals = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed * 104729);
    scheduler::PlanningInput input;
    input.topology = FatTree(4, 4, seed, 20, 100, 2000);  // 32 hosts
    input.options.reaggregation = false;
    std::vector<std::string> hosts;
    for (const auto& h : input.topology.hosts) hosts.push_back(h.id);
    std::shuffle(hosts.begin(), hosts.end(), rng);
    const int jobs = 2 + static_cast<int>(rng() % 3);
    size_t next = 0;
    for (int j = 0; j < jobs; ++j) {
      const int w = 2 + static_cast<int>(rng() % 3);
      std::vector<std::string> workers(hosts.begin() + next, hosts.begin() + next + w);
      next += w;
      const std::string ps = hosts[next++];
      const int count = 3 + static_cast<int>(rng() % 3);
      std::vector<int> choices;
      for (int c = 0; c < count; ++c) choices.push_back(8 << c);
      scheduler::JobInput in;
      in.id = j + 1;
      in.spec = Spec(std::string(models[rng() % models.size()].name), workers, ps, choices);
      in.spec.batch_size = choices[rng() % choices.size()];
      // A noise scale drawn around the global batch range, so that the optimum is interior.
      in.spec.noise_scale = static_cast<double>(w * (16 << (rng() % 4)));
      input.jobs.push_back(std::move(in));
    }
    auto net = scheduler::Network::Create(input);
    auto algo = scheduler::MakeRoutingAlgorithm("grid");
    auto routed = (*algo)->Route(**net);
    if (!routed.ok()) continue;
    auto problem = scheduler::BuildBatchProblem(**net, routed->jobs, {}, {.shared_memory = true});
    if (!problem.ok()) continue;
    const BatchChoice ex = scheduler::ExhaustiveBatchSizes(*problem);
    const BatchChoice cd = scheduler::ChooseBatchSizes(*problem, {.force_descent = true});
    const BatchChoice in = scheduler::IndependentBatchSizes(*problem);
    const double ratio = ex.objective_ms / cd.objective_ms;  // <= 1
    worst = std::min(worst, ratio);
    indep_worst = std::min(indep_worst, ex.objective_ms / in.objective_ms);
    sum += ratio;
    exact += ratio > 1 - 1e-9;
    ++n;
    cd_evals += cd.evaluations;
    ex_evals += ex.evaluations;
  }
  std::cout << absl::StrFormat(
      "{\"scenario\":\"vs_exhaustive\",\"instances\":%d,\"descent_equals_optimum\":%d,"
      "\"mean_optimum_over_descent\":%.4f,\"worst_optimum_over_descent\":%.4f,"
      "\"worst_optimum_over_independent\":%.4f,\"descent_evaluations\":%d,"
      "\"exhaustive_evaluations\":%d,\"goal_gap_pct\":2}\n",
      n, exact, n ? sum / n : 0.0, worst, indep_worst, cd_evals, ex_evals);
}

// Coordinate descent against exhaustive search on synthetic contended instances: 3-5 jobs with
// 4-6 choices each share 1-3 resources (random coefficients, capacities that bind), random
// compute, gradient and noise scale. Jobs choosing alone are scored too.
void VsExhaustiveContended() {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> u(0, 1);
  double worst = 1, sum = 0, indep_worst = 1, indep_sum = 0;
  int exact = 0, n = 0;
  for (int inst = 0; inst < 200; ++inst) {
    BatchProblem p;
    const int resources = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < resources; ++r) p.capacity.push_back(10 + 90 * u(rng));
    const int jobs = 3 + static_cast<int>(rng() % 3);
    for (int j = 0; j < jobs; ++j) {
      scheduler::BatchJob job;
      job.model.workers = 2 + static_cast<int>(rng() % 7);
      const int count = 4 + static_cast<int>(rng() % 3);
      for (int c = 0; c < count; ++c) job.model.choices.push_back(8 << c);
      job.model.submitted = job.model.choices[rng() % job.model.choices.size()];
      const double compute = 20 + 400 * u(rng);
      job.model.compute = {0.1 * compute, 0.9 * compute / job.model.submitted};
      job.model.gradient_gbit = 0.2 + 8 * u(rng);
      job.model.convergence = {100 + 1000 * u(rng), job.model.workers * 8.0 * (1 << (rng() % 7))};
      for (int r = 0; r < resources; ++r) {
        if (r == 0 || u(rng) < 0.6) job.flow.coefficients.emplace_back(r, 0.5 + 2 * u(rng));
      }
      p.jobs.push_back(std::move(job));
    }
    const BatchChoice ex = scheduler::ExhaustiveBatchSizes(p);
    const BatchChoice cd = scheduler::ChooseBatchSizes(p, {.force_descent = true});
    const BatchChoice in = scheduler::IndependentBatchSizes(p);
    const double ratio = ex.objective_ms / cd.objective_ms;
    worst = std::min(worst, ratio);
    sum += ratio;
    exact += ratio > 1 - 1e-9;
    indep_worst = std::min(indep_worst, ex.objective_ms / in.objective_ms);
    indep_sum += ex.objective_ms / in.objective_ms;
    ++n;
  }
  std::cout << absl::StrFormat(
      "{\"scenario\":\"vs_exhaustive_contended\",\"instances\":%d,\"descent_equals_optimum\":%d,"
      "\"mean_optimum_over_descent\":%.4f,\"worst_optimum_over_descent\":%.4f,"
      "\"mean_optimum_over_independent\":%.4f,\"worst_optimum_over_independent\":%.4f,"
      "\"goal_gap_pct\":2}\n",
      n, exact, sum / n, worst, indep_sum / n, indep_worst);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (only.empty() || only == "vs_exhaustive") VsExhaustive();
  if (only.empty() || only == "vs_exhaustive") VsExhaustiveContended();
  if (only.empty() || only == "memory_scarce") MemoryScarce();
  if (only.empty() || only == "grid_setting") GridSetting();
  return 0;
}
