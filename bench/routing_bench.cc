// Routing benchmarks of issue 4, one JSON line per scenario:
//   grid_setting   GRID's simulation: fat-tree k=8 with 6 hosts per edge switch (80 switches,
//                  192 hosts), 100 Gbps links, PS ingress 100 Gbps, switch capacity uniform in
//                  [100, 3200] Gbps, 40/70/100 workers and one PS, INA on (a) every edge switch or
//                  (b) a random 20 % of the switches; every algorithm's rate, rate / lp_bound and
//                  solve time (mean over 3 seeds).
//   inart_setting  InArt's: fat-tree k=6, 4 PSs, 10..50 workers, links 20, PS ingress 20, switch
//                  capacity 9 (Gbps); communication time of inart vs atp (mean over 3 seeds).
//   scale          fat-tree k=16 / 256 workers and k=32 / 1024 workers (edge INA, 4 PSs): grid's
//                  solve time and the process's peak RSS (getrusage, monotone over the run).
// Every solve time is given as wall-clock (solve_ms) and as process CPU time (solve_cpu_ms; COIN-OR
// runs single-threaded here), since the 2-core machine the figures come from is shared.
//   grid_vs_optimal  GRID against the MIP on 20 small fat-trees (k=4), CBC 5 s per instance
// Usage: routing_bench [--quick] [grid_setting|inart_setting|grid_vs_optimal|scale]
//   (--quick: one seed, no k=32; a scenario name runs only that scenario)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/generators.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/fixtures/sample_jobs.h"

namespace {

using inac::scheduler::JobInput;
using inac::scheduler::PlanningInput;
using Json = nlohmann::json;

double MaxRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

inac::core::Topology FatTree(int k, int hosts_per_edge, uint64_t seed,
                             inac::core::InaPlacement placement, double link, double lo,
                             double hi) {
  inac::core::GeneratorOptions o;
  o.seed = seed;
  o.ina = placement;
  o.link_gbps = link;
  o.processing_gbps_lo = lo;
  o.processing_gbps_hi = hi;
  auto t = inac::core::GenerateFatTree(k, o, hosts_per_edge);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", std::string(t.status().message()).c_str());
    std::exit(1);
  }
  return *t;
}

PlanningInput Instance(const inac::core::Topology& t, uint64_t seed, int workers, int ps,
                       double ps_ingress) {
  PlanningInput in;
  in.topology = t;
  in.seed = seed;
  std::mt19937_64 rng(seed * 7919 + workers);
  std::vector<std::string> hosts;
  for (const auto& h : t.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  inac::core::JobSpec s = inac::fixtures::PsJobSpec(
      "bench", std::vector<std::string>(hosts.begin(), hosts.begin() + workers),
      std::vector<std::string>(hosts.begin() + workers, hosts.begin() + workers + ps),
      {.iterations = 100});
  for (auto& h : in.topology.hosts) {
    if (std::find(s.parameter_servers.begin(), s.parameter_servers.end(), h.id) !=
        s.parameter_servers.end()) {
      h.ingress_gbps = ps_ingress;
    }
  }
  in.jobs.push_back(JobInput{1, s});
  return in;
}

struct Run {
  double rate = 0, bound = 0, comm_ms = 0, solve_ms = 0, cpu_ms = 0;
};

Run Plan(const std::string& algorithm, const PlanningInput& in) {
  auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  auto planned = inac::scheduler::PlanRouting(algorithm, in);
  const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!planned.ok()) {
    std::fprintf(stderr, "%s: %s\n", algorithm.c_str(),
                 std::string(planned.status().message()).c_str());
    std::exit(1);
  }
  const auto& jp = planned->plan.jobs[0];
  return Run{jp.rate_gbps, jp.lp_bound_gbps.value_or(0), jp.comm_ms, ms, cpu_ms};
}

double Round3(double v) { return std::round(v * 1000) / 1000; }

// Mean over seeds, plus the slowest solve.
struct Stats {
  Run mean;
  double max_solve_ms = 0, max_cpu_ms = 0;
  void Add(const Run& r, int seeds) {
    mean.rate += r.rate / seeds;
    mean.bound += r.bound / seeds;
    mean.comm_ms += r.comm_ms / seeds;
    mean.solve_ms += r.solve_ms / seeds;
    mean.cpu_ms += r.cpu_ms / seeds;
    max_solve_ms = std::max(max_solve_ms, r.solve_ms);
    max_cpu_ms = std::max(max_cpu_ms, r.cpu_ms);
  }
  Json Times() const {
    return {{"solve_ms", Round3(mean.solve_ms)},
            {"solve_cpu_ms", Round3(mean.cpu_ms)},
            {"max_solve_ms", Round3(max_solve_ms)},
            {"max_solve_cpu_ms", Round3(max_cpu_ms)}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      only = argv[i];
    }
  }
  auto want = [&](const char* s) { return only.empty() || only == s; };
  const int seeds = quick ? 1 : 3;

