// Rina benchmark (docs/rina.md "Benchmark"): per-job throughput, reported as nccl-tests reports it
// (algorithm bandwidth algbw = S / t with S the gradient bytes and t the all-reduce time; for the
// rings also busbw = algbw · 2(n - 1)/n, n the workers), of Rina against plain ring all-reduce,
// hierarchical all-reduce, ATP and SwitchML, in the flow model (scheduler/ring/rina.h,
// scheduler/routing/baselines.h), one job alone on the fabric.
//
// Fabric: fat-tree k = 8, 100 Gbps links of 2 µs, ToR processing 400 Gbps; each edge switch has
// 4 worker hosts and a fifth, spare host. 0 %, 25 %, 50 %, 100 % of the ToRs INA-capable (rack
// r is INA-capable when r mod 4 == 0 / r mod 2 == 0 / always; aggregation and core switches never).
// Workers: the 4 worker hosts of the first W / 4 racks (W = 32, 64, 128), racks in pod order.
// Gradient 100 MB (ResNet-50 is 97.5 MiB).
//
// Equal hardware cost (INAC's definition): every system gets the same INA-capable switches (the
// ToRs above) and the same worker hosts. The PS-based systems need a parameter server, which the
// rings do not: ATP and SwitchML get one dedicated PS host, the spare host of rack 0 (an INA rack
// whenever any rack is), as the ATP paper's single-PS architecture; ATP aggregates at two levels
// (worker ToR, then the PS's ToR, re-aggregation on), SwitchML at the first INA switch. A PS job's
// algbw = S / max(S / λ, S / μ), the flow model's pipelined push and broadcast.
//
// Output: one JSON line per (W, INA fraction) on stdout and a table on stderr, with the paper's
// claim (arXiv 2407.19721: "more than 50 % higher throughput than ATP at the same hardware cost",
// "equal to ATP when fully deployed") next to rina / atp.
// Usage: rina_bench [--quick]   (--quick: W = 32 only)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"
#include "scheduler/ring/rina.h"
#include "scheduler/routing/routing_algorithm.h"

