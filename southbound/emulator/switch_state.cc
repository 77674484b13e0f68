#include "southbound/emulator/switch_state.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace inac::southbound::emulator {
namespace {

using p4::config::v1::MatchField;
using p4::v1::Update;

// v1model: standard_metadata.mcast_grp is bit<16>, egress ports are bit<9>.
constexpr uint32_t kMaxMulticastGroupId = 0xFFFF;
constexpr int kPortBitwidth = 9;

// The emulator keeps its own byte-string rules (P4Runtime spec v1.3, section 8.4) rather than
// sharing the client's, so that a bug on one side cannot hide the same bug on the other.

// Strips leading zero bytes, keeping one byte. Precondition: !bytes.empty().
std::string StripZeros(const std::string& bytes) {
  size_t i = 0;
  while (i + 1 < bytes.size() && bytes[i] == '\0') ++i;
  return bytes.substr(i);
}

// Canonical form of a value of `bitwidth` bits; InvalidArgument when empty or too wide.
absl::Status Canonical(const std::string& bytes, int bitwidth, const std::string& what,
                       std::string* out) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty byte string"));
  std::string c = StripZeros(bytes);
  size_t max_bytes = static_cast<size_t>((bitwidth + 7) / 8);
  bool fits = c.size() < max_bytes;
  if (c.size() == max_bytes) {
    int top_bits = bitwidth % 8 == 0 ? 8 : bitwidth % 8;
    fits = (static_cast<unsigned char>(c[0]) >> top_bits) == 0;
  }
  if (!fits) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": value of ", bytes.size(), " bytes does not fit ", bitwidth, " bits"));
  }
  *out = std::move(c);
  return absl::OkStatus();
}

// True when every bit of the canonical big-endian `value` below bit `low_bits` is zero.
bool LowBitsZero(const std::string& value, int low_bits) {
  for (size_t i = value.size(); i-- > 0 && low_bits > 0; low_bits -= 8) {
    unsigned char b = static_cast<unsigned char>(value[i]);
    unsigned char mask = low_bits >= 8 ? 0xFF : static_cast<unsigned char>((1u << low_bits) - 1);
    if ((b & mask) != 0) return false;
  }
  return true;
}

// Compares canonical byte strings as unsigned integers.
int CompareCanonical(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

bool IsZero(const std::string& canonical) { return canonical == std::string(1, '\0'); }

// Left-pads `s` with zero bytes to `n` bytes.
std::string Pad(const std::string& s, size_t n) {
  return s.size() >= n ? s : std::string(n - s.size(), '\0') + s;
}

void AppendKeyPart(std::string* key, uint32_t id, char kind, const std::string& a,
                   const std::string& b = "") {
  absl::StrAppend(key, id, std::string(1, kind), a.size(), ":", a, "/", b.size(), ":", b, ";");
}

}  // namespace

SwitchState::SwitchState(const p4::config::v1::P4Info& p4info) : p4info_(p4info) {
  for (const auto& a : p4info_.actions()) actions_[a.preamble().id()] = &a;
  for (const auto& t : p4info_.tables()) {
    Table& table = tables_[t.preamble().id()];
    table.info = &t;
    for (const auto& f : t.match_fields()) {
      table.fields[f.id()] = &f;
      if (f.match_type() == MatchField::TERNARY || f.match_type() == MatchField::RANGE ||
          f.match_type() == MatchField::OPTIONAL) {
        table.needs_priority = true;
      }
    }
  }
  for (const auto& c : p4info_.counters()) {
    Counter& counter = counters_[c.preamble().id()];
    counter.info = &c;
    counter.size = c.size();
  }
}

const p4::v1::CounterData& SwitchState::Counter::Cell(int64_t index) const {
  auto it = cells.find(index);
  return it == cells.end() ? p4::v1::CounterData::default_instance() : it->second;
}

int64_t SwitchState::num_table_entries() const {
  int64_t n = 0;
  for (const auto& [id, t] : tables_) n += static_cast<int64_t>(t.entries.size());
  return n;
}

