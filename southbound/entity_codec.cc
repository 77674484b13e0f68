#include "southbound/entity_codec.h"

#include <algorithm>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "southbound/bytestrings.h"

namespace inac::southbound {
namespace {

std::string Deterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

void CanonicalizeMatch(p4::v1::FieldMatch& match) {
  switch (match.field_match_type_case()) {
    case p4::v1::FieldMatch::kExact:
      *match.mutable_exact()->mutable_value() = Canonicalize(match.exact().value());
      break;
    case p4::v1::FieldMatch::kTernary:
      *match.mutable_ternary()->mutable_value() = Canonicalize(match.ternary().value());
      *match.mutable_ternary()->mutable_mask() = Canonicalize(match.ternary().mask());
      break;
    case p4::v1::FieldMatch::kLpm:
      *match.mutable_lpm()->mutable_value() = Canonicalize(match.lpm().value());
      break;
    case p4::v1::FieldMatch::kRange:
      *match.mutable_range()->mutable_low() = Canonicalize(match.range().low());
      *match.mutable_range()->mutable_high() = Canonicalize(match.range().high());
      break;
    case p4::v1::FieldMatch::kOptional:
      *match.mutable_optional()->mutable_value() = Canonicalize(match.optional().value());
      break;
    default:
      break;
  }
}

void CanonicalizeAction(p4::v1::Action& action) {
  for (auto& param : *action.mutable_params()) {
    *param.mutable_value() = Canonicalize(param.value());
  }
  std::sort(action.mutable_params()->begin(), action.mutable_params()->end(),
            [](const auto& a, const auto& b) { return a.param_id() < b.param_id(); });
}

p4::v1::TableEntry CanonicalTableEntry(const p4::v1::TableEntry& in) {
  p4::v1::TableEntry out;
  out.set_table_id(in.table_id());
  *out.mutable_match() = in.match();
  for (auto& match : *out.mutable_match()) CanonicalizeMatch(match);
  std::sort(out.mutable_match()->begin(), out.mutable_match()->end(),
            [](const auto& a, const auto& b) { return a.field_id() < b.field_id(); });
  if (in.has_action()) {
    *out.mutable_action() = in.action();
    if (out.action().has_action()) CanonicalizeAction(*out.mutable_action()->mutable_action());
  }
  out.set_priority(in.priority());
  out.set_is_default_action(in.is_default_action());
  out.set_idle_timeout_ns(in.idle_timeout_ns());
  out.set_metadata(in.metadata());
  return out;
}

absl::StatusOr<p4::v1::MulticastGroupEntry> CanonicalGroup(const p4::v1::MulticastGroupEntry& in) {
  p4::v1::MulticastGroupEntry out;
  out.set_multicast_group_id(in.multicast_group_id());
  for (const auto& replica : in.replicas()) {
    uint64_t port = ReplicaPort(replica);
    if (replica.port_kind_case() == p4::v1::Replica::kPort) {
      auto decoded = DecodeUint(replica.port());
      if (!decoded.ok() || *decoded > 0xffffffffULL) {
        return absl::InvalidArgumentError(
            absl::StrCat("multicast group ", in.multicast_group_id(), ": replica port 0x",
                         HexBytes(replica.port()), " is wider than 32 bits"));
      }
      port = *decoded;
    }
    auto* r = out.add_replicas();
    SetReplicaPort(*r, static_cast<uint32_t>(port));
    r->set_instance(replica.instance());
  }
  std::sort(out.mutable_replicas()->begin(), out.mutable_replicas()->end(),
            [](const auto& a, const auto& b) {
              return std::tuple(ReplicaPort(a), a.instance()) <
                     std::tuple(ReplicaPort(b), b.instance());
            });
  return out;
}

std::string DescribeMatch(const p4::v1::FieldMatch& match) {
  switch (match.field_match_type_case()) {
    case p4::v1::FieldMatch::kExact:
      return absl::StrCat(match.field_id(), ":0x", HexBytes(match.exact().value()));
    case p4::v1::FieldMatch::kLpm:
      return absl::StrCat(match.field_id(), ":0x", HexBytes(match.lpm().value()), "/",
                          match.lpm().prefix_len());
    case p4::v1::FieldMatch::kTernary:
      return absl::StrCat(match.field_id(), ":0x", HexBytes(match.ternary().value()), "&&&0x",
                          HexBytes(match.ternary().mask()));
    default:
      return absl::StrCat(match.field_id(), ":?");
  }
}

}  // namespace

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
uint32_t ReplicaPort(const p4::v1::Replica& replica) {
  if (replica.port_kind_case() == p4::v1::Replica::kPort) {
    auto value = DecodeUint(replica.port());
    return value.ok() && *value <= 0xffffffffULL ? static_cast<uint32_t>(*value) : 0;
  }
  return replica.egress_port();
}
void SetReplicaPort(p4::v1::Replica& replica, uint32_t port) { replica.set_egress_port(port); }
#pragma GCC diagnostic pop

absl::StatusOr<p4::v1::Entity> CanonicalEntity(const p4::v1::Entity& entity) {
  p4::v1::Entity out;
  switch (entity.entity_case()) {
    case p4::v1::Entity::kTableEntry:
      *out.mutable_table_entry() = CanonicalTableEntry(entity.table_entry());
      return out;
    case p4::v1::Entity::kPacketReplicationEngineEntry: {
      const auto& pre = entity.packet_replication_engine_entry();
      if (!pre.has_multicast_group_entry()) break;
      auto group = CanonicalGroup(pre.multicast_group_entry());
      if (!group.ok()) return group.status();
      *out.mutable_packet_replication_engine_entry()->mutable_multicast_group_entry() =
          *std::move(group);
      return out;
    }
    case p4::v1::Entity::kCounterEntry: {
      auto* counter = out.mutable_counter_entry();
      counter->set_counter_id(entity.counter_entry().counter_id());
      if (entity.counter_entry().has_index()) {
        counter->mutable_index()->set_index(entity.counter_entry().index().index());
      }
      if (entity.counter_entry().has_data()) {
        *counter->mutable_data() = entity.counter_entry().data();
      }
      return out;
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot canonicalise entity: ", DescribeEntity(entity)));
}

std::string EntityKey(const p4::v1::Entity& canonical) {
  switch (canonical.entity_case()) {
    case p4::v1::Entity::kTableEntry: {
      const auto& entry = canonical.table_entry();
      p4::v1::TableEntry key;
      key.set_table_id(entry.table_id());
      *key.mutable_match() = entry.match();
      key.set_priority(entry.priority());
      key.set_is_default_action(entry.is_default_action());
      return absl::StrCat("t", Deterministic(key));
    }
    case p4::v1::Entity::kPacketReplicationEngineEntry:
      return absl::StrCat(
          "m",
          canonical.packet_replication_engine_entry().multicast_group_entry().multicast_group_id());
    case p4::v1::Entity::kCounterEntry:
      return absl::StrCat("c", canonical.counter_entry().counter_id(), ":",
                          canonical.counter_entry().index().index());
    default:
      return absl::StrCat("?", Deterministic(canonical));
  }
}

std::string EntityFingerprint(const p4::v1::Entity& canonical) { return Deterministic(canonical); }

std::string DescribeEntity(const p4::v1::Entity& entity) {
  switch (entity.entity_case()) {
    case p4::v1::Entity::kTableEntry: {
      const auto& entry = entity.table_entry();
      std::vector<std::string> matches;
      for (const auto& m : entry.match()) matches.push_back(DescribeMatch(m));
      std::string action;
      if (entry.action().has_action()) {
        std::vector<std::string> params;
        for (const auto& p : entry.action().action().params()) {
          params.push_back(absl::StrCat(p.param_id(), "=0x", HexBytes(p.value())));
        }
        action = absl::StrCat(" action=", entry.action().action().action_id(), "(",
                              absl::StrJoin(params, ","), ")");
      }
      return absl::StrCat("table_entry{table=", entry.table_id(), " match=[",
                          absl::StrJoin(matches, " "), "]", action,
                          entry.metadata().empty() ? "" : " metadata=", entry.metadata(), "}");
    }
    case p4::v1::Entity::kPacketReplicationEngineEntry: {
      const auto& pre = entity.packet_replication_engine_entry();
      if (pre.has_multicast_group_entry()) {
        std::vector<std::string> replicas;
        for (const auto& r : pre.multicast_group_entry().replicas()) {
          replicas.push_back(absl::StrCat(ReplicaPort(r), "/", r.instance()));
        }
        return absl::StrCat("multicast_group{id=", pre.multicast_group_entry().multicast_group_id(),
                            " replicas=[", absl::StrJoin(replicas, " "), "]}");
      }
      return "packet_replication_engine_entry{...}";
    }
    case p4::v1::Entity::kCounterEntry:
      return absl::StrCat("counter_entry{counter=", entity.counter_entry().counter_id(),
                          " index=", entity.counter_entry().index().index(), "}");
    default:
      return absl::StrCat("entity{case=", static_cast<int>(entity.entity_case()), "}");
  }
}

}  // namespace inac::southbound
