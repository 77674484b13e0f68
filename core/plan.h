// What the scheduler decides (Plan / JobPlan) and what each switch must hold because of it
// (SwitchIntent, derived from a Plan by DeriveSwitchIntents). Shapes grow as algorithms land.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/topology.h"

namespace inac::core {

// One worker's gradient stream toward one parameter server.
struct FlowPlan {
  std::string worker;
  std::string ps;
  // Where the stream is aggregated: an INA switch on the way, or the PS itself (no INA).
  std::string aggregation_node;
  // Node ids from the worker to the aggregation node, both included.
  std::vector<std::string> path;
  // Fraction of the worker's gradient toward `ps` carried by this flow (an aligned chunk range),
  // in (0, 1]. 1 unless the plan splits the worker over several aggregation nodes (ATP's
  // spill-over); the flows of one (worker, ps) sum to 1.
  double fraction = 1;

  bool operator==(const FlowPlan&) const = default;
};

// The aggregated stream of one switch toward one PS (fan-in collapsed to one stream).
struct AggregatorPlan {
  std::string switch_id;
  std::string ps;
  // Node ids from the switch to the PS, both included.
  std::vector<std::string> path;

  bool operator==(const AggregatorPlan&) const = default;
};

struct JobPlan {
  JobId job_id = 0;
  // Share of the model each PS holds (sum 1). Empty for ring all-reduce.
  std::map<std::string, double> ps_shares;
  std::vector<FlowPlan> flows;
  std::vector<AggregatorPlan> aggregator_paths;
  // Aggregators granted on each switch (ESA/ATP/SwitchML memory allocation).
  std::map<std::string, int64_t> aggregators;
  // Ring order for ring all-reduce (Rina); member ids are hosts or INA ToR switches.
  std::vector<std::string> ring;
  int batch_size = 0;
  int priority = 0;  // the integer the switch uses for preemption
  // Aggregation generation: bumped by CarryAggregationGenerations whenever a new plan changes
  // where the job's gradients are aggregated (which workers each switch sums, for which PS and
  // chunk range), kept otherwise. Its low two bits are part of the job's aggregation tags, so a
  // packet aggregated under one plan is never read with another plan's input bitmaps.
  uint32_t generation = 0;
  double rate_gbps = 0;  // predicted minimum per-worker sending rate (evaluated)
  std::optional<double> lp_bound_gbps;
  double comm_ms = 0;
  double iteration_ms = 0;

  bool operator==(const JobPlan&) const = default;
};

struct Plan {
  int64_t version = 0;
  std::string algorithm;
  // The aggregator-memory policy the grants come from ("esa", "atp", "switchml"; empty: static
  // pools). It decides the data plane's memory layout (DeriveSwitchIntents): "esa" and "atp"
  // share each switch's aggregators among its tags (ESA preempts by priority, ATP does not);
  // anything else gives each tag a static pool of its grant (SwitchML).
  std::string memory_policy;
  // Digest of what the plan was computed from (topology version, jobs and their priorities,
  // options), set by the controller: a restart re-plans only when it differs.
  std::string fingerprint;
  std::vector<JobPlan> jobs;
  double solve_ms = 0;

