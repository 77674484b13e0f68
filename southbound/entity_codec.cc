#include "southbound/entity_codec.h"

#include <algorithm>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
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

// Strips leading zero bytes in place, keeping at least one byte ("" becomes "\x00").
void CanonicalizeBytes(std::string* bytes) {
  if (bytes->empty()) {
    bytes->push_back('\0');
    return;
  }
  size_t first = 0;
  while (first + 1 < bytes->size() && (*bytes)[first] == '\0') ++first;
  if (first > 0) bytes->erase(0, first);
}

void CanonicalizeMatch(p4::v1::FieldMatch& match) {
  switch (match.field_match_type_case()) {
    case p4::v1::FieldMatch::kExact:
      CanonicalizeBytes(match.mutable_exact()->mutable_value());
      break;
    case p4::v1::FieldMatch::kTernary:
      CanonicalizeBytes(match.mutable_ternary()->mutable_value());
      CanonicalizeBytes(match.mutable_ternary()->mutable_mask());
      break;
    case p4::v1::FieldMatch::kLpm:
      CanonicalizeBytes(match.mutable_lpm()->mutable_value());
      break;
    case p4::v1::FieldMatch::kRange:
      CanonicalizeBytes(match.mutable_range()->mutable_low());
      CanonicalizeBytes(match.mutable_range()->mutable_high());
      break;
    case p4::v1::FieldMatch::kOptional:
      CanonicalizeBytes(match.mutable_optional()->mutable_value());
      break;
    default:
      break;
  }
}

template <typename Repeated, typename Less>
void SortIfNeeded(Repeated* items, Less less) {
  if (!std::is_sorted(items->begin(), items->end(), less)) {
    std::sort(items->begin(), items->end(), less);
  }
}

void CanonicalizeTableEntry(p4::v1::TableEntry& entry) {
  for (auto& match : *entry.mutable_match()) CanonicalizeMatch(match);
  SortIfNeeded(entry.mutable_match(),
               [](const auto& a, const auto& b) { return a.field_id() < b.field_id(); });
  if (entry.has_action() && entry.action().has_action()) {
    auto* action = entry.mutable_action()->mutable_action();
    for (auto& param : *action->mutable_params()) CanonicalizeBytes(param.mutable_value());
    SortIfNeeded(action->mutable_params(),
                 [](const auto& a, const auto& b) { return a.param_id() < b.param_id(); });
  }
  // Read-only or unused by INAC.
  entry.clear_meter_config();
  entry.clear_counter_data();
  entry.clear_meter_counter_data();
  entry.clear_time_since_last_hit();
  entry.clear_is_const();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  entry.clear_controller_metadata();
#pragma GCC diagnostic pop
}

absl::Status CanonicalizeGroup(p4::v1::MulticastGroupEntry& group) {
  for (auto& replica : *group.mutable_replicas()) {
    if (replica.port_kind_case() != p4::v1::Replica::kPort) continue;
    auto decoded = DecodeUint(replica.port());
    if (!decoded.ok() || *decoded > 0xffffffffULL) {
      return absl::InvalidArgumentError(absl::StrCat("multicast group ", group.multicast_group_id(),
                                                     ": replica port 0x", HexBytes(replica.port()),
                                                     " is wider than 32 bits"));
    }
    SetReplicaPort(replica, static_cast<uint32_t>(*decoded));
  }
  SortIfNeeded(group.mutable_replicas(), [](const auto& a, const auto& b) {
    return std::tuple(ReplicaPort(a), a.instance()) < std::tuple(ReplicaPort(b), b.instance());
  });
  return absl::OkStatus();
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

absl::Status CanonicalizeInPlace(p4::v1::Entity& entity) {
  switch (entity.entity_case()) {
    case p4::v1::Entity::kTableEntry:
      CanonicalizeTableEntry(*entity.mutable_table_entry());
      return absl::OkStatus();
    case p4::v1::Entity::kPacketReplicationEngineEntry:
      if (!entity.packet_replication_engine_entry().has_multicast_group_entry()) break;
      return CanonicalizeGroup(
          *entity.mutable_packet_replication_engine_entry()->mutable_multicast_group_entry());
    case p4::v1::Entity::kCounterEntry:
      return absl::OkStatus();
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot canonicalise entity: ", DescribeEntity(entity)));
}

absl::StatusOr<p4::v1::Entity> CanonicalEntity(const p4::v1::Entity& entity) {
  p4::v1::Entity out = entity;
  if (absl::Status status = CanonicalizeInPlace(out); !status.ok()) return status;
  return out;
}

namespace {

// Appends a length-prefixed byte string (so that concatenated keys cannot collide).
void AppendField(std::string& out, absl::string_view bytes) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(bytes.data(), bytes.size());
}

void AppendNumber(std::string& out, uint64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

std::string EntityKey(const p4::v1::Entity& canonical) {
  std::string key;
  switch (canonical.entity_case()) {
    case p4::v1::Entity::kTableEntry: {
      const auto& entry = canonical.table_entry();
      key.reserve(16 + entry.match_size() * 16);
      key.push_back('t');
      AppendNumber(key, entry.table_id());
      AppendNumber(key, static_cast<uint32_t>(entry.priority()));
      key.push_back(entry.is_default_action() ? 'd' : 'm');
      for (const auto& match : entry.match()) {
        AppendNumber(key, match.field_id());
        key.push_back(static_cast<char>(match.field_match_type_case()));
        switch (match.field_match_type_case()) {
          case p4::v1::FieldMatch::kExact:
            AppendField(key, match.exact().value());
            break;
          case p4::v1::FieldMatch::kLpm:
            AppendField(key, match.lpm().value());
            AppendNumber(key, static_cast<uint32_t>(match.lpm().prefix_len()));
            break;
          case p4::v1::FieldMatch::kTernary:
            AppendField(key, match.ternary().value());
            AppendField(key, match.ternary().mask());
            break;
          case p4::v1::FieldMatch::kRange:
            AppendField(key, match.range().low());
            AppendField(key, match.range().high());
            break;
          case p4::v1::FieldMatch::kOptional:
            AppendField(key, match.optional().value());
            break;
          default:
            AppendField(key, match.SerializeAsString());
            break;
        }
      }
      return key;
    }
    case p4::v1::Entity::kPacketReplicationEngineEntry:
      key.push_back('m');
      AppendNumber(
          key,
          canonical.packet_replication_engine_entry().multicast_group_entry().multicast_group_id());
      return key;
    case p4::v1::Entity::kCounterEntry:
      key.push_back('c');
      AppendNumber(key, canonical.counter_entry().counter_id());
      AppendNumber(key, static_cast<uint64_t>(canonical.counter_entry().index().index()));
      return key;
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
