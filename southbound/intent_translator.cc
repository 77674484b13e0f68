#include "southbound/intent_translator.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "southbound/bytestrings.h"
#include "southbound/entity_codec.h"

namespace inac::southbound {
namespace {

// Names the entry in error messages; the text is only built when a value does not fit.
struct Where {
  core::JobId job_id;
  uint32_t tag;
};

// Encodes `value` for `field`; InvalidArgument names the job, tag and field `what`.
absl::StatusOr<std::string> Encode(int64_t value, const FieldInfo& field, const Where& where,
                                   const char* what) {
  if (value >= 0) {
    auto bytes = EncodeField(static_cast<uint64_t>(value), field.bitwidth);
    if (bytes.ok()) return bytes;
  }
  return absl::InvalidArgumentError(absl::StrCat("job ", where.job_id, " tag ", where.tag, ": ",
                                                 what, " ", value, " does not fit bit<",
                                                 field.bitwidth, ">"));
}

absl::Status AddExact(p4::v1::TableEntry& entry, const FieldInfo& field, int64_t value,
                      const Where& where, const char* what) {
  INAC_ASSIGN_OR_RETURN(std::string bytes, Encode(value, field, where, what));
  auto* match = entry.add_match();
  match->set_field_id(field.id);
  match->mutable_exact()->set_value(std::move(bytes));
  return absl::OkStatus();
}

absl::Status AddParam(p4::v1::Action& action, const FieldInfo& field, int64_t value,
                      const Where& where, const char* what) {
  INAC_ASSIGN_OR_RETURN(std::string bytes, Encode(value, field, where, what));
  auto* param = action.add_params();
  param->set_param_id(field.id);
  param->set_value(std::move(bytes));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Table(const P4InfoIndex& p4info, const char* name) {
  return p4info.TableId(name);
}

}  // namespace

absl::StatusOr<IntentTranslator> IntentTranslator::Create(P4InfoIndex p4info) {
  IntentTranslator t(std::move(p4info));
  const P4InfoIndex& p = t.p4info_;

  JobIds& j = t.job_;
  INAC_ASSIGN_OR_RETURN(j.table_id, Table(p, kInaJobTable));
  INAC_ASSIGN_OR_RETURN(j.action_id, p.ActionId("IngressImpl.set_job"));
  INAC_ASSIGN_OR_RETURN(j.job_id, p.MatchField(j.table_id, "hdr.ina.job_id"));
  INAC_ASSIGN_OR_RETURN(j.fan_in, p.ActionParam(j.action_id, "fan_in"));
  INAC_ASSIGN_OR_RETURN(j.input_bitmap, p.ActionParam(j.action_id, "input_bitmap"));
  INAC_ASSIGN_OR_RETURN(j.mcast_grp, p.ActionParam(j.action_id, "mcast_grp"));
  INAC_ASSIGN_OR_RETURN(j.agg_base, p.ActionParam(j.action_id, "agg_base"));
  INAC_ASSIGN_OR_RETURN(j.agg_count, p.ActionParam(j.action_id, "agg_count"));
  INAC_ASSIGN_OR_RETURN(j.priority, p.ActionParam(j.action_id, "priority"));
  INAC_ASSIGN_OR_RETURN(j.upstream, p.ActionParam(j.action_id, "upstream_addr"));
  INAC_ASSIGN_OR_RETURN(j.self, p.ActionParam(j.action_id, "self_addr"));
  INAC_ASSIGN_OR_RETURN(j.slot_shift, p.ActionParam(j.action_id, "slot_shift"));

  LiveIds& l = t.live_;
  INAC_ASSIGN_OR_RETURN(l.table_id, Table(p, kInaLiveTable));
  INAC_ASSIGN_OR_RETURN(l.action_id, p.ActionId("IngressImpl.occupant_live"));
  INAC_ASSIGN_OR_RETURN(l.occupant, p.MatchField(l.table_id, "meta.occupant"));

  WorkerIds& w = t.worker_;
  INAC_ASSIGN_OR_RETURN(w.table_id, Table(p, kInaWorkerTable));
  INAC_ASSIGN_OR_RETURN(w.action_id, p.ActionId("IngressImpl.set_input"));
  INAC_ASSIGN_OR_RETURN(w.job_id, p.MatchField(w.table_id, "hdr.ina.job_id"));
  INAC_ASSIGN_OR_RETURN(w.src_addr, p.MatchField(w.table_id, "hdr.ipv4.src_addr"));
  INAC_ASSIGN_OR_RETURN(w.index, p.ActionParam(w.action_id, "index"));

  RouteIds& r = t.route_;
  INAC_ASSIGN_OR_RETURN(r.table_id, Table(p, kInaRouteTable));
  INAC_ASSIGN_OR_RETURN(r.forward_id, p.ActionId("IngressImpl.forward"));
  INAC_ASSIGN_OR_RETURN(r.multicast_id, p.ActionId("IngressImpl.multicast"));
  INAC_ASSIGN_OR_RETURN(r.drop_id, p.ActionId("IngressImpl.drop"));
  INAC_ASSIGN_OR_RETURN(r.job_id, p.MatchField(r.table_id, "hdr.ina.job_id"));
  INAC_ASSIGN_OR_RETURN(r.cls, p.MatchField(r.table_id, "meta.pkt_class"));
  INAC_ASSIGN_OR_RETURN(r.src_addr, p.MatchField(r.table_id, "hdr.ipv4.src_addr"));
  INAC_ASSIGN_OR_RETURN(r.dst_addr, p.MatchField(r.table_id, "hdr.ipv4.dst_addr"));
  INAC_ASSIGN_OR_RETURN(r.port, p.ActionParam(r.forward_id, "port"));
  INAC_ASSIGN_OR_RETURN(r.grp, p.ActionParam(r.multicast_id, "grp"));

  HostIds& h = t.host_;
  INAC_ASSIGN_OR_RETURN(h.table_id, Table(p, kInaHostTable));
  INAC_ASSIGN_OR_RETURN(h.action_id, p.ActionId("EgressImpl.to_host"));
  INAC_ASSIGN_OR_RETURN(h.port, p.MatchField(h.table_id, "standard_metadata.egress_port"));
  INAC_ASSIGN_OR_RETURN(h.mac, p.ActionParam(h.action_id, "mac"));
  INAC_ASSIGN_OR_RETURN(h.addr, p.ActionParam(h.action_id, "addr"));

  INAC_ASSIGN_OR_RETURN(t.counters_.aggregated, p.CounterId(kJobAggregatedCounter));
  INAC_ASSIGN_OR_RETURN(t.counters_.preempted, p.CounterId(kJobPreemptedCounter));
  INAC_ASSIGN_OR_RETURN(t.counters_.fallback, p.CounterId(kJobFallbackCounter));
  return t;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::JobEntry(
    const core::JobAggregationIntent& job) const {
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_table_entry();
  entry.set_table_id(job_.table_id);
  const Where where{job.job_id, job.tag};
  INAC_RETURN_IF_ERROR(AddExact(entry, job_.job_id, job.tag, where, "aggregation tag"));
  auto& action = *entry.mutable_action()->mutable_action();
  action.set_action_id(job_.action_id);
  INAC_RETURN_IF_ERROR(AddParam(action, job_.fan_in, job.fan_in, where, "fan_in"));
  // bit<64> takes any uint64 value; Encode's sign check does not apply.
  {
    auto* param = action.add_params();
    param->set_param_id(job_.input_bitmap.id);
    INAC_ASSIGN_OR_RETURN(*param->mutable_value(),
                          EncodeField(job.input_bitmap, job_.input_bitmap.bitwidth));
  }
  INAC_RETURN_IF_ERROR(AddParam(action, job_.mcast_grp, job.multicast_group, where, "mcast_grp"));
  INAC_RETURN_IF_ERROR(AddParam(action, job_.agg_base, job.aggregator_base, where, "agg_base"));
  INAC_RETURN_IF_ERROR(AddParam(action, job_.agg_count, job.aggregator_count, where, "agg_count"));
  // int32 priority travels as its two's complement bit<32>.
  INAC_RETURN_IF_ERROR(
      AddParam(action, job_.priority, static_cast<uint32_t>(job.priority), where, "priority"));
  INAC_RETURN_IF_ERROR(
      AddParam(action, job_.upstream, job.upstream_address, where, "upstream_addr"));
  INAC_RETURN_IF_ERROR(AddParam(action, job_.self, job.self_address, where, "self_addr"));
  // int32 shift travels as its two's complement bit<32> (the switch adds it mod 2^32).
  INAC_RETURN_IF_ERROR(AddParam(action, job_.slot_shift,
                                static_cast<uint32_t>(job.upstream_slot_shift), where,
                                "slot_shift"));
  entry.set_metadata(absl::StrCat(job.job_id));
  return entity;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::LiveEntry(
    const core::JobAggregationIntent& job) const {
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_table_entry();
  entry.set_table_id(live_.table_id);
  const Where where{job.job_id, job.tag};
  INAC_RETURN_IF_ERROR(AddExact(entry, live_.occupant, job.tag, where, "aggregation tag"));
  entry.mutable_action()->mutable_action()->set_action_id(live_.action_id);
  entry.set_metadata(absl::StrCat(job.job_id));
  return entity;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::InputEntry(
    const core::AggregationInputIntent& input) const {
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_table_entry();
  entry.set_table_id(worker_.table_id);
  const Where where{input.job_id, input.tag};
  INAC_RETURN_IF_ERROR(AddExact(entry, worker_.job_id, input.tag, where, "aggregation tag"));
  INAC_RETURN_IF_ERROR(
      AddExact(entry, worker_.src_addr, input.source_address, where, "source address"));
  auto& action = *entry.mutable_action()->mutable_action();
  action.set_action_id(worker_.action_id);
  INAC_RETURN_IF_ERROR(AddParam(action, worker_.index, input.index, where, "input index"));
  entry.set_metadata(absl::StrCat(input.job_id));
  return entity;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::RouteEntry(const core::RouteIntent& route) const {
  const Where where{route.job_id, route.tag};
  if (route.egress_port != 0 && route.multicast_group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", route.job_id, " tag ", route.tag, ": route names both egress port ",
                     route.egress_port, " and multicast group ", route.multicast_group));
  }
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_table_entry();
  entry.set_table_id(route_.table_id);
  INAC_RETURN_IF_ERROR(AddExact(entry, route_.job_id, route.tag, where, "aggregation tag"));
  INAC_RETURN_IF_ERROR(
      AddExact(entry, route_.cls, static_cast<int64_t>(route.packet_class), where, "packet class"));
  INAC_RETURN_IF_ERROR(
      AddExact(entry, route_.src_addr, route.source_address, where, "source address"));
  INAC_RETURN_IF_ERROR(
      AddExact(entry, route_.dst_addr, route.destination_address, where, "destination address"));
  auto& action = *entry.mutable_action()->mutable_action();
  if (route.egress_port != 0) {
    action.set_action_id(route_.forward_id);
    INAC_RETURN_IF_ERROR(AddParam(action, route_.port, route.egress_port, where, "egress port"));
  } else if (route.multicast_group != 0) {
    action.set_action_id(route_.multicast_id);
    INAC_RETURN_IF_ERROR(
        AddParam(action, route_.grp, route.multicast_group, where, "multicast group"));
  } else {
    action.set_action_id(route_.drop_id);
  }
  entry.set_metadata(absl::StrCat(route.job_id));
  return entity;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::MulticastGroup(
    const core::MulticastGroupIntent& group) const {
  if (group.group_id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", group.job_id, ": multicast group id 0 is reserved"));
  }
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_packet_replication_engine_entry()->mutable_multicast_group_entry();
  entry.set_multicast_group_id(group.group_id);
  std::vector<uint32_t> ports = group.egress_ports;
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  for (uint32_t port : ports) {
    auto* replica = entry.add_replicas();
    SetReplicaPort(*replica, port);
    replica->set_instance(0);
  }
  return entity;
}

absl::StatusOr<p4::v1::Entity> IntentTranslator::HostEntry(const core::HostPortIntent& host) const {
  p4::v1::Entity entity;
  auto& entry = *entity.mutable_table_entry();
  entry.set_table_id(host_.table_id);
  const Where where{0, 0};
  INAC_RETURN_IF_ERROR(AddExact(entry, host_.port, host.port, where, "host port"));
  auto& action = *entry.mutable_action()->mutable_action();
  action.set_action_id(host_.action_id);
  {
    auto* param = action.add_params();
    param->set_param_id(host_.mac.id);
    INAC_ASSIGN_OR_RETURN(*param->mutable_value(), EncodeField(host.mac, host_.mac.bitwidth));
  }
  INAC_RETURN_IF_ERROR(AddParam(action, host_.addr, host.address, where, "host address"));
  entry.set_metadata("0");
  return entity;
}

absl::StatusOr<std::vector<p4::v1::Entity>> IntentTranslator::Translate(
    const core::SwitchIntent& intent) const {
  std::vector<p4::v1::Entity> out;
  out.reserve(intent.multicast_groups.size() + 2 * intent.jobs.size() + intent.inputs.size() +
              intent.routes.size() + intent.host_ports.size());
  for (const auto& group : intent.multicast_groups) {
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), MulticastGroup(group));
  }
  for (const auto& job : intent.jobs) {
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), JobEntry(job));
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), LiveEntry(job));
  }
  for (const auto& input : intent.inputs) {
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), InputEntry(input));
  }
  for (const auto& route : intent.routes) {
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), RouteEntry(route));
  }
  for (const auto& host : intent.host_ports) {
    INAC_ASSIGN_OR_RETURN(out.emplace_back(), HostEntry(host));
  }
  return out;
}