absl::Status SwitchState::Apply(const Update& update) {
  if (update.type() == Update::UNSPECIFIED || !Update::Type_IsValid(update.type())) {
    return absl::InvalidArgumentError("update type unspecified");
  }
  const p4::v1::Entity& e = update.entity();
  switch (e.entity_case()) {
    case p4::v1::Entity::kTableEntry:
      return ApplyTableEntry(update.type(), e.table_entry());
    case p4::v1::Entity::kCounterEntry:
      return ApplyCounterEntry(update.type(), e.counter_entry());
    case p4::v1::Entity::kPacketReplicationEngineEntry: {
      const auto& pre = e.packet_replication_engine_entry();
      if (pre.has_multicast_group_entry()) {
        return ApplyMulticastGroup(update.type(), pre.multicast_group_entry());
      }
      if (pre.has_clone_session_entry()) {
        return absl::UnimplementedError("clone sessions are not supported by the emulator");
      }
      return absl::InvalidArgumentError("packet replication engine entry without a type");
    }
    case p4::v1::Entity::ENTITY_NOT_SET:
      return absl::InvalidArgumentError("update without an entity");
    case p4::v1::Entity::kRegisterEntry:
      return absl::UnimplementedError("registers are data-plane state; writes are not supported");
    default:
      return absl::UnimplementedError(
          absl::StrCat("entity kind ", static_cast<int>(e.entity_case()), " is not supported"));
  }
}

absl::Status SwitchState::CanonicalAction(const Table& table, const p4::v1::Action& action,
                                          bool default_entry, p4::v1::Action* canonical) const {
  const p4::config::v1::ActionRef* ref = nullptr;
  for (const auto& r : table.info->action_refs()) {
    if (r.id() == action.action_id()) ref = &r;
  }
  auto it = actions_.find(action.action_id());
  if (ref == nullptr || it == actions_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("action ", action.action_id(),
                                                   " is not an action of table ",
                                                   table.info->preamble().name()));
  }
  if (!default_entry && ref->scope() == p4::config::v1::ActionRef::DEFAULT_ONLY) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", it->second->preamble().name(), " is default-only"));
  }
  if (default_entry && ref->scope() == p4::config::v1::ActionRef::TABLE_ONLY) {
    return absl::InvalidArgumentError(
        absl::StrCat("action ", it->second->preamble().name(), " is table-only"));
  }
  const p4::config::v1::Action& info = *it->second;
  std::map<uint32_t, std::string> values;
  for (const auto& p : action.params()) {
    const p4::config::v1::Action::Param* pinfo = nullptr;
    for (const auto& q : info.params()) {
      if (q.id() == p.param_id()) pinfo = &q;
    }
    if (pinfo == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown param id ", p.param_id(), " of action ", info.preamble().name()));
    }
    if (values.count(p.param_id())) {
      return absl::InvalidArgumentError(absl::StrCat("param ", pinfo->name(), " given twice"));
    }
    std::string c;
    if (absl::Status s =
            Canonical(p.value(), pinfo->bitwidth(), absl::StrCat("param ", pinfo->name()), &c);
        !s.ok()) {
      return s;
    }
    values[p.param_id()] = std::move(c);
  }
  if (values.size() != static_cast<size_t>(info.params_size())) {
    return absl::InvalidArgumentError(absl::StrCat("action ", info.preamble().name(), " needs ",
                                                   info.params_size(), " params, got ",
                                                   values.size()));
  }
  canonical->Clear();
  canonical->set_action_id(action.action_id());
  for (auto& [id, v] : values) {
    auto* p = canonical->add_params();
    p->set_param_id(id);
    p->set_value(std::move(v));
  }
  return absl::OkStatus();
}