  bool operator==(const Plan&) const = default;
  const JobPlan* FindJob(JobId id) const;
};

// --- Per-switch intent: the control-plane state of api/p4/ina.p4 on one switch. ---
//
// Aggregation tags. The data plane keys aggregation state by an *aggregation tag*, the value
// carried in the INA header field `job_id`. A job aggregates one shard of its model per PS, and a
// shard whose workers split their gradient over several aggregation nodes (FlowPlan::fraction <
// 1) is cut into aligned chunk ranges, each with its own inputs, so each (PS, range) has its own
// tag: tag = (generation mod 4) * 2^30 + job_id * 64 + slot, where the job's 64 slots are shared
// by its shards: slot = 8 * (P * (range / 8) + ps_index) + range mod 8 with P the job's number of
// PSs (ps_index: the PS's position among the keys of JobPlan::ps_shares, sorted by id, < P <= 8;
// range < MaxRangesPerShard(P), 0 when the shard is not split; generation:
// JobPlan::generation). Ranges below 8 give slot = ps_index * 8 + range whatever P, the layout
// before split plans; a job with one PS may cut its shard into 64 ranges, with two into 32, with
// three or four into 16, with more into 8 (grid-split realises the LP's fractional aggregation
// with them). Every entry also carries the owning job id (TableEntry.metadata; 0 for fabric
// entries). Precondition: job ids are below 2^24.
//
// Why the generation: an aggregation switch's bitmap names its inputs by position
// (AggregationInputIntent::index), and a re-plan can give the same switch other inputs for the
// same shard. Switches and hosts learn a new plan at different moments, so a packet summed under
// the old inputs could be counted under the new ones. With the generation in the tag the two
// plans use different tags: a switch holds entries for one generation only and drops the other's
// packets (retransmitted under the new tag), and the PS reads each packet with the inputs of its
// own tag. Two bits suffice because generations of one job are seconds apart and a host that
// misses a generation refuses packets of tags it does not know.

inline constexpr int kMaxParameterServersPerJob = 8;
// Ranges per shard whatever the number of PSs (MaxRangesPerShard(8)).
inline constexpr int kMaxRangesPerShard = 8;
inline constexpr int kTagSlotsPerJob = 64;
inline constexpr int kTagGenerationShift = 30;
inline constexpr uint32_t kTagBaseMask = (uint32_t{1} << kTagGenerationShift) - 1;
// Chunk ranges a shard may be cut into when its job has `ps_count` PSs: 8 * floor(8 / ps_count)
// (64, 32, 16, 16, 8, 8, 8, 8 for 1..8 PSs; ps_count < 1 counts as 1, > 8 as 8).
int MaxRangesPerShard(int ps_count);
// Precondition: 0 <= ps_index < ps_count <= 8 and 0 <= range < MaxRangesPerShard(ps_count)
// (ranges below 8 need no ps_count: the slot is ps_index * 8 + range for every count).
uint32_t AggregationTag(JobId job_id, int ps_index, int range = 0, uint32_t generation = 0,
                        int ps_count = kMaxParameterServersPerJob);
// The tag without its generation bits: the same for every generation of a (job, PS, range).
inline uint32_t BaseTag(uint32_t tag) { return tag & kTagBaseMask; }

// Sets the generation of every job of `next`: that of the same job in `previous` when both plans
// aggregate it alike (same PSs and, per PS and worker, the same sequence of (aggregation node,
// fraction) over the flows that have a path), that + 1 when they differ, 0 for a job `previous`
// does not hold (or without `previous`). Paths, grants, windows and priorities do not count: they
// change no input bitmap.
void CarryAggregationGenerations(const Plan* previous, Plan* next);

// One aligned chunk range of a (job, PS) shard: the part [begin, end) of the shard's chunks that
// one tag carries, and where each worker's part of it is aggregated (the worker's FlowPlan that
// covers it). A shard that no worker splits is one range [0, 1). Each worker's flows toward the
// PS cover [0, 1) in plan order; the ranges are the pieces between every worker's cut points (at
// most MaxRangesPerShard(job.ps_shares.size()); the rest is not covered). Pointers into `job`.
struct ChunkRange {
  int index = 0;  // the `range` of AggregationTag
  double begin = 0;
  double end = 1;
  std::vector<const FlowPlan*> flows;
};
std::vector<ChunkRange> ChunkRangesOf(const JobPlan& job, const std::string& ps);

// One aggregation tag of a job as DeriveSwitchIntents programs it: a chunk range of a (job, PS)
// shard (ChunkRangesOf), its tag, its traffic weight -- the part of each worker's stream it
// carries, x_s * (end - begin) with x_s = JobPlan::ps_shares[ps] -- and the switches that hold an
// `ina_job` entry for it: the aggregation switches of its flows and, through chains
// (RoutedStream::via), the parents that re-aggregate their partial sums.
struct JobTag {
  std::string ps;
  ChunkRange range;  // pointers into the job
  uint32_t tag = 0;  // AggregationTag(job_id, ps_index, range.index, generation, PSs)
  double weight = 0;
  std::vector<std::string> switches;  // sorted by id
};
// Every tag of `job`'s parameter-server shards, in tag order (ring jobs: none). PSs and nodes
// `graph` does not know are skipped as DeriveSwitchIntents skips them.
std::vector<JobTag> JobTagsOf(const Graph& graph, const JobPlan& job);

// The route DeriveSwitchIntents programs for what `switch_id` sends toward `ps` (its aggregates
// and fallbacks), node ids from the switch to the PS: the plan's AggregatorPlan path; in a chain
// (a path ending at a parent that re-aggregates it) that path on through the parent's own path to
// the PS; a fewest-hop path over up links when the plan has none or the chain is not programmed
// (the parent's path does not reach the PS, or the route would revisit a node). Empty when
// nothing connects them.
std::vector<std::string> UpstreamRouteOf(const Graph& graph, const JobPlan& job,
                                         const std::string& ps, const std::string& switch_id);

// The one rule for a job's aggregators on a switch (the data plane's windows, DeriveSwitchIntents,
// and the flow model's memory cap, scheduler/model/flow_model.h): a grant of `grant` aggregators
// is split over the job's tags there in proportion to their traffic weights (`weights`, in tag
// order; JobTag::weight), since a tag carrying a fraction w of the traffic keeps that fraction of
// the aggregators busy. Largest remainders: each tag gets floor(grant * w / sum w), the units left
// go to the largest remainders, ties to the earlier tag. When grant >= the number of tags, every
// tag gets at least 1 (a tag left at 0 takes one from the tag with the most aggregators per unit
// of weight that has 2 or more, ties to the earlier tag). Negative weights count as 0; all weights
// 0: an even split. Sum of the result = max(grant, 0).
std::vector<int64_t> SplitGrant(int64_t grant, const std::vector<double>& weights);

// The MAC address INAC gives a node (48 bits in a uint64): 02:00 (locally administered) followed
// by its IPv4 address (NodeAddress). The data plane writes it as the destination of frames to a
// host; the lab configures hosts with it.
uint64_t NodeMac(const Topology& topology, const std::string& node_id);

// `ina_job` table entry (key: tag): this switch aggregates one shard of a job.
struct JobAggregationIntent {
  uint32_t tag = 0;
  JobId job_id = 0;
  uint32_t fan_in = 0;           // inputs aggregated here (workers and child aggregators)
  uint64_t input_bitmap = 0;     // all fan_in bits set
  uint32_t multicast_group = 0;  // result replication group of this tag, 0 if none on this switch
  uint32_t aggregator_base = 0;  // first aggregator index of the region on this switch
  uint32_t aggregator_count = 0;
  int32_t priority = 0;
  uint32_t upstream_address = 0;  // where the aggregate is sent: the PS of this shard
  // This switch's address: the IPv4 source of everything it sends toward the PS (aggregates,
  // fallbacks, evicted partial sums), so that routes and the PS tell them from raw chunks.
  uint32_t self_address = 0;
  // Not written to the switch: the slots the workers use for this tag, [slot_offset,
  // slot_offset + window) within the region (they pick slot_offset + chunk mod window). Equal to
  // the region under static pools; under shared memory the region is the switch's whole pool and
  // the window is placed so that tags collide only beyond their grants. The window is the same
  // on every switch of the tag that has a region (upstream_slot_shift aligns the offsets).
  uint32_t slot_offset = 0;
  uint32_t window = 0;
  // Added (mod 2^32) to the slot of what this switch sends toward the PS: a chain child's
  // aggregate lands in its parent's window (the parent's slot_offset minus this switch's; 0
  // elsewhere, and under static pools, whose slots are relative to each region).
  int32_t upstream_slot_shift = 0;