std::vector<p4::v1::Entity> IntentTranslator::OwnedStateFilters() const {
  std::vector<p4::v1::Entity> filters;
  for (uint32_t table :
       {job_.table_id, live_.table_id, worker_.table_id, route_.table_id, host_.table_id}) {
    filters.emplace_back().mutable_table_entry()->set_table_id(table);
  }
  filters.emplace_back()
      .mutable_packet_replication_engine_entry()
      ->mutable_multicast_group_entry()
      ->set_multicast_group_id(0);
  return filters;
}

bool IntentTranslator::IsOwned(const p4::v1::Entity& entity) const {
  if (entity.has_packet_replication_engine_entry()) {
    return entity.packet_replication_engine_entry().has_multicast_group_entry();
  }
  if (!entity.has_table_entry()) return false;
  const uint32_t table = entity.table_entry().table_id();
  return table == job_.table_id || table == live_.table_id || table == worker_.table_id ||
         table == route_.table_id || table == host_.table_id;
}

int IntentTranslator::DependencyRank(const p4::v1::Entity& entity) const {
  if (entity.has_packet_replication_engine_entry()) return 0;
  if (entity.has_table_entry()) {
    const uint32_t table = entity.table_entry().table_id();
    if (table == job_.table_id || table == live_.table_id || table == host_.table_id) return 1;
    if (table == worker_.table_id) return 2;
    if (table == route_.table_id) return 3;
  }
  return 4;
}