absl::Status SwitchState::CanonicalTableEntry(const Table& table, const p4::v1::TableEntry& entry,
                                              bool need_action, p4::v1::TableEntry* canonical,
                                              std::string* key) const {
  canonical->Clear();
  canonical->set_table_id(entry.table_id());
  std::map<uint32_t, p4::v1::FieldMatch> matches;
  for (const auto& m : entry.match()) {
    auto fit = table.fields.find(m.field_id());
    if (fit == table.fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown match field id ", m.field_id(),
                                                     " of table ", table.info->preamble().name()));
    }
    if (matches.count(m.field_id())) {
      return absl::InvalidArgumentError(
          absl::StrCat("match field ", fit->second->name(), " given twice"));
    }
    const MatchField& f = *fit->second;
    int bw = f.bitwidth();
    std::string what = absl::StrCat("match field ", f.name());
    p4::v1::FieldMatch c;
    c.set_field_id(m.field_id());
    std::string v;
    std::string w;
    absl::Status s;
    switch (f.match_type()) {
      case MatchField::EXACT:
        if (!m.has_exact()) return absl::InvalidArgumentError(what + ": expected an exact match");
        s = Canonical(m.exact().value(), bw, what, &v);
        if (!s.ok()) return s;
        c.mutable_exact()->set_value(v);
        break;
      case MatchField::LPM:
        if (!m.has_lpm()) return absl::InvalidArgumentError(what + ": expected an LPM match");
        if (m.lpm().prefix_len() <= 0 || m.lpm().prefix_len() > bw) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": prefix length ", m.lpm().prefix_len(), " (a /0 match must be omitted)"));
        }
        s = Canonical(m.lpm().value(), bw, what, &v);
        if (!s.ok()) return s;
        if (!LowBitsZero(v, bw - m.lpm().prefix_len())) {
          return absl::InvalidArgumentError(what + ": bits beyond the prefix length are set");
        }
        c.mutable_lpm()->set_value(v);
        c.mutable_lpm()->set_prefix_len(m.lpm().prefix_len());
        w = std::to_string(m.lpm().prefix_len());
        break;
      case MatchField::TERNARY: {
        if (!m.has_ternary()) return absl::InvalidArgumentError(what + ": expected ternary");
        s = Canonical(m.ternary().value(), bw, what, &v);
        if (s.ok()) s = Canonical(m.ternary().mask(), bw, what + " mask", &w);
        if (!s.ok()) return s;
        if (IsZero(w)) return absl::InvalidArgumentError(what + ": a zero mask must be omitted");
        std::string pv = Pad(v, w.size() > v.size() ? w.size() : v.size());
        std::string pw = Pad(w, pv.size());
        for (size_t i = 0; i < pv.size(); ++i) {
          if ((static_cast<unsigned char>(pv[i]) & ~static_cast<unsigned char>(pw[i]) & 0xFF) !=
              0) {
            return absl::InvalidArgumentError(what + ": value has bits outside the mask");
          }
        }
        c.mutable_ternary()->set_value(v);
        c.mutable_ternary()->set_mask(w);
        break;
      }
      case MatchField::RANGE:
        if (!m.has_range()) return absl::InvalidArgumentError(what + ": expected a range");
        s = Canonical(m.range().low(), bw, what + " low", &v);
        if (s.ok()) s = Canonical(m.range().high(), bw, what + " high", &w);
        if (!s.ok()) return s;
        if (CompareCanonical(v, w) > 0) return absl::InvalidArgumentError(what + ": low > high");
        c.mutable_range()->set_low(v);
        c.mutable_range()->set_high(w);
        break;
      case MatchField::OPTIONAL:
        if (!m.has_optional()) return absl::InvalidArgumentError(what + ": expected optional");
        s = Canonical(m.optional().value(), bw, what, &v);
        if (!s.ok()) return s;
        c.mutable_optional()->set_value(v);
        break;
      default:
        return absl::UnimplementedError(what + ": match kind not supported");
    }
    matches[m.field_id()] = std::move(c);
  }
  for (const auto& [id, f] : table.fields) {
    if (f->match_type() == MatchField::EXACT && !matches.count(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("exact match field ", f->name(), " is missing"));
    }
  }
  if (table.needs_priority ? entry.priority() <= 0 : entry.priority() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority ", entry.priority(), " is not valid for table ", table.info->preamble().name()));
  }
  key->clear();
  for (auto& [id, m] : matches) {
    switch (m.field_match_type_case()) {
      case p4::v1::FieldMatch::kExact:
        AppendKeyPart(key, id, 'e', m.exact().value());
        break;
      case p4::v1::FieldMatch::kLpm:
        AppendKeyPart(key, id, 'l', m.lpm().value(), std::to_string(m.lpm().prefix_len()));
        break;
      case p4::v1::FieldMatch::kTernary:
        AppendKeyPart(key, id, 't', m.ternary().value(), m.ternary().mask());
        break;
      case p4::v1::FieldMatch::kRange:
        AppendKeyPart(key, id, 'r', m.range().low(), m.range().high());
        break;
      default:
        AppendKeyPart(key, id, 'o', m.optional().value());
        break;
    }
    *canonical->add_match() = std::move(m);
  }
  absl::StrAppend(key, "p", entry.priority());
  canonical->set_priority(entry.priority());

  if (entry.has_meter_config() || entry.has_counter_data() || entry.has_meter_counter_data()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", table.info->preamble().name(), " has no direct counter or meter"));
  }
  if (entry.idle_timeout_ns() != 0 &&
      table.info->idle_timeout_behavior() == p4::config::v1::Table::NO_TIMEOUT) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", table.info->preamble().name(), " does not support idle timeout"));
  }
  if (need_action) {
    if (!entry.has_action() || !entry.action().has_action()) {
      return absl::InvalidArgumentError(entry.has_action()
                                            ? "action profiles are not supported by this table"
                                            : "table entry without an action");
    }
    if (absl::Status s = CanonicalAction(table, entry.action().action(), false,
                                         canonical->mutable_action()->mutable_action());
        !s.ok()) {
      return s;
    }
  }
  canonical->set_metadata(entry.metadata());
  // A server must still honour the deprecated fields clients may send.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  canonical->set_controller_metadata(entry.controller_metadata());
