// Ring all-reduce planning: Rina (Chen et al., "Rina: Enhancing Ring-AllReduce with In-network
// Aggregation in Distributed Model Training", ICNP 2024, arXiv 2407.19721) and its baselines, plain
// ring all-reduce and hierarchical (host-level) all-reduce, scored in the common flow model
// (docs/routing.md section 1). docs/rina.md has the model with its sources and says which
// parts are INAC's reading of the paper.
//
// Members. Rina: every rack whose ToR is INA-capable (with processing capacity left) and holds at
// least one of the job's workers is one abstract member: its ToR aggregates the rack's workers, one
// worker of the rack is its agent; each worker of a rack without INA is a member of its own. Plain:
// every worker is a member. Hierarchical: every rack with at least two of the job's workers is one
// member whose leader (a host) receives the rack's gradients over the ToR, joins the ring and
// sends the result back to each worker; a single worker is a member of its own.
//
// Data flow per iteration (gradient G bytes per worker, n' members, f = (n' - 1) / n'), as INAC
// reads Rina ("the switch relays the ring": the ToR adds the rack's slices to the partial sum that
// arrives from the previous member and forwards the sum toward the next member; results of the
// all-gather are multicast to the rack and forwarded):
//   - a ring hop (member i -> member i + 1) carries 2 f G: (n' - 1) slices of G / n' in the
//     reduce-scatter and as many in the all-gather. It leaves an abstract rack at its ToR and
//     enters one at its ToR; it leaves and enters a plain member at the host.
//   - an abstract rack's workers each send G to the ToR (every slice once) and receive G (every
//     result once); its agent also receives the rack's completed slice (G / n') and sends it back
//     as the result the ToR multicasts (G / n'), and keeps the ring protocol's state (acks,
//     retransmission).
//   - its ToR aggregates m G + f G per iteration (m rack workers and the incoming partial sums).
//   - hierarchical: the leader receives (m - 1) G from its rack and sends (m - 1) G back.
// Per unit of the job's algorithm bandwidth ρ = G / T (Gbps), resource r carries u_r: an arc of a
// ring hop 2 f (a hop leaving a ToR is cut into up to RingOptions::hop_ranges aligned chunk
// ranges, each on its own balanced path, 2 f / ranges each: the ToR has several uplinks), a rack
// worker's access arcs 1 each way, the agent's 1 + 1 / n', a ToR's processing m + f, a leader's
// access arcs (m - 1) + 2 f. All streams are concurrent (the stages are pipelined per chunk), so
// an arc shared by several of them carries their sum. One job alone:
//   ρ = min_r residual_r / u_r;  b_ring = 2 f ρ (the slowest hop's rate; every hop runs at the
//   ring's pace); the rack stage's rate b_rack = min over racks of the rack's links and C_ToR /
//   (m + f), so a rack caps ρ at b_rack.
//   T = G / ρ + 2 (n' - 1) L, with L the largest one-way latency of a hop's paths (sum of link
//   latencies) plus RingOptions::step_overhead_us: the dependency chain of 2 (n' - 1) steps.
//   Without shared arcs G / ρ = max(2 f G / b_ring, G / b_rack): the ring's T = 2 (n' - 1) / n'
//   · G / b_ring for the ring plus the rack aggregation and broadcast, pipelined per chunk.
// n' = 1 (one abstract rack, or a single worker): no ring; T = G / ρ of the rack stage alone.
//
// Choices (the evaluated ρ decides; ties as stated, so the plan is deterministic):
//   - ring order: candidates are the members in spec order (the order of their first worker in
//     JobSpec::workers) and a nearest-neighbour tour on hop counts from the first member improved
//     by 2-opt on the tour's total hop count (racks of one pod end up adjacent); the better
//     evaluated ρ wins, then the smaller total hop count, then spec order. With at most
//     kRingEvaluatedTwoOptMembers members, a 2-opt on the evaluated ρ follows.
//   - agent (leader): each worker of the rack is a candidate, rack by rack in ring order; the one
//     with the highest evaluated ρ, the lowest rank (position in JobSpec::workers) on ties.
//   - hop paths: balanced (scheduler::BalancedPath) among PathCache::GetSpread candidates with the
//     other hops' load, greedy in ring order, then two passes re-placing each.
// Complexity: O(W · n' · P · L) for the agent choice, O(n'² ) hop-count 2-opt, O(n'² · n' · P · L)
// for the evaluated 2-opt (small rings only); P candidate paths of L arcs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"

