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
// Usage: routing_bench [--quick]   (--quick: one seed, no k=32)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/generators.h"
#include "scheduler/routing/routing_algorithm.h"

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
  inac::core::JobSpec s;
  s.name = "bench";
  s.workers.assign(hosts.begin(), hosts.begin() + workers);
  s.parameter_servers.assign(hosts.begin() + workers, hosts.begin() + workers + ps);
  s.gradient_bytes = 100 * 1000 * 1000;
  s.compute_ms = 100;
  s.iterations = 100;
  s.batch_size = 32;
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
  double rate = 0, bound = 0, comm_ms = 0, solve_ms = 0;
};

Run Plan(const std::string& algorithm, const PlanningInput& in) {
  auto start = std::chrono::steady_clock::now();
  auto planned = inac::scheduler::PlanRouting(algorithm, in);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!planned.ok()) {
    std::fprintf(stderr, "%s: %s\n", algorithm.c_str(),
                 std::string(planned.status().message()).c_str());
    std::exit(1);
  }
  const auto& jp = planned->plan.jobs[0];
  return Run{jp.rate_gbps, jp.lp_bound_gbps.value_or(0), jp.comm_ms, ms};
}

double Round3(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int seeds = quick ? 1 : 3;

  // GRID's setting.
  for (const char* placement : {"tor", "random:0.2"}) {
    for (int workers : {40, 70, 100}) {
      std::map<std::string, Run> mean;
      for (int seed = 1; seed <= seeds; ++seed) {
        auto p = inac::core::ParseInaPlacement(placement);
        auto t = FatTree(8, 6, seed, *p, 100, 100, 3200);
        PlanningInput in = Instance(t, seed, workers, 1, 100);
        in.options.paths = 8;
        for (const char* a : {"no_ina", "atp", "switchml", "grid"}) {
          Run r = Plan(a, in);
          Run& m = mean[a];
          m.rate += r.rate / seeds;
          m.bound += r.bound / seeds;
          m.solve_ms += r.solve_ms / seeds;
        }
      }
      Json line = {{"bench", "routing"}, {"scenario", "grid_setting"}, {"ina", placement},
                   {"k", 8}, {"hosts", 192}, {"workers", workers}, {"seeds", seeds}};
      for (const auto& [a, r] : mean) {
        Json j = {{"rate_gbps", Round3(r.rate)}, {"solve_ms", Round3(r.solve_ms)}};
        if (r.bound > 0) {
          j["lp_bound_gbps"] = Round3(r.bound);
          j["rate_over_lp_bound"] = Round3(r.rate / r.bound);
        }
        line[a] = j;
      }
      line["grid_over_atp"] = Round3(mean["grid"].rate / mean["atp"].rate);
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
    }
  }

  // InArt's setting.
  for (int workers : {10, 20, 30, 40, 50}) {
    std::map<std::string, Run> mean;
    for (int seed = 1; seed <= seeds; ++seed) {
      auto t = FatTree(6, -1, seed, {}, 20, 9, 9);
      PlanningInput in = Instance(t, seed, workers, 4, 20);
      for (const char* a : {"no_ina", "atp", "grid", "inart"}) {
        Run r = Plan(a, in);
        Run& m = mean[a];
        m.rate += r.rate / seeds;
        m.comm_ms += r.comm_ms / seeds;
        m.bound += r.bound / seeds;
        m.solve_ms += r.solve_ms / seeds;
      }
    }
    Json line = {{"bench", "routing"}, {"scenario", "inart_setting"}, {"k", 6}, {"ps", 4},
                 {"workers", workers}, {"seeds", seeds}};
    for (const auto& [a, r] : mean) {
      line[a] = {{"rate_gbps", Round3(r.rate)}, {"comm_ms", Round3(r.comm_ms)},
                 {"solve_ms", Round3(r.solve_ms)}};
    }
    line["inart_comm_vs_atp"] = Round3(mean["inart"].comm_ms / mean["atp"].comm_ms - 1);
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }

  // Scale.
  std::vector<std::pair<int, int>> scale = {{16, 256}};
  if (!quick) scale.push_back({32, 1024});
  for (const auto& [k, workers] : scale) {
    auto t = FatTree(k, -1, 1, {}, 100, 400, 3200);
    PlanningInput in = Instance(t, 1, workers, 4, 100);
    Json line = {{"bench", "routing"}, {"scenario", "scale"}, {"k", k}, {"workers", workers},
                 {"ps", 4}};
    for (const char* a : {"atp", "grid"}) {
      Run r = Plan(a, in);
      line[a] = {{"rate_gbps", Round3(r.rate)}, {"solve_ms", Round3(r.solve_ms)}};
      if (r.bound > 0) line[a]["lp_bound_gbps"] = Round3(r.bound);
    }
    line["peak_rss_mb"] = Round3(MaxRssMb());
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