  // GRID's setting.
  for (const char* placement : {"tor", "random:0.2"}) {
    if (!want("grid_setting")) break;
    for (int workers : {40, 70, 100}) {
      std::map<std::string, Stats> stats;
      for (int seed = 1; seed <= seeds; ++seed) {
        auto p = inac::core::ParseInaPlacement(placement);
        auto t = FatTree(8, 6, seed, *p, 100, 100, 3200);
        PlanningInput in = Instance(t, seed, workers, 1, 100);
        in.options.paths = 8;
        for (const char* a : {"no_ina", "atp", "switchml", "grid"})
          stats[a].Add(Plan(a, in), seeds);
      }
      Json line = {{"bench", "routing"}, {"scenario", "grid_setting"}, {"ina", placement}, {"k", 8},
                   {"hosts", 192},       {"workers", workers},         {"seeds", seeds}};
      for (const auto& [a, st] : stats) {
        Json j = st.Times();
        j["rate_gbps"] = Round3(st.mean.rate);
        if (st.mean.bound > 0) {
          j["lp_bound_gbps"] = Round3(st.mean.bound);
          j["rate_over_lp_bound"] = Round3(st.mean.rate / st.mean.bound);
        }
        line[a] = j;
      }
      line["grid_over_atp"] = Round3(stats["grid"].mean.rate / stats["atp"].mean.rate);
      line["grid_over_switchml"] = Round3(stats["grid"].mean.rate / stats["switchml"].mean.rate);
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  }

  // InArt's setting.
  for (int workers : {10, 20, 30, 40, 50}) {
    if (!want("inart_setting")) break;
    std::map<std::string, Stats> stats;
    for (int seed = 1; seed <= seeds; ++seed) {
      auto t = FatTree(6, -1, seed, {}, 20, 9, 9);
      PlanningInput in = Instance(t, seed, workers, 4, 20);
      for (const char* a : {"no_ina", "atp", "grid", "inart"}) stats[a].Add(Plan(a, in), seeds);
    }
    Json line = {{"bench", "routing"},
                 {"scenario", "inart_setting"},
                 {"k", 6},
                 {"ps", 4},
                 {"workers", workers},
                 {"seeds", seeds}};
    for (const auto& [a, st] : stats) {
      Json j = st.Times();
      j["rate_gbps"] = Round3(st.mean.rate);
      j["comm_ms"] = Round3(st.mean.comm_ms);
      line[a] = j;
    }
    line["inart_comm_vs_atp"] = Round3(stats["inart"].mean.comm_ms / stats["atp"].mean.comm_ms - 1);
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }

  // GRID against the MIP (`optimal`) on 20 small instances (fat-tree k=4, 6..15 workers, edge
  // INA or 30 % random INA), CBC with a 5 s time limit per instance: how far GRID is from the best
  // plan CBC finds, and how many of those CBC proves optimal (a wall-clock figure: a slower
  // machine proves fewer). Was a unit test; the test keeps 3 instances with a node limit.
  if (want("grid_vs_optimal")) {
    int proven = 0, instances = quick ? 5 : 20;
    double worst = 1e9, sum = 0;
    for (uint64_t seed = 1; seed <= static_cast<uint64_t>(instances); ++seed) {
      inac::core::InaPlacement placement;
      if (seed % 2 == 0) placement = *inac::core::ParseInaPlacement("random:0.3");
      const int workers = 6 + static_cast<int>(seed % 10);
      auto t = FatTree(4, -1, seed, placement, 100, 100, 3200);
      PlanningInput in = Instance(t, seed, workers, 1, 100);
      in.options.mip_time_limit_s = 5;
      auto grid = inac::scheduler::PlanRouting("grid", in);
      auto optimal = inac::scheduler::PlanRouting("optimal", in);
      if (!grid.ok() || !optimal.ok()) {
        std::fprintf(stderr, "grid_vs_optimal seed %d: planning failed\n", static_cast<int>(seed));
        return 1;
      }
      const double ratio = grid->plan.jobs[0].rate_gbps / optimal->plan.jobs[0].rate_gbps;
      proven += optimal->diagnostics[0].lp_status == "optimal";
      worst = std::min(worst, ratio);
      sum += ratio;
    }
    Json line = {{"bench", "routing"},
                 {"scenario", "grid_vs_optimal"},
                 {"instances", instances},
                 {"proven_optimal", proven},
                 {"min_grid_over_optimal", Round3(worst)},
                 {"mean_grid_over_optimal", Round3(sum / instances)}};
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }

  // Scale.
  std::vector<std::pair<int, int>> scale = {{16, 256}};
  if (!quick) scale.push_back({32, 1024});
  for (const auto& [k, workers] : scale) {
    if (!want("scale")) break;
    auto t = FatTree(k, -1, 1, {}, 100, 400, 3200);
    PlanningInput in = Instance(t, 1, workers, 4, 100);
    Json line = {
        {"bench", "routing"}, {"scenario", "scale"}, {"k", k}, {"workers", workers}, {"ps", 4}};
    for (const char* a : {"atp", "grid"}) {
      Stats st;
      st.Add(Plan(a, in), 1);
      Json j = {{"rate_gbps", Round3(st.mean.rate)},
                {"solve_ms", Round3(st.mean.solve_ms)},
                {"solve_cpu_ms", Round3(st.mean.cpu_ms)}};
      if (st.mean.bound > 0) j["lp_bound_gbps"] = Round3(st.mean.bound);
      line[a] = j;
    }
    line["peak_rss_mb"] = Round3(MaxRssMb());
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
