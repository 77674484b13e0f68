// The switch aggregator-memory model shared by the memory policies, the planner and the simulator
// (ESA, ICNP 2023 / arXiv 2201.06398, sections 2-3; ATP and SwitchML,
// NSDI 2021). Documented in docs/memory.md.
//
// A switch v has A_v aggregators of k int32 lanes (k = aggregator_bytes / 4). A job's gradient is
// cut into chunks of 4k bytes; a chunk holds one aggregator from its first fragment until it is
// released, which depends on the policy (the "hold time"). By Little's law a job sending
// per-worker streams at rate r through v keeps r * hold / chunk aggregators busy there; that is
// its window W_j at that rate.
//
// Pure functions, no state, deterministic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan.h"
#include "core/topology.h"

namespace inac::scheduler {

enum class MemoryPolicy {
  kNoIna,     // no aggregation at all (every worker to its PS)
  kSwitchMl,  // static pools at admission, no sharing, no preemption
  kAtp,       // hashed best-effort sharing, collision -> PS; release when the PS result passes back
  kEsa,       // hashed sharing with priority preemption; release as soon as the aggregate completes
};

// "no_ina", "switchml", "atp", "esa".
std::string_view MemoryPolicyName(MemoryPolicy policy);
// nullopt for an unknown name (exact, lower case).
std::optional<MemoryPolicy> ParseMemoryPolicy(std::string_view name);

// Stragglers (docs/memory.md "Stragglers"): per chunk, each of the n workers' fragments reaches
// the aggregating switch at an offset drawn independently from `distribution`:
//   kNone:        no offset (only AggregatorTimingOptions::arrival_spread_us, a fixed skew);
//   kUniform:     uniform on [0, spread_us];
//   kExponential: exponential with mean spread_us (a few slow workers, a long tail).
// A chunk's aggregator then waits from its first to its last fragment: the expected range of the
// n offsets is added to the hold of every policy (HoldTimeUs via TimingAt).
enum class StragglerDistribution { kNone, kUniform, kExponential };

struct StragglerModel {
  StragglerDistribution distribution = StragglerDistribution::kNone;
  double spread_us = 0;  // >= 0
  uint64_t seed = 1;     // the sample of chunks below is a function of (model, n) only
  int samples = 4096;    // chunks sampled
};

// What a sample of `samples` chunks of `workers` fragments each says (seeded, deterministic;
// exact 0 / 0.5 for kNone or spread 0):
//   mean_range_us: E[last - first offset], the straggler part of the hold;
//   remaining_at_preemption: for a preemption at an instant uniform in a chunk's hold (weighted
//     by the hold's length: a longer hold is hit more often), the expected fraction of the
//     other n - 1 fragments that arrive after it, i.e. still go to the PS unaggregated. With
//     evenly spread fragments it is 1/2; with an exponential tail most fragments are in when a
//     chunk waits for its straggler, so it is 1 / H_{n-1} (0.39 for n = 8, 0.25 for n = 32).
struct ChunkArrivalStats {
  double mean_range_us = 0;
  double remaining_at_preemption = 0.5;
};
ChunkArrivalStats SampleChunkArrivals(const StragglerModel& model, int workers);

// Latency assumptions of the model. Link::latency_us overrides the default per link.
struct AggregatorTimingOptions {
  // One-way latency of one link including the next switch's pipeline, when Link::latency_us is
  // unset.
  double default_link_latency_us = 1.0;
  // Host stack time added to every round trip that turns around at a host (the PS).
  double host_turnaround_us = 2.0;
  // Time between the first and the last fragment of one chunk reaching the aggregating switch
  // (worker skew inside the communication phase).
  double arrival_spread_us = 2.0;
  // Worker stragglers on top of that skew (none by default).
  StragglerModel stragglers;
};

// The latencies one job sees at one aggregating switch.
struct AggregationTiming {
  double spread_us = 0;  // first to last fragment of a chunk (skew + expected straggler range)
  double ps_rtt_us = 0;  // switch -> PS -> switch, including the PS's turnaround
  // Fraction of a preempted chunk's other fragments still to come (ChunkArrivalStats).
  double remaining_at_preemption = 0.5;
};

// THE hold-time model (one for the controller's grant, its rate cap and the simulator; ESA,
// ICNP 2023, section 2.2 "synchronous deallocation", is the paper's; the straggler term and
// the RTT from the plan's paths are INAC's reading). How long one chunk holds one aggregator,
// microseconds, with spread = skew + E[straggler range of the n fragments] and
// ps_rtt = 2 x (aggregator path latency to the PS) + host turnaround:
//   esa:           spread                (released as soon as the aggregate is complete)
//   atp, switchml: spread + ps_rtt       (released when the PS's result passes back; a SwitchML
//                                          slot is reused only when that result came back)
//   no_ina:        0
double HoldTimeUs(MemoryPolicy policy, const AggregationTiming& timing);

// Bytes one chunk carries: one aggregator's lanes (4k bytes = aggregator_bytes).
inline int64_t ChunkBytes(int aggregator_bytes) { return aggregator_bytes; }

// Aggregators a job needs on a switch to sustain `rate_gbps` per worker stream when each chunk is
// held `hold_us`: ceil(rate * hold / chunk) (Little's law). 0 for a zero rate or hold.
// Precondition: aggregator_bytes > 0, rate and hold >= 0.
int64_t WindowAggregators(double rate_gbps, double hold_us, int aggregator_bytes);

// The per-worker rate (Gbps) that `aggregators` aggregators sustain with hold `hold_us`:
// aggregators * chunk / hold. Infinity when hold_us == 0.
double MemoryRateCapGbps(int64_t aggregators, double hold_us, int aggregator_bytes);

// One-way latency of the node path `path` (ids) on `graph`, microseconds: per hop the link's
// latency_us or the default. Hops without an up link between them count the default.
double PathLatencyUs(const core::Graph& graph, const std::vector<std::string>& path,
                     const AggregatorTimingOptions& options);

// The timing of `job` at `switch_id`: spread = options.arrival_spread_us plus the expected
// straggler range of the fragments a chunk has there (n = distinct workers of the flows
// aggregated at `switch_id`, at least 1; SampleChunkArrivals); ps_rtt = twice the latency of the
// route the data plane programs from that switch to its PS (core::UpstreamRouteOf: the
// aggregator path, and for a chain child -- a path ending at a parent that re-aggregates it --
// on through the parent to the PS, since ATP and SwitchML free an aggregator only when the PS's
// result comes back through it; the longest one when the switch serves several PSs) plus the
// host turnaround. A switch without an aggregator path (a plan that does not state one) gets
// the default latency per hop of a one-hop path.
AggregationTiming TimingAt(const core::Graph& graph, const core::JobPlan& job,
                           const std::string& switch_id, const AggregatorTimingOptions& options);

// The per-worker line rate of a job: the smallest access-link capacity among its workers (the
// rate its streams cannot exceed). 0 when a worker is unknown or has no up link.
double WorkerLineRateGbps(const core::Graph& graph, const std::vector<std::string>& workers);

}  // namespace inac::scheduler