#pragma GCC diagnostic pop
  canonical->set_idle_timeout_ns(entry.idle_timeout_ns());
  return absl::OkStatus();
}

absl::Status SwitchState::ApplyTableEntry(Update::Type type, const p4::v1::TableEntry& entry) {
  auto it = tables_.find(entry.table_id());
  if (it == tables_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown table id ", entry.table_id()));
  }
  Table& table = it->second;
  if (table.info->is_const_table()) {
    return absl::PermissionDeniedError(
        absl::StrCat("table ", table.info->preamble().name(), " is const"));
  }
  if (entry.is_default_action()) {
    if (type != Update::MODIFY) {
      return absl::InvalidArgumentError("the default entry can only be modified");
    }
    if (entry.match_size() != 0) {
      return absl::InvalidArgumentError("the default entry has no match");
    }
    if (table.info->const_default_action_id() != 0) {
      return absl::PermissionDeniedError("the default action of this table is const");
    }
    if (!entry.has_action() || !entry.action().has_action()) {
      return absl::InvalidArgumentError("default entry without an action");
    }
    p4::v1::TableEntry c;
    c.set_table_id(entry.table_id());
    c.set_is_default_action(true);
    if (absl::Status s = CanonicalAction(table, entry.action().action(), true,
                                         c.mutable_action()->mutable_action());
        !s.ok()) {
      return s;
    }
    table.default_entry = std::move(c);
    table.has_default = true;
    return absl::OkStatus();
  }
  p4::v1::TableEntry canonical;
  std::string key;
  if (absl::Status s = CanonicalTableEntry(table, entry, type != Update::DELETE, &canonical, &key);
      !s.ok()) {
    return s;
  }
  auto existing = table.entries.find(key);
  switch (type) {
    case Update::INSERT:
      if (existing != table.entries.end()) {
        return absl::AlreadyExistsError(
            absl::StrCat("entry already in table ", table.info->preamble().name()));
      }
      if (table.info->size() > 0 &&
          static_cast<int64_t>(table.entries.size()) >= table.info->size()) {
        return absl::ResourceExhaustedError(absl::StrCat("table ", table.info->preamble().name(),
                                                         " is full (", table.info->size(), ")"));
      }
      table.entries.emplace(std::move(key), std::move(canonical));
      return absl::OkStatus();
    case Update::MODIFY:
      if (existing == table.entries.end()) {
        return absl::NotFoundError(
            absl::StrCat("no such entry in table ", table.info->preamble().name()));
      }
      existing->second = std::move(canonical);
      return absl::OkStatus();
    default:  // DELETE
      if (existing == table.entries.end()) {
        return absl::NotFoundError(
            absl::StrCat("no such entry in table ", table.info->preamble().name()));
      }
      table.entries.erase(existing);
      return absl::OkStatus();
  }
}

