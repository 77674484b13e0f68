// Switch-memory scheduling in the trace simulator (docs/memory.md section 7): mean JCT per memory
// policy and the ratios atp/esa and switchml/esa on fixed scenarios, and the simulator's speed. One
// JSON line per scenario. Figures are whatever the model gives (docs/memory.md); nothing is tuned
// here.
//
//   one Tofino-class ToR: 64 hosts on 100 Gbps links, 6.4 Tbps INA processing, 248 B aggregators.
//   S1: 30 jobs at t = 0, 10 model slots x {2, 4, 8} workers, 1000 iterations, 20,000 aggregators.
//       There are 8 built-in models; the 10 slots cycle through them (AlexNet and ResNet50 twice).
//   S2: the S1 mix, 200 jobs with Poisson arrivals at 80 % offered load (see OfferedRate).
//   S3: S1 with 2,000 aggregators.
//   S4: fat-tree k = 8 (INA edge switches, 20,000 aggregators, 6.4 Tbps), 100 jobs of the mix at
//       80 % offered load, grid routing (no_ina routing for the no_ina policy).
//   stragglers: ESA vs ATP vs SwitchML vs no INA over straggler spread x memory x job size.
//   speed: 5,000 jobs of the mix on the ToR at 80 % offered load, esa.
// Placement: least-loaded hosts (shared). Routing on the ToR: atp (aggregate at the ToR).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "core/models.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/trace.h"
#include "tests/fixtures/sample_topologies.h"

