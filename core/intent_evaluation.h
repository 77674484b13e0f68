// What the data plane, as programmed by a plan's switch intents, can carry: the per-worker rate of
// every parameter-server job of a plan, evaluated from the derived intents alone (the tables of
// api/p4/ina.p4 each SwitchIntent holds, docs/ina-pipeline.md), independently of the planner's
// flow model. It is the check that a rate INAC prints is true of the switches (docs/architecture.md
// "Truth over the model", docs/routing.md section 3d): a printed rate above what the intents
// sustain is a planner defect.
//
// Contract of EvaluateIntents(topology, plan, intents, timing):
//  - Jobs: every JobPlan of `plan` with an empty `ring` (parameter-server jobs), in plan order.
//    Ring jobs are not evaluated (their tags still occupy aggregator slots, see Memory).
//  - Tags: for each PS s of a job (ps_index = position among the sorted keys of ps_shares, P =
//    their number), each chunk range r of ChunkRangesOf(job, s) is the tag
//    AggregationTag(job_id, ps_index, r.index, job.generation, P), carrying u_t = x_s * (r.end -
//    r.begin) per unit of the job's rate λ (Gbps per worker stream; x_s = ps_shares[s]). A shard
//    whose ranges do not cover [0, 1), or a range without a flow of every worker that sends toward
//    s, is a problem (those chunks have no tag to travel with).
//  - Tracing, hop by hop as ina.p4 forwards: each worker of a range (ChunkRange::flows[i]->worker)
//    emits one raw unit (class raw, source NodeAddress(worker), destination NodeAddress(s)) onto
//    its access link (its only up link; with several, the one toward FlowPlan::path[1]). A worker
//    that is its own PS sends nothing over the network. At a switch u a packet that is not
//    FALLBACK is an input of u's aggregation when u has a JobAggregationIntent for the tag and an
//    AggregationInputIntent (tag, source); otherwise the RouteIntent (tag, class, source,
//    destination) sends it out of egress_port to the node behind that port (core::PortOf's port
//    numbering, links that are down included). A missing route, a dropping or multicast route, a
//    port without a link, a packet reaching any host but its PS (the host whose address is the
//    packet's destination), or more hops than nodes (a loop) is a problem.
//  - Aggregation: a switch that received at least one input of the tag emits ONE upstream unit
//    (AGGREGATE: class upstream, source = self_address, destination = upstream_address), traced the
//    same way: to the PS, or into a parent switch that has an AggregationInputIntent for the
//    child's self_address (one input of the parent; chains of any depth). A switch whose window
//    for the tag is empty (JobAggregationIntent::window == 0 or aggregator_count == 0) cannot
//    aggregate: each input it receives leaves as its own FALLBACK unit from self_address along
//    its upstream route, and FALLBACK packets are never aggregated again (they pass a parent to
//    the PS). Problems: an aggregating switch that is not INA-capable, fan_in > 64, an input
//    index >= fan_in, an input_bitmap other than the fan_in low bits, two inputs with one index,
//    fewer distinct inputs arriving than fan_in (the aggregation never completes), a window with
//    slots at or beyond min(32768 registers, the switch's aggregators) (those chunks fall back).
//  - Loads per unit of λ (each unit above carries u_t): every directed link hop carries the units
//    crossing it (capacity Link::gbps; 0 when the link is down); an aggregating switch's
//    processing carries the units of its inputs (capacity InaConfig::processing_gbps; a switch
//    whose window is empty does not aggregate and is charged nothing); the PS's ingress carries
//    the units reaching it (Host::ingress_gbps when set, else the sum of its up links'
//    capacities, Graph::host_ingress_gbps).
//  - Memory, per tag and aggregating switch u with a non-empty window: hold_us = arrival_spread_us
//    when plan.memory_policy is "esa" (released when the aggregate completes); otherwise ("atp",
//    "switchml", anything else) arrival_spread_us + 2 × L + host_turnaround_us, with L the
//    latency of u's upstream route as traced, on through every parent to the PS (per hop
//    Link::latency_us or default_link_latency_us): the aggregator is freed when the PS's result
//    comes back through u. The tag sustains λ ≤ W_eff · B / (hold_us · 125 · u_t), with B the
//    switch's aggregator_bytes, 125 bytes per Gbit·µs, and W_eff the effective window: the
//    distinct aggregators aggregator_base + ((slot_offset + i) mod aggregator_count), i <
//    window, the workers address (agent/worker.h), where an aggregator that k tags' windows on
//    that switch cover (every JobAggregationIntent there, ring tags included) counts 1/k for each.
//  - Rates: max-min fair progressive filling over the jobs (raise every unfrozen λ together;
//    freeze the jobs crossing the first saturated link, processing or ingress resource; each
//    job's memory limits are private caps). A job with a problem gets rate 0, carries nothing and
//    lists its problems (deduplicated, in order). A job nothing limits gets +infinity (bottleneck
//    "none"). `bottleneck` names what froze the job: "link a->b", "processing s", "ingress h" or
//    "memory s tag N"; "problem" for a job with problems.
//  - Errors: InvalidArgument when an intent names a switch the topology does not have (or names
//    one twice). Precondition: `topology` is valid (core::ValidateTopology).
// Deterministic. Nothing of scheduler/ is used: this is the data plane's view, not the model's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {

// The physical assumptions of the evaluation (the same defaults as the planner's memory model).
struct IntentTimingOptions {
  double default_link_latency_us = 1.0;  // per hop when Link::latency_us is unset
  double host_turnaround_us = 2.0;       // at the PS
  double arrival_spread_us = 2.0;        // first to last fragment of a chunk at a switch
};

struct IntentJobRate {
  JobId job_id = 0;
  double rate_gbps = 0;  // λ the intents sustain, Gbps per worker stream
  std::string bottleneck;
  std::vector<std::string> problems;  // empty when the intents carry the job
};

absl::StatusOr<std::vector<IntentJobRate>> EvaluateIntents(const Topology& topology,
                                                           const Plan& plan,
                                                           const std::vector<SwitchIntent>& intents,
                                                           const IntentTimingOptions& timing = {});

}  // namespace inac::core