absl::Status SwitchState::ApplyCounterEntry(Update::Type type, const p4::v1::CounterEntry& entry) {
  if (type != Update::MODIFY) {
    return absl::InvalidArgumentError("counter entries can only be modified");
  }
  auto it = counters_.find(entry.counter_id());
  if (it == counters_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown counter id ", entry.counter_id()));
  }
  if (!entry.has_index()) return absl::InvalidArgumentError("counter write without an index");
  int64_t index = entry.index().index();
  if (index < 0 || index >= it->second.size) {
    return absl::InvalidArgumentError(absl::StrCat("counter index ", index, " out of range"));
  }
  it->second.cells[index] = entry.data();
  return absl::OkStatus();
}

absl::Status SwitchState::ApplyMulticastGroup(Update::Type type,
                                              const p4::v1::MulticastGroupEntry& group) {
  uint32_t id = group.multicast_group_id();
  if (id == 0 || id > kMaxMulticastGroupId) {
    return absl::InvalidArgumentError(absl::StrCat("multicast group id ", id, " out of range"));
  }
  auto existing = groups_.find(id);
  if (type == Update::DELETE) {
    if (existing == groups_.end()) {
      return absl::NotFoundError(absl::StrCat("no multicast group ", id));
    }
    groups_.erase(existing);
    return absl::OkStatus();
  }
  p4::v1::MulticastGroupEntry canonical;
  canonical.set_multicast_group_id(id);
  std::set<std::pair<std::string, uint32_t>> seen;
  for (const auto& r : group.replicas()) {
    p4::v1::Replica* c = canonical.add_replicas();
    c->set_instance(r.instance());
    std::string port;
    if (r.port_kind_case() == p4::v1::Replica::kPort) {
      if (absl::Status s = Canonical(r.port(), kPortBitwidth, "replica port", &port); !s.ok()) {
        return s;
      }
      c->set_port(port);
    } else if (r.port_kind_case() == p4::v1::Replica::kEgressPort) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      uint32_t egress_port = r.egress_port();
      c->set_egress_port(egress_port);
#pragma GCC diagnostic pop
      if (egress_port >= (1u << kPortBitwidth)) {
        return absl::InvalidArgumentError(
            absl::StrCat("replica egress port ", egress_port, " out of range"));
      }
      port = absl::StrCat("#", egress_port);
    } else {
      return absl::InvalidArgumentError("replica without a port");
    }
    if (!seen.insert({port, r.instance()}).second) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate replica in multicast group ", id));
    }
  }
  if (type == Update::INSERT) {
    if (existing != groups_.end()) {
      return absl::AlreadyExistsError(absl::StrCat("multicast group ", id, " exists"));
    }
    groups_.emplace(id, std::move(canonical));
  } else {
    if (existing == groups_.end()) {
      return absl::NotFoundError(absl::StrCat("no multicast group ", id));
    }
    existing->second = std::move(canonical);
  }
  return absl::OkStatus();
}