  bool operator==(const JobAggregationIntent&) const = default;
};

// `ina_worker` table entry (key: tag, source_address): packets of the shard from `source_address`
// are input number `index`.
struct AggregationInputIntent {
  uint32_t tag = 0;
  JobId job_id = 0;
  uint32_t source_address = 0;
  uint32_t index = 0;  // bit position in the input bitmap

  bool operator==(const AggregationInputIntent&) const = default;
};

// The class of an INA packet, the second key field of `ina_route`:
//   kRaw       a worker's chunk (flags 0, or RETRANSMIT): source = the worker, destination = PS
//   kUpstream  from an aggregation switch to the PS (AGGREGATE, or FALLBACK: unaggregated,
//              partial, evicted): source = that switch (JobAggregationIntent::self_address)
//   kResult    the PS's finished chunk (RESULT): source = the PS, destination 0 in the lookup
enum class RouteClass : uint8_t { kRaw = 0, kUpstream = 1, kResult = 2 };
// "raw", "upstream", "result"; Parse returns nullopt for anything else.
const char* RouteClassName(RouteClass cls);
std::optional<RouteClass> ParseRouteClass(const std::string& name);

// `ina_route` table entry (key: tag, class, source_address, destination_address): next hop of the
// tag's traffic. Exactly one of egress_port / multicast_group is non-zero (both 0: drop). Raw
// chunks are routed from the worker to its aggregation node (the PS when not aggregated),
// upstream packets from the aggregation switch to the PS, results down a loop-free tree rooted at
// the PS: each switch replicates only toward its children (the ports toward the tag's workers).
struct RouteIntent {
  uint32_t tag = 0;
  JobId job_id = 0;
  uint32_t source_address = 0;
  uint32_t destination_address = 0;
  uint32_t egress_port = 0;
  uint32_t multicast_group = 0;
  RouteClass packet_class = RouteClass::kRaw;