std::vector<p4::v1::Entity> IntentTranslator::CounterFilters(
    const core::SwitchIntent& intent) const {
  std::vector<p4::v1::Entity> filters;
  filters.reserve(intent.jobs.size() * 3);
  for (const auto& job : intent.jobs) {
    if (job.multicast_group == 0) continue;
    for (uint32_t counter : {counters_.aggregated, counters_.preempted, counters_.fallback}) {
      auto* entry = filters.emplace_back().mutable_counter_entry();
      entry->set_counter_id(counter);
      entry->mutable_index()->set_index(job.multicast_group);
    }
  }
  return filters;
}

p4::v1::Entity IntentTranslator::AllCountersFilter() {
  p4::v1::Entity filter;
  filter.mutable_counter_entry()->set_counter_id(0);
  return filter;
}

std::vector<AggregationCounters> IntentTranslator::DecodeCounters(
    const core::SwitchIntent& intent, const std::vector<p4::v1::Entity>& read) const {
  // (counter id, index) -> value
  absl::flat_hash_map<std::pair<uint32_t, int64_t>, CounterValue> cells;
  for (const auto& entity : read) {
    if (!entity.has_counter_entry()) continue;
    const auto& entry = entity.counter_entry();
    cells[{entry.counter_id(), entry.index().index()}] =
        CounterValue{entry.data().packet_count(), entry.data().byte_count()};
  }
  auto cell = [&](uint32_t counter, int64_t index) {
    auto it = cells.find(std::pair(counter, index));
    return it == cells.end() ? CounterValue{} : it->second;
  };
  std::vector<AggregationCounters> out;
  out.reserve(intent.jobs.size());
  for (const auto& job : intent.jobs) {
    if (job.multicast_group == 0) continue;
    const int64_t index = job.multicast_group;
    out.push_back(AggregationCounters{
        job.tag, job.job_id, job.multicast_group, cell(counters_.aggregated, index),
        cell(counters_.preempted, index), cell(counters_.fallback, index)});
  }
  return out;
}

}  // namespace inac::southbound
