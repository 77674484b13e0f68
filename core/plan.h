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
  double rate_gbps = 0;  // predicted minimum per-worker sending rate (evaluated)
  std::optional<double> lp_bound_gbps;
  double comm_ms = 0;
  double iteration_ms = 0;

  bool operator==(const JobPlan&) const = default;
};

struct Plan {
  int64_t version = 0;
  std::string algorithm;
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
// Aggregation tags. A job with several parameter servers aggregates one shard of its model per PS,
// each with its own set of inputs, so the data plane keys aggregation state by an *aggregation
// tag*, the value carried in the INA header field `job_id`: tag = job_id * 8 + ps_index (ps_index is
// the PS's position among the keys of JobPlan::ps_shares, which are sorted by id; < 8). Every entry also carries the owning job id
// (written to TableEntry.metadata). Precondition: job ids are below 2^29.

inline constexpr int kMaxParameterServersPerJob = 8;
uint32_t AggregationTag(JobId job_id, int ps_index);

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

// `ina_route` table entry (key: tag, source_address, destination_address): next hop of the shard's
// traffic. Exactly one of egress_port / multicast_group is non-zero. Gradient traffic is keyed by
// its real source and destination; result traffic from a PS uses destination_address 0 and a
// multicast group.
struct RouteIntent {
  uint32_t tag = 0;
  JobId job_id = 0;
  uint32_t source_address = 0;
  uint32_t destination_address = 0;
  uint32_t egress_port = 0;
  uint32_t multicast_group = 0;

  bool operator==(const RouteIntent&) const = default;
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

  bool operator==(const SwitchIntent&) const = default;
  bool empty() const {
    return jobs.empty() && inputs.empty() && routes.empty() && multicast_groups.empty();
  }
};

// Multicast group ids (1..65535, also the index of the per-job counters) are assigned to tags by
// DeriveSwitchIntents: group = 1 + (tag mod 65535), probing upwards past groups already taken by a
// smaller tag of the same plan, so a tag keeps its group while its job lives.
// Derives every switch's intent from `plan` on `topology` (precondition: the plan refers only to
// nodes of the topology; unknown nodes are skipped). Result: one SwitchIntent per switch of the
// topology, in topology order, each with `version = plan.version`, entries sorted by key so equal
// plans give equal intents. Aggregator regions are laid out per switch in tag order.
std::vector<SwitchIntent> DeriveSwitchIntents(const Topology& topology, const Plan& plan);

}  // namespace inac::core