  bool operator==(const RouteIntent&) const = default;
};

// `ina_host` table entry (egress, key: egress port): the host behind a host-facing port. Frames
// to it get its MAC as destination, and results replicated to it its IPv4 address, so an ordinary
// UDP socket receives them. Fabric state (job id 0), derived for the hosts of the plan's jobs.
struct HostPortIntent {
  uint32_t port = 0;
  uint64_t mac = 0;
  uint32_t address = 0;

  bool operator==(const HostPortIntent&) const = default;
};

// A multicast group on the switch's packet replication engine (results of one tag).
struct MulticastGroupIntent {
  uint32_t group_id = 0;
  JobId job_id = 0;
  std::vector<uint32_t> egress_ports;  // sorted, unique

  bool operator==(const MulticastGroupIntent&) const = default;
};

struct SwitchIntent {
  std::string switch_id;
  int64_t version = 0;  // the plan version it was derived from
  std::vector<JobAggregationIntent> jobs;
  std::vector<AggregationInputIntent> inputs;
  std::vector<RouteIntent> routes;
  std::vector<MulticastGroupIntent> multicast_groups;
  std::vector<HostPortIntent> host_ports;

  bool operator==(const SwitchIntent&) const = default;
  bool empty() const {
    return jobs.empty() && inputs.empty() && routes.empty() && multicast_groups.empty() &&
           host_ports.empty();
  }
};

// Multicast group ids (1..kMaxMulticastGroup, also the index of the per-tag counters) are
// assigned to tags by DeriveSwitchIntents: group = 1 + (BaseTag(tag) mod kMaxMulticastGroup),
// probing upwards past groups already taken by a smaller tag of the same plan, so a tag keeps its
// group while its job lives, across generations. BMv2 refuses group ids above 32767 (OUT_OF_RANGE
// "Group id value is too high"), although v1model's mcast_grp is bit<16>.
inline constexpr uint32_t kMaxMulticastGroup = 32767;
//
// Derives every switch's intent from `plan` on `topology` (the contract with api/p4/ina.p4,
// docs/ina-pipeline.md). Per tag: an `ina_job` entry and one `ina_worker` entry per input on each
// aggregation switch; raw routes along each worker's path to its aggregation node (to the PS when
// it is not aggregated); upstream routes from each aggregation switch to the PS (the plan's
// AggregatorPlan path, or a shortest path when the plan has none; a path that ends at an INA
// switch with an AggregatorPlan of its own toward the same PS -- RoutedStream::via, ATP's
// re-aggregation -- makes the switch an input of that parent, which aggregates the tag even
// without workers, and its upstream route runs through the parent on to the PS: one level of
// chains, loop-free, or none); a result tree rooted at the PS
// over the links those paths use (breadth-first, so loop-free, each switch replicating only toward
// its children); `ina_host` entries for every host of a job in the plan. A tag's share on a switch
// is its part of the job's grant there (JobPlan::aggregators) by SplitGrant over the job's tags on
// that switch (PS tags weighted by JobTag::weight, ring racks equally). Slots line up along a
// chain: a tag has one window, the least of its non-zero shares over its switches (a switch whose
// share is 0 gets aggregator_count 0 and falls back), and a chain child's upstream_slot_shift
// moves its aggregate's slot into its parent's window. Aggregator regions per switch in tag
// order: static pools of each tag's window, or, with memory_policy "esa"/"atp", the switch's whole
// pool (aggregators, at most 32768) shared by all its tags with each tag's window placed as the
// static layout would place it ("atp": priorities 0, so nothing preempts).
// Ring jobs (JobPlan::ring, core/ring_intents.h): each abstract rack (core::RingRacksOf) is a tag
// as above whose PS is the rack's agent (RingRackTag; its workers' flows end at the ToR, its
// AggregatorPlan leads to the agent, results are multicast from the ToR to the rack's workers),
// and the ring hops get routes only (RingHopTag: raw member -> next member, upstream for the
// acknowledgements back), with `ina_host` entries for every ring member.
// Preconditions: the plan refers only to nodes of the topology (unknown nodes are skipped); at
// most MaxRangesPerShard(PSs of the job) chunk ranges per (job, PS) (further ranges are not
// derived). Result: one
// SwitchIntent per switch of the topology, in topology order, each with `version =
// plan.version`, entries sorted by key, so equal plans give equal intents.
std::vector<SwitchIntent> DeriveSwitchIntents(const Topology& topology, const Plan& plan);

}  // namespace inac::core
