// The snapshot every routing algorithm plans from (docs/architecture.md "scheduler/ is pure"):
// topology, jobs with their ids, background load already on the network, the random seed and the
// options. Plain value types; the scheduler never reads a clock, a file or a thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/topology.h"

namespace inac::scheduler {

// A job to plan: its id (carried into core::JobPlan::job_id) and its spec.
struct JobInput {
  core::JobId id = 0;
  core::JobSpec spec;
};

// Load that is on the network before any planned job (other tenants, jobs planned elsewhere).
struct BackgroundLoad {
  // Directed load from `from` to `to` on the highest-capacity up link between them.
  struct ArcLoad {
    std::string from;
    std::string to;
    double gbps = 0;
  };
  std::vector<ArcLoad> arcs;
  // Processing capacity of INA switches already in use, by switch id.
  std::map<std::string, double> switch_processing_gbps;
  // Ingress capacity of hosts (parameter servers) already in use, by host id.
  std::map<std::string, double> host_ingress_gbps;
};

struct PlanningOptions {
  // k: candidate loop-free paths per (source, destination) pair (Yen). >= 1.
  int paths = 4;
  // R: randomised rounding repetitions of the LP-based algorithms (plus one deterministic
  // rounding that takes each variable's largest value). >= 0.
  int rounds = 32;
  // INA switches off the worker's k paths to the PS that are still considered as aggregation
  // nodes, nearest (smallest detour) first.
  int extra_candidates = 6;
  // Local search after rounding (moves flows off the bottleneck while the evaluated rate rises).
  bool local_search = true;
  // GRID/InArt: a job whose per-worker LP would have more than this many columns gets one group
  // of LP columns per (ToR, PS, option, path) for its interchangeable workers behind one ToR
  // instead of one per worker, and one column per stream total (scheduler::
  // GroupInterchangeablePairs; the same LP optimum, 2x fewer columns at k=32 / 1024 workers, 4x
  // less CLP time). Smaller LPs are solved per worker as before: the grouped LP's optimum is the
  // same but CLP may return another optimal vertex, whose rounding differs (by a few percent
  // either way on GRID's settings). 0: always; negative: never.
  int64_t lp_symmetry_min_columns = 20000;
  // GRID/InArt: spread candidates (BuildCandidates(..., spread = true): arc-diverse minimum-hop
  // paths, equal detours in a per-(ToR, PS) order) for a job whose per-worker LP is estimated
  // above this many columns -- (worker, PS) pairs · paths · (extra_candidates + 2), taken before
  // any candidate is built; such a job is also always grouped (lp_symmetry_min_columns >= 0).
  // By Yen's arc-id order and node ids every ToR of a large fat-tree routes through the same few
  // core links and detour switches: k=32 / 1024 workers / 4 PSs plans 8.0 Gbps (LP bound 8.7)
  // with Yen's candidates, 20.3 Gbps (bound 21.3) spread, in half the CPU (docs/routing.md
  // section 7). Smaller jobs keep Yen's candidates: spread ones plan them better too (the k=8
  // 20-job re-plan: minimum 12.5 -> 16.7 Gbps) but their LP takes about twice as long (0.7 ->
  // 1.3-2 s CPU). 0: always; negative: never.
  int64_t spread_min_columns = 20000;
  // A spread job's detour switches: min(extra_candidates, this). Spread over the fabric, two
  // already lift the bound far above Yen's candidates, and CLP's time grows fast with more
  // (k=16 / 256 workers: 2 detours 0.5 s CPU, bound 50.9 Gbps; 6 detours 6 s, bound 100; k=32 /
  // 1024 workers: 2 detours 4.2 s, bound 21.3; 3 detours 6.9 s, bound 30.0; 6 detours 38 s,
  // bound 54.0).
  int spread_extra_candidates = 2;
  // Then a spread job's detours are dropped, the last-ranked first (TrimDetours), until its LP
  // has at most this many columns (k=32 / 1024 workers with 2 detours: 40,640). <= 0: no trim.
  int64_t spread_lp_max_columns = 45000;
  // grid-split: at most this many chunk ranges per (job, PS) shard; each range is an aggregation
  // tag, with an ina_job entry, its inputs, routes and a multicast group on every switch it uses.
  // The realisation tries the cap and its halves down to 8, and keeps a plan with more ranges
  // only when it is more than 1 % faster. 0: the data plane's maximum, core::MaxRangesPerShard(P)
  // (64 with one PS, 8 with eight).
  int split_max_ranges = 0;
  // Several jobs are planned in one LP when it has at most this many columns, otherwise one job
  // at a time in priority order with the jobs planned before them as background load.
  int64_t joint_lp_max_columns = 20000;
  // Solver time limits (wall-clock time inside COIN-OR; the planner itself reads no clock).
  double lp_time_limit_s = 60;
  double mip_time_limit_s = 30;
  // Branch-and-bound nodes of a MIP (`optimal`), 0 for no limit: a limit that, unlike the time
  // limits, gives the same plan on every machine.
  int64_t mip_node_limit = 0;
  // Latency of a link whose Link::latency_us is unset, used for the RTT of the memory cap.
  double default_link_latency_us = 2.0;
  // Plans may re-aggregate a switch's stream at another switch (RoutedStream::via): ATP's
  // two-level aggregation at the PS's ToR (`atp`, `atp_sharded`). The data plane's intents
  // (core::DeriveSwitchIntents) program such chains (one level of re-aggregation), so the
  // planner (controller, `inac plan`) keeps it true; the simulator sets it false (single-level
  // ATP, its published figures). Comparisons of algorithms keep it true.
  bool reaggregation = true;
  // The aggregator-memory policy the plan will be granted under ("esa", "atp", "switchml";
  // empty or "no_ina": none). `trees` charges each aggregating switch's aggregators in its LP
  // with the policy's hold time (scheduler/memory/aggregator_model.h), so a plan fits the
  // switches' memory; the other algorithms ignore it (memory is granted after routing).
  std::string memory_policy;
  // `trees`: column-generation rounds (each re-solves the master LP and prices new trees for
  // every shard); the planning work is bounded by it, not by a clock.
  int tree_iterations = 40;
};

struct PlanningInput {
  core::Topology topology;
  std::vector<JobInput> jobs;
  BackgroundLoad background;
  uint64_t seed = 1;
  PlanningOptions options;
};

}  // namespace inac::scheduler