namespace {

using inac::scheduler::JobInput;
using inac::scheduler::PlanningInput;
using Json = nlohmann::json;

constexpr int kK = 8;
constexpr int kHostsPerEdge = 5;
constexpr int64_t kGradientBytes = 100000000;

inac::core::Topology Fabric(int ina_every) {
  inac::core::GeneratorOptions o;
  o.ina = *inac::core::ParseInaPlacement("none");
  o.link_gbps = 100;
  auto t = inac::core::GenerateFatTree(kK, o, kHostsPerEdge);
  if (!t.ok()) {
    std::fprintf(stderr, "fat-tree: %s\n", t.status().ToString().c_str());
    std::exit(1);
  }
  int rack = 0;
  for (inac::core::Switch& s : t->switches) {
    if (s.id[0] != 'e') continue;
    if (ina_every > 0 && rack % ina_every == 0) {
      s.ina.capable = true;
      s.ina.processing_gbps = 400;
      s.ina.aggregators = 20000;
    }
    ++rack;
  }
  for (inac::core::Link& l : t->links) l.latency_us = 2;
  return *t;
}

// Worker hosts of the first `racks` racks (pod order), and the spare host of rack 0.
std::vector<std::string> Workers(int racks) {
  std::vector<std::string> out;
  for (int r = 0; r < racks; ++r) {
    const int pod = r / (kK / 2), edge = r % (kK / 2);
    for (int i = 0; i < 4; ++i) out.push_back(absl::StrCat("h", pod, "_", edge, "_", i));
  }
  return out;
}

PlanningInput Input(const inac::core::Topology& t, const std::vector<std::string>& workers,
                    bool ring) {
  PlanningInput in;
  in.topology = t;
  in.options.reaggregation = true;
  JobInput job;
  job.id = 1;
  job.spec.name = "bench";
  job.spec.workers = workers;
  job.spec.gradient_bytes = kGradientBytes;
  job.spec.iterations = 1;
  job.spec.batch_size = 32;
  if (ring) {
    job.spec.allreduce = inac::core::AllReduce::kRing;
  } else {
    job.spec.parameter_servers = {"h0_0_4"};
  }
  in.jobs.push_back(job);
  return in;
}

// algbw (Gbps) of a ring kind; *n_members gets n'.
double RingAlgbw(const PlanningInput& in, inac::scheduler::RingKind kind, int* n_members) {
  auto net = inac::scheduler::Network::Create(in);
  if (!net.ok()) return 0;
  inac::scheduler::PathCache paths((*net)->graph(), 4);
  inac::scheduler::RingOptions o;
  o.kind = kind;
  auto plan = inac::scheduler::PlanRing(**net, paths, 0, (*net)->residuals(), o);
  if (!plan.ok() || plan->comm_ms <= 0) return 0;
  *n_members = plan->size();
  return static_cast<double>(kGradientBytes) * 8 / (plan->comm_ms * 1e6);
}

double PsAlgbw(const PlanningInput& in, const std::string& algorithm) {
  auto routed = inac::scheduler::PlanRouting(algorithm, in);
  if (!routed.ok() || routed->evaluation.jobs.empty()) return 0;
  const double comm_ms = routed->evaluation.jobs[0].comm_ms;
  if (!(comm_ms > 0) || std::isinf(comm_ms)) return 0;
  return static_cast<double>(kGradientBytes) * 8 / (comm_ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: rina_bench [--quick]\n");
      return 1;
    }
  }
  const std::vector<std::pair<int, int>> fractions = {{0, 0}, {25, 4}, {50, 2}, {100, 1}};
  std::vector<int> sizes = {32, 64, 128};
  if (quick) sizes = {32};
  std::fprintf(stderr, "%-8s %-5s %9s %9s %9s %9s %9s %11s\n", "workers", "ina%", "rina", "ring",
               "hier", "atp", "switchml", "rina/atp");
  for (int w : sizes) {
    for (const auto& [percent, every] : fractions) {
      const inac::core::Topology t = Fabric(every);
      const std::vector<std::string> workers = Workers(w / 4);
      const PlanningInput ring_in = Input(t, workers, true);
      int n_rina = 0, n_ring = 0, n_hier = 0;
      const double rina = RingAlgbw(ring_in, inac::scheduler::RingKind::kRina, &n_rina);
      const double ring = RingAlgbw(ring_in, inac::scheduler::RingKind::kPlain, &n_ring);
      const double hier = RingAlgbw(ring_in, inac::scheduler::RingKind::kHierarchical, &n_hier);
      const PlanningInput ps_in = Input(t, workers, false);
      const double atp = PsAlgbw(ps_in, "atp");
      const double switchml = PsAlgbw(ps_in, "switchml");
      const double busbw_factor = 2.0 * (w - 1) / w;
      Json line = {{"bench", "rina"},
                   {"fabric", "fat-tree k=8"},
                   {"workers", w},
                   {"ina_tor_percent", percent},
                   {"gradient_bytes", kGradientBytes},
                   {"rina_members", n_rina},
                   {"hierarchical_members", n_hier},
                   {"rina_algbw_gbps", rina},
                   {"ring_algbw_gbps", ring},
                   {"hierarchical_algbw_gbps", hier},
                   {"atp_algbw_gbps", atp},
                   {"switchml_algbw_gbps", switchml},
                   {"rina_busbw_gbps", rina * busbw_factor},
                   {"ring_busbw_gbps", ring * busbw_factor},
                   {"rina_over_atp", atp > 0 ? rina / atp : 0.0},
                   {"rina_over_ring", ring > 0 ? rina / ring : 0.0},
                   {"paper_claim", "rina > 1.5 x atp with partial INA; = atp when fully deployed"}};
      std::printf("%s\n", line.dump().c_str());
      std::fflush(stdout);
      std::fprintf(stderr, "%-8d %-5d %9.2f %9.2f %9.2f %9.2f %9.2f %11.2f\n", w, percent, rina,
                   ring, hier, atp, switchml, atp > 0 ? rina / atp : 0.0);
    }
  }
  return 0;
}