void SwitchState::ReadTable(const Table& table, const p4::v1::TableEntry& query,
                            std::vector<p4::v1::Entity>* out) const {
  if (query.is_default_action()) {
    if (table.has_default) *out->emplace_back().mutable_table_entry() = table.default_entry;
    return;
  }
  for (const auto& [key, entry] : table.entries) {
    *out->emplace_back().mutable_table_entry() = entry;
  }
}

absl::Status SwitchState::Read(const p4::v1::Entity& query,
                               std::vector<p4::v1::Entity>* out) const {
  switch (query.entity_case()) {
    case p4::v1::Entity::kTableEntry: {
      const p4::v1::TableEntry& q = query.table_entry();
      if (q.table_id() == 0) {
        if (q.match_size() != 0) {
          return absl::InvalidArgumentError("a wildcard table read cannot have a match");
        }
        for (const auto& [id, table] : tables_) ReadTable(table, q, out);
        return absl::OkStatus();
      }
      auto it = tables_.find(q.table_id());
      if (it == tables_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown table id ", q.table_id()));
      }
      if (q.match_size() == 0) {
        ReadTable(it->second, q, out);
        return absl::OkStatus();
      }
      p4::v1::TableEntry canonical;
      std::string key;
      if (absl::Status s = CanonicalTableEntry(it->second, q, false, &canonical, &key); !s.ok()) {
        return s;
      }
      auto e = it->second.entries.find(key);
      if (e != it->second.entries.end()) *out->emplace_back().mutable_table_entry() = e->second;
      return absl::OkStatus();
    }
    case p4::v1::Entity::kCounterEntry: {
      const p4::v1::CounterEntry& q = query.counter_entry();
      auto emit = [&](uint32_t id, const Counter& c, int64_t index) {
        auto* e = out->emplace_back().mutable_counter_entry();
        e->set_counter_id(id);
        e->mutable_index()->set_index(index);
        *e->mutable_data() = c.Cell(index);
      };
      if (q.counter_id() == 0) {
        if (q.has_index()) {
          return absl::InvalidArgumentError("a wildcard counter read cannot have an index");
        }
        for (const auto& [id, c] : counters_) {
          for (int64_t i = 0; i < c.size; ++i) emit(id, c, i);
        }
        return absl::OkStatus();
      }
      auto it = counters_.find(q.counter_id());
      if (it == counters_.end()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown counter id ", q.counter_id()));
      }
      if (!q.has_index()) {
        for (int64_t i = 0; i < it->second.size; ++i) emit(q.counter_id(), it->second, i);
        return absl::OkStatus();
      }
      int64_t index = q.index().index();
      if (index < 0 || index >= it->second.size) {
        return absl::InvalidArgumentError(absl::StrCat("counter index ", index, " out of range"));
      }
      emit(q.counter_id(), it->second, index);
      return absl::OkStatus();
    }
    case p4::v1::Entity::kPacketReplicationEngineEntry: {
      const auto& pre = query.packet_replication_engine_entry();
      if (pre.has_clone_session_entry()) {
        return absl::UnimplementedError("clone sessions are not supported by the emulator");
      }
      if (!pre.has_multicast_group_entry()) {
        return absl::InvalidArgumentError("packet replication engine entry without a type");
      }
      uint32_t id = pre.multicast_group_entry().multicast_group_id();
      for (const auto& [gid, g] : groups_) {
        if (id == 0 || id == gid) {
          *out->emplace_back()
               .mutable_packet_replication_engine_entry()
               ->mutable_multicast_group_entry() = g;
        }
      }
      return absl::OkStatus();
    }
    case p4::v1::Entity::ENTITY_NOT_SET:
      return absl::InvalidArgumentError("read of an empty entity");
    case p4::v1::Entity::kRegisterEntry:
      return absl::UnimplementedError("registers are data-plane state; reads are not supported");
    default:
      return absl::UnimplementedError(
          absl::StrCat("entity kind ", static_cast<int>(query.entity_case()), " is not supported"));
  }
}

}  // namespace inac::southbound::emulator