namespace inac::scheduler {

enum class RingKind { kRina, kPlain, kHierarchical };
// "rina", "ring", "hierarchical".
const char* RingKindName(RingKind kind);

inline constexpr int kRingEvaluatedTwoOptMembers = 16;

struct RingOptions {
  RingKind kind = RingKind::kRina;
  // Chunk ranges (own paths) a hop leaving a ToR is cut into, >= 1.
  int hop_ranges = 4;
  // Per-step latency beyond the hop's link latencies (software, synchronisation), microseconds.
  double step_overhead_us = 0;
  bool optimise_order = true;
  bool optimise_agents = true;
};

// One aggregated rack: Rina's abstract member (INA ToR) or hierarchical all-reduce's rack.
struct RingRack {
  int tor = -1;              // the rack's ToR (switch node)
  int agent = -1;            // Rina's agent / hierarchical leader (host node)
  std::vector<int> workers;  // every worker of the job in the rack (agent included), rank order
};

// One part of a ring hop: a chunk range of fraction `fraction` of the hop on `arcs`.
struct RingHopPart {
  double fraction = 1;
  std::vector<int> arcs;
};

// The hop from members[i] to members[i + 1 mod n']: from `from` to `to` (the ports: a ToR for an
// abstract Rina rack, a host otherwise).
struct RingHop {
  int from = -1;
  int to = -1;
  std::vector<RingHopPart> parts;
};

struct RingPlan {
  int job = -1;  // index into PlanningInput::jobs
  RingKind kind = RingKind::kRina;
  // Ring order: one host per member (the agent or leader of an aggregated rack, else the worker).
  std::vector<int> members;
  // racks[i] is the rack of members[i], or tor -1 for a plain member.
  std::vector<RingRack> racks;
  std::vector<RingHop> hops;                  // empty when n' = 1
  std::vector<std::pair<int, double>> usage;  // (resource, u_r) per unit of ρ, resource-sorted
  double algbw_gbps = 0;                      // ρ (without the latency term)
  double ring_gbps = 0;                       // b_ring = 2 f ρ; 0 when n' = 1
  double rack_gbps = 0;         // b_rack: the slowest rack stage alone; kUnbounded without racks
  double latency_us = 0;        // 2 (n' - 1) L
  double comm_ms = 0;           // T
  double iteration_ms = 0;      // compute_ms + T
  int total_hops = 0;           // sum over hops of the first part's arc count
  double step_overhead_us = 0;  // RingOptions::step_overhead_us the plan was made with
  std::string bottleneck;       // resource that limits ρ
  // The members as the paper counts them (n').
  int size() const { return static_cast<int>(members.size()); }
};

// Plans ring job `job` (index into network.input().jobs) alone on `residual` (resource-indexed
// capacity left for it: the network's residuals minus other jobs' load). InvalidArgument when the
// job has no workers or names a worker that is not a host of the network, FailedPrecondition when
// a worker has no ToR. A job whose members cannot reach each other gets ρ = 0.
absl::StatusOr<RingPlan> PlanRing(const Network& network, PathCache& paths, int job,
                                  const std::vector<double>& residual,
                                  const RingOptions& options = {});

// Scores `plan` (members, racks and hop paths as given) on `residual`: fills usage, algbw_gbps,
// ring_gbps, rack_gbps, latency_us, comm_ms, iteration_ms, total_hops and bottleneck.
void EvaluateRing(const Network& network, const std::vector<double>& residual, RingPlan* plan);

// `residual` minus the plan's load at its rate ρ (never below 0): the capacity left for the next
// job.
std::vector<double> ResidualAfterRing(const RingPlan& plan, std::vector<double> residual);

// The plan as a core::JobPlan (docs/formats.md, "Ring jobs"): ring = member host ids in order;
// per abstract rack, one FlowPlan per rack worker (worker -> ToR, ps = the agent, aggregation node
// the ToR) and one AggregatorPlan (ToR -> agent); per hop part, one FlowPlan whose `worker` is
// the sending port (the rack's ToR, or the member host), `ps` the receiving member's host,
// aggregation node the receiving port, path from the sending port, fraction the part's; rate_gbps =
// b_ring (ρ when n' = 1), comm_ms, iteration_ms. Hierarchical and plain rings have no rack
// FlowPlans (no switch state).
core::JobPlan RingToJobPlan(const Network& network, const RingPlan& plan);

// What the planner (scheduler::ComputePlan) runs for the ring all-reduce jobs `rings`: Rina for
// each, one at a time in priority order (then id), around the push load of the PS jobs already in
// `plan` (their JobPlans as routed) and of the ring jobs planned before. Returns one JobPlan per
// job of `rings`, in the order of `rings`. Never fails: a job that cannot be planned (an unknown
// host, a worker without a ToR, a topology the network model refuses) gets the plain ring of its
// workers in spec order with no rates, as before Rina. `options.paths` is k of the hop paths.
std::vector<core::JobPlan> PlanRingJobs(const core::Topology& topology,
                                        const std::vector<JobInput>& rings, const core::Plan& plan,
                                        const PlanningOptions& options);

}  // namespace inac::scheduler
