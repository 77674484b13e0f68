// IntentTranslator: core::SwitchIntent -> the P4Runtime entities of api/p4/ina.p4 (the control
// contract in docs/southbound.md). Part of the southbound codec layer (exposes protobuf types).
//
// The key field hdr.ina.job_id carries the aggregation tag (core/plan.h, AggregationTag).
//   JobAggregationIntent   -> IngressImpl.ina_job    [tag] -> set_job(fan_in, input_bitmap,
//                             mcast_grp, agg_base, agg_count, priority (int32 two's complement),
//                             upstream_addr, self_addr, slot_shift (the int32
//                             upstream_slot_shift as two's complement))
//                          -> IngressImpl.ina_live   [tag] -> occupant_live() (the tag is
//                             aggregated here: aggregators it occupies are not free)
//   AggregationInputIntent -> IngressImpl.ina_worker [tag, src_addr] -> set_input(index)
//   RouteIntent            -> IngressImpl.ina_route  [tag, pkt_class, src_addr, dst_addr] ->
//                             forward(port) | multicast(grp) | drop() (port and group both 0)
//   HostPortIntent         -> EgressImpl.ina_host    [egress_port] -> to_host(mac, addr)
//                             (metadata "0": fabric state)
//   MulticastGroupIntent   -> MulticastGroupEntry{group_id, one replica per egress port,
//                             instance 0}
// Every table entry carries TableEntry.metadata = the owning job id in decimal text. Counters
// job_aggregated / job_preempted / job_fallback are indexed by the tag's multicast group. All ids
// come from the P4Info by name, resolved once in Create. Output entities are canonical
// (entity_codec.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/p4info_index.h"
#include "southbound/switch_client.h"

namespace inac::southbound {

// Names of the INA pipeline's objects (api/p4/ina.p4).
inline constexpr char kInaJobTable[] = "IngressImpl.ina_job";
inline constexpr char kInaLiveTable[] = "IngressImpl.ina_live";
inline constexpr char kInaWorkerTable[] = "IngressImpl.ina_worker";
inline constexpr char kInaRouteTable[] = "IngressImpl.ina_route";
inline constexpr char kInaHostTable[] = "EgressImpl.ina_host";
inline constexpr char kJobAggregatedCounter[] = "IngressImpl.job_aggregated";
inline constexpr char kJobPreemptedCounter[] = "IngressImpl.job_preempted";
inline constexpr char kJobFallbackCounter[] = "IngressImpl.job_fallback";

// Thread safety: immutable after Create; all methods are const.
class IntentTranslator {
 public:
  // Resolves every table, match field, action, parameter and counter of the contract by name.
  // NotFound (naming the missing object) when the P4Info lacks one.
  static absl::StatusOr<IntentTranslator> Create(P4InfoIndex p4info);

  // The entities `intent` requires, canonical, ordered so that what is referenced comes first:
  // multicast groups, then ina_job and ina_live, ina_worker, ina_route entries. InvalidArgument
  // when a value does not fit its P4 field (input index beyond bit<8>, port beyond bit<9>, group
  // beyond bit<16>), when a route names both a port and a group, or when a multicast group id is 0.
  absl::StatusOr<std::vector<p4::v1::Entity>> Translate(const core::SwitchIntent& intent) const;

  // Single-entry builders (used by Translate; exposed for tests and tools).
  absl::StatusOr<p4::v1::Entity> JobEntry(const core::JobAggregationIntent& job) const;
  absl::StatusOr<p4::v1::Entity> LiveEntry(const core::JobAggregationIntent& job) const;
  absl::StatusOr<p4::v1::Entity> InputEntry(const core::AggregationInputIntent& input) const;
  absl::StatusOr<p4::v1::Entity> RouteEntry(const core::RouteIntent& route) const;
  absl::StatusOr<p4::v1::Entity> MulticastGroup(const core::MulticastGroupIntent& group) const;
  absl::StatusOr<p4::v1::Entity> HostEntry(const core::HostPortIntent& host) const;

  // Wildcard read filters for everything INAC owns on a switch: each INA table (whole table)
  // and all multicast groups (group id 0).
  std::vector<p4::v1::Entity> OwnedStateFilters() const;
  // True for a table entry of an INA table or a multicast group entry.
  bool IsOwned(const p4::v1::Entity& entity) const;
  // Write-order rank: 0 multicast groups, 1 ina_job, ina_live and ina_host, 2 ina_worker,
  // 3 ina_route,
  // 4 other.
  // Inserts go in increasing rank, deletes in decreasing rank.
  int DependencyRank(const p4::v1::Entity& entity) const;

  // Read filters for the three counters of every aggregation of `intent` (entries of
  // intent.jobs with a non-zero multicast group; index = that group).
  std::vector<p4::v1::Entity> CounterFilters(const core::SwitchIntent& intent) const;
  // Wildcard filter for every cell of every counter (counter id 0).
  static p4::v1::Entity AllCountersFilter();
  // Assembles the counters of `intent`'s aggregations (same selection and order as
  // CounterFilters) from counter entities read back; cells absent from `read` count as zero.
  std::vector<AggregationCounters> DecodeCounters(const core::SwitchIntent& intent,
                                                  const std::vector<p4::v1::Entity>& read) const;

  const P4InfoIndex& p4info() const { return p4info_; }
  uint32_t job_table_id() const { return job_.table_id; }
  uint32_t worker_table_id() const { return worker_.table_id; }
  uint32_t route_table_id() const { return route_.table_id; }
  uint32_t host_table_id() const { return host_.table_id; }

 private:
  struct JobIds {
    uint32_t table_id = 0, action_id = 0;
    FieldInfo job_id, fan_in, input_bitmap, mcast_grp, agg_base, agg_count, priority, upstream,
        self, slot_shift;
  };
  struct LiveIds {
    uint32_t table_id = 0, action_id = 0;
    FieldInfo occupant;
  };
  struct WorkerIds {
    uint32_t table_id = 0, action_id = 0;
    FieldInfo job_id, src_addr, index;
  };
  struct RouteIds {
    uint32_t table_id = 0, forward_id = 0, multicast_id = 0, drop_id = 0;
    FieldInfo job_id, cls, src_addr, dst_addr, port, grp;
  };
  struct HostIds {
    uint32_t table_id = 0, action_id = 0;
    FieldInfo port, mac, addr;
  };
  struct CounterIds {
    uint32_t aggregated = 0, preempted = 0, fallback = 0;
  };

  explicit IntentTranslator(P4InfoIndex p4info) : p4info_(std::move(p4info)) {}

  P4InfoIndex p4info_;
  JobIds job_;
  LiveIds live_;
  WorkerIds worker_;
  RouteIds route_;
  HostIds host_;
  CounterIds counters_;
};

}  // namespace inac::southbound