namespace {

using inac::scheduler::MemoryPolicy;
using inac::scheduler::TraceJob;

constexpr double kLinkGbps = 100;
constexpr int kTorHosts = 64;
const std::vector<int> kWorkers = {2, 4, 8};

// The Tofino-class ToR "tor": hosts h1..h64 on 100 Gbps links, 6.4 Tbps INA processing.
inac::core::Topology Tor(int64_t aggregators) {
  return inac::fixtures::SingleSwitch({.switch_id = "tor",
                                       .hosts = kTorHosts,
                                       .aggregators = aggregators,
                                       .processing_gbps = 6400,
                                       .link_gbps = kLinkGbps});
}

// S1/S3 (and the sweep): 10 model slots x {2, 4, 8} workers, all at t = 0. The slots cycle
// through `names` (empty: the 8 built-in models).
std::vector<TraceJob> AllAtZeroMix(const std::vector<std::string>& names = {}) {
  const auto models = inac::core::BuiltinModels();
  std::vector<TraceJob> jobs;
  for (int slot = 0; slot < 10; ++slot) {
    const inac::core::ModelProfile* m = names.empty()
                                            ? &models[slot % models.size()]
                                            : inac::core::FindModel(names[slot % names.size()]);
    for (int w : kWorkers) {
      TraceJob j;
      j.name = absl::StrCat(std::string(m->name), "-", w, "w-", slot);
      j.model = std::string(m->name);
      j.gradient_bytes = m->gradient_bytes;
      j.compute_ms = m->compute_ms;
      j.workers = w;
      j.iterations = 1000;
      jobs.push_back(j);
    }
  }
  return jobs;
}

// Poisson rate giving `load` of the hosts' time: rate x E[(workers + 1) x T_alone] / hosts, with
// T_alone the JCT of the job alone with INA at line rate (1000 x (compute + G / 100 Gbps)).
double OfferedRate(double load, int hosts) {
  double mean = 0;
  int n = 0;
  for (const auto& m : inac::core::BuiltinModels()) {
    for (int w : kWorkers) {
      const double t_iter_s = m.compute_ms / 1000 + m.gradient_bytes * 8 / (kLinkGbps * 1e9);
      mean += (w + 1) * 1000 * t_iter_s;
      ++n;
    }
  }
  mean /= n;
  return load * hosts / mean;
}

std::vector<TraceJob> Poisson(int jobs, double rate, uint64_t seed) {
  inac::scheduler::TraceGeneratorOptions o;
  o.arrivals = {.kind = inac::scheduler::ArrivalProcess::Kind::kPoisson, .rate_per_s = rate};
  o.jobs = jobs;
  o.seed = seed;
  o.worker_counts = kWorkers;
  o.iterations = 1000;
  return *inac::scheduler::GenerateTrace(o);
}

struct Outcome {
  double mean_jct_s = 0;
  double p99_jct_s = 0;
  double makespan_s = 0;
  double utilisation = 0;  // mean over INA switches that served jobs
  double preemptions = 0;
  double fallback_bytes = 0;
  double wall_s = 0;
  double cpu_s = 0;  // process CPU time (the machine may be shared)
  int64_t events = 0;
  int64_t fixed_point_iterations = 0;
};

Outcome RunPolicy(const inac::core::Topology& topology, const std::vector<TraceJob>& trace,
                  MemoryPolicy policy, const std::string& routing_name,
                  const inac::scheduler::AggregatorTimingOptions& timing = {}) {
  auto routing = inac::scheduler::MakeRoutingAlgorithm(
      policy == MemoryPolicy::kNoIna ? "no_ina" : routing_name);
  if (!routing.ok()) {
    std::cerr << routing.status() << "\n";
    std::exit(1);
  }
  inac::scheduler::SimOptions options;
  options.policy = policy;
  options.routing = routing->get();
  options.placement = inac::scheduler::PlacementRule::kShared;
  options.timing = timing;
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  auto r = inac::scheduler::Simulate(topology, trace, options);
  const std::clock_t c1 = std::clock();
  const auto t1 = std::chrono::steady_clock::now();
  if (!r.ok()) {
    std::cerr << "simulate: " << r.status() << "\n";
    std::exit(1);
  }
  Outcome o;
  o.mean_jct_s = r->summary.mean_jct_s;
  o.p99_jct_s = r->summary.p99_jct_s;
  o.makespan_s = r->summary.makespan_s;
  o.preemptions = r->summary.preemptions;
  o.fallback_bytes = r->summary.fallback_bytes;
  o.events = r->summary.events;
  o.fixed_point_iterations = r->summary.fixed_point_iterations;
  int used = 0;
  for (const auto& [id, s] : r->summary.switches) {
    if (s.peak_in_use > 0) {
      o.utilisation += s.mean_utilisation;
      ++used;
    }
  }
  if (used > 0) o.utilisation /= used;
  o.wall_s = std::chrono::duration<double>(t1 - t0).count();
  o.cpu_s = static_cast<double>(c1 - c0) / CLOCKS_PER_SEC;
  return o;
}

void Scenario(const std::string& name, const inac::core::Topology& topology,
              const std::vector<TraceJob>& trace, const std::string& routing, double rate) {
  std::map<MemoryPolicy, Outcome> out;
  for (MemoryPolicy p :
       {MemoryPolicy::kEsa, MemoryPolicy::kAtp, MemoryPolicy::kSwitchMl, MemoryPolicy::kNoIna}) {
    out[p] = RunPolicy(topology, trace, p, routing);
  }
  const double esa = out[MemoryPolicy::kEsa].mean_jct_s;
  std::string line = "{\"bench\":\"sim\",\"scenario\":\"" + name +
                     "\",\"jobs\":" + std::to_string(trace.size()) + ",\"routing\":\"" + routing +
                     "\"";
  char buf[512];
  if (rate > 0) {
    std::snprintf(buf, sizeof buf, ",\"poisson_rate_per_s\":%.5g", rate);
    line += buf;
  }
  for (const auto& [p, o] : out) {
    std::snprintf(buf, sizeof buf,
                  ",\"%s\":{\"mean_jct_s\":%.2f,\"p99_jct_s\":%.2f,\"makespan_s\":%.2f,"
                  "\"utilisation\":%.3f,\"preemptions\":%.4g,\"fallback_bytes\":%.4g,"
                  "\"wall_s\":%.2f}",
                  std::string(inac::scheduler::MemoryPolicyName(p)).c_str(), o.mean_jct_s,
                  o.p99_jct_s, o.makespan_s, o.utilisation, o.preemptions, o.fallback_bytes,
                  o.wall_s);
    line += buf;
  }
  std::snprintf(buf, sizeof buf,
                ",\"atp_over_esa\":%.4f,\"switchml_over_esa\":%.4f,\"no_ina_over_esa\":%.4f}",
                out[MemoryPolicy::kAtp].mean_jct_s / esa,
                out[MemoryPolicy::kSwitchMl].mean_jct_s / esa,
                out[MemoryPolicy::kNoIna].mean_jct_s / esa);
  line += buf;
  std::cout << line << std::endl;
}

// Where the ESA paper's "up to 1.35x" can come from: atp/esa and the INA ceiling no_ina/esa
// over memory sizes and model mixes (all jobs at t = 0 on the ToR, 10 slots x {2, 4, 8}
// workers). One JSON line per point.
void Sweep() {
  const std::vector<std::pair<std::string, std::vector<std::string>>> mixes = {
      {"table", {}},
      {"comm-heavy", {"BERT-large", "VGG19", "VGG16", "AlexNet"}},
      {"BERT-large", {"BERT-large"}}};
  for (const auto& [mix_name, names] : mixes) {
    const std::vector<TraceJob> jobs = AllAtZeroMix(names);
    for (int64_t a : {250, 500, 1000, 2000, 5000, 20000}) {
      const auto topo = Tor(a);
      const double esa = RunPolicy(topo, jobs, MemoryPolicy::kEsa, "atp").mean_jct_s;
      const double atp = RunPolicy(topo, jobs, MemoryPolicy::kAtp, "atp").mean_jct_s;
      const double sml = RunPolicy(topo, jobs, MemoryPolicy::kSwitchMl, "atp").mean_jct_s;
      const double none = RunPolicy(topo, jobs, MemoryPolicy::kNoIna, "atp").mean_jct_s;
      std::printf(
          "{\"bench\":\"sim_sweep\",\"mix\":\"%s\",\"aggregators\":%lld,\"esa\":%.2f,"
          "\"atp\":%.2f,\"switchml\":%.2f,\"no_ina\":%.2f,\"atp_over_esa\":%.4f,"
          "\"switchml_over_esa\":%.4f,\"no_ina_over_esa\":%.4f}\n",
          mix_name.c_str(), static_cast<long long>(a), esa, atp, sml, none, atp / esa, sml / esa,
          none / esa);
    }
  }
  // Sensitivity of S3 to the PS's turnaround (the part of ATP's hold that ESA does not wait for).
  for (double turnaround : {2.0, 5.0, 10.0, 20.0}) {
    inac::scheduler::AggregatorTimingOptions timing;
    timing.host_turnaround_us = turnaround;
    const auto topo = Tor(2000);
    const auto jobs = AllAtZeroMix();
    const double esa = RunPolicy(topo, jobs, MemoryPolicy::kEsa, "atp", timing).mean_jct_s;
    const double atp = RunPolicy(topo, jobs, MemoryPolicy::kAtp, "atp", timing).mean_jct_s;
    std::printf(
        "{\"bench\":\"sim_sweep\",\"mix\":\"table\",\"aggregators\":2000,"
        "\"host_turnaround_us\":%.0f,\"esa\":%.2f,\"atp\":%.2f,\"atp_over_esa\":%.4f}\n",
        turnaround, esa, atp, atp / esa);
  }
}

// The straggler sweep: ESA vs ATP vs SwitchML vs no INA across straggler spread x memory x job
// size, one JSON line per point. The ToR of S1; 12 jobs of `workers` workers each (the 8 built-in
// models cycled), all at t = 0, 200 iterations; stragglers: every worker's arrival offset per
// chunk is exponential with mean `spread` (StragglerModel, docs/memory.md "Stragglers").
// With `fixed_skew` (the earlier model), the same straggler range is a fixed skew
// (AggregatorTimingOptions::arrival_spread_us = the sampled mean range) and a preempted chunk
// loses half an aggregation: the rows show what the preemption model changed.
void StragglerGrid(bool fixed_skew) {
  const auto models = inac::core::BuiltinModels();
  for (double spread_us : {0.0, 100.0, 1000.0, 5000.0}) {
    if (fixed_skew && spread_us == 0) continue;
    for (const auto& [memory_name, aggregators] :
         std::vector<std::pair<std::string, int64_t>>{{"scarce", 2000}, {"ample", 20000}}) {
      for (int workers : {8, 16, 32}) {
        std::vector<TraceJob> jobs;
        for (int k = 0; k < 12; ++k) {
          const auto& m = models[k % models.size()];
          TraceJob j;
          j.name = absl::StrCat(std::string(m.name), "-", workers, "w-", k);
          j.model = std::string(m.name);
          j.gradient_bytes = m.gradient_bytes;
          j.compute_ms = m.compute_ms;
          j.workers = workers;
          j.iterations = 200;
          jobs.push_back(j);
        }
        inac::scheduler::AggregatorTimingOptions timing;
        timing.stragglers = {
            .distribution = spread_us > 0 ? inac::scheduler::StragglerDistribution::kExponential
                                          : inac::scheduler::StragglerDistribution::kNone,
            .spread_us = spread_us};
        if (fixed_skew) {
          timing.arrival_spread_us +=
              inac::scheduler::SampleChunkArrivals(timing.stragglers, workers).mean_range_us;
          timing.stragglers = {};
        }
        const auto topo = Tor(aggregators);
        std::map<MemoryPolicy, Outcome> out;
        for (MemoryPolicy p : {MemoryPolicy::kEsa, MemoryPolicy::kAtp, MemoryPolicy::kSwitchMl,
                               MemoryPolicy::kNoIna}) {
          out[p] = RunPolicy(topo, jobs, p, "atp", timing);
        }
        const double esa = out[MemoryPolicy::kEsa].mean_jct_s;
        std::printf(
            "{\"bench\":\"sim_stragglers\",\"model\":\"%s\",\"spread_us\":%.0f,\"memory\":\"%s\","
            "\"aggregators\":%lld,\"workers\":%d,\"esa\":%.3f,\"atp\":%.3f,\"switchml\":%.3f,"
            "\"no_ina\":%.3f,\"atp_over_esa\":%.4f,\"switchml_over_esa\":%.4f,"
            "\"no_ina_over_esa\":%.4f,\"esa_preemptions\":%.4g}\n",
            fixed_skew ? "fixed_skew_half_loss" : "exponential_stragglers", spread_us,
            memory_name.c_str(), static_cast<long long>(aggregators), workers, esa,
            out[MemoryPolicy::kAtp].mean_jct_s, out[MemoryPolicy::kSwitchMl].mean_jct_s,
            out[MemoryPolicy::kNoIna].mean_jct_s, out[MemoryPolicy::kAtp].mean_jct_s / esa,
            out[MemoryPolicy::kSwitchMl].mean_jct_s / esa,
            out[MemoryPolicy::kNoIna].mean_jct_s / esa, out[MemoryPolicy::kEsa].preemptions);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const std::string& s) { return only.empty() || only == s; };
  const double tor_rate = OfferedRate(0.8, kTorHosts);
  if (want("S1")) Scenario("S1", Tor(20000), AllAtZeroMix(), "atp", 0);
  if (want("S2")) Scenario("S2", Tor(20000), Poisson(200, tor_rate, 2), "atp", tor_rate);
  if (want("S3")) Scenario("S3", Tor(2000), AllAtZeroMix(), "atp", 0);
  if (want("S4")) {
    inac::core::GeneratorOptions g;
    g.processing_gbps_lo = g.processing_gbps_hi = 6400;
    g.aggregators = 20000;
    g.link_gbps = kLinkGbps;
    const auto fat = *inac::core::GenerateFatTree(8, g);
    const double rate = OfferedRate(0.8, static_cast<int>(fat.hosts.size()));
    Scenario("S4", fat, Poisson(100, rate, 4), "grid", rate);
  }
  if (only == "sweep") Sweep();
  if (want("stragglers")) {
    StragglerGrid(false);
    StragglerGrid(true);
  }
  if (want("speed")) {
    const auto trace = Poisson(5000, tor_rate, 5);
    const Outcome o = RunPolicy(Tor(20000), trace, MemoryPolicy::kEsa, "atp");
    std::printf(
        "{\"bench\":\"sim_speed\",\"jobs\":5000,\"policy\":\"esa\",\"routing\":\"atp\","
        "\"wall_s\":%.2f,\"cpu_s\":%.2f,\"events\":%lld,\"fixed_point_iterations\":%lld,\"mean_jct_"
        "s\":%.2f,"
        "\"target_s\":10}\n",
        o.wall_s, o.cpu_s, static_cast<long long>(o.events),
        static_cast<long long>(o.fixed_point_iterations), o.mean_jct_s);
  }
  return 0;
}
