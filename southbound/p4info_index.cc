#include "southbound/p4info_index.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace inac::southbound {
namespace {

using p4::config::v1::P4Info;

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// Registers `preamble` under its name and alias; InvalidArgument on a clash.
absl::Status AddNames(const p4::config::v1::Preamble& preamble, absl::string_view kind,
                      absl::flat_hash_map<std::string, uint32_t>& names) {
  if (preamble.id() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " '", preamble.name(), "' has id 0"));
  }
  for (const std::string& name : {preamble.name(), preamble.alias()}) {
    if (name.empty()) continue;
    auto [it, inserted] = names.emplace(name, preamble.id());
    if (!inserted && it->second != preamble.id()) {
      return absl::InvalidArgumentError(absl::StrCat("P4Info: ", kind, " name '", name,
                                                     "' is used by ids ", it->second, " and ",
                                                     preamble.id()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Lookup(const absl::flat_hash_map<std::string, uint32_t>& names,
                                absl::string_view kind, absl::string_view name) {
  auto it = names.find(name);
  if (it == names.end()) {
    return absl::NotFoundError(absl::StrCat("P4Info has no ", kind, " named '", name, "'"));
  }
  return it->second;
}

}  // namespace

absl::StatusOr<P4InfoIndex> P4InfoIndex::FromText(absl::string_view text) {
  P4Info p4info;
  if (!google::protobuf::TextFormat::ParseFromString(std::string(text), &p4info)) {
    return absl::InvalidArgumentError("P4Info: text format does not parse");
  }
  return FromProto(std::move(p4info));
}

absl::StatusOr<P4InfoIndex> P4InfoIndex::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read P4Info file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto index = FromText(buffer.str());
  if (!index.ok()) {
    return absl::Status(index.status().code(), absl::StrCat(path, ": ", index.status().message()));
  }
  return index;
}

absl::StatusOr<P4InfoIndex> P4InfoIndex::FromProto(P4Info p4info) {
  auto state = std::make_shared<State>();
  state->p4info = std::make_unique<P4Info>(std::move(p4info));
  const P4Info& info = *state->p4info;
  absl::flat_hash_map<uint32_t, std::string> all_ids;
  auto claim_id = [&](const p4::config::v1::Preamble& preamble) -> absl::Status {
    auto [it, inserted] = all_ids.emplace(preamble.id(), preamble.name());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("P4Info: id ", preamble.id(), " is used by '",
                                                     it->second, "' and '", preamble.name(), "'"));
    }
    return absl::OkStatus();
  };
  for (const auto& table : info.tables()) {
    if (auto s = claim_id(table.preamble()); !s.ok()) return s;
    if (auto s = AddNames(table.preamble(), "table", state->tables); !s.ok()) return s;
    state->table_by_id[table.preamble().id()] = &table;
  }
  for (const auto& action : info.actions()) {
    if (auto s = claim_id(action.preamble()); !s.ok()) return s;
    if (auto s = AddNames(action.preamble(), "action", state->actions); !s.ok()) return s;
    state->action_by_id[action.preamble().id()] = &action;
  }
  for (const auto& counter : info.counters()) {
    if (auto s = claim_id(counter.preamble()); !s.ok()) return s;
    if (auto s = AddNames(counter.preamble(), "counter", state->counters); !s.ok()) return s;
    state->counter_by_id[counter.preamble().id()] = &counter;
  }
  state->fingerprint = Fnv1a64(DeterministicBytes(info));
  return P4InfoIndex(std::move(state));
}

absl::StatusOr<P4InfoIndex> P4InfoIndex::EmbeddedIna() {
  const std::string_view text = EmbeddedInaP4InfoText();
  return FromText(absl::string_view(text.data(), text.size()));
}

absl::StatusOr<uint32_t> P4InfoIndex::TableId(absl::string_view name) const {
  return Lookup(state_->tables, "table", name);
}
absl::StatusOr<uint32_t> P4InfoIndex::ActionId(absl::string_view name) const {
  return Lookup(state_->actions, "action", name);
}
absl::StatusOr<uint32_t> P4InfoIndex::CounterId(absl::string_view name) const {
  return Lookup(state_->counters, "counter", name);
}

absl::StatusOr<FieldInfo> P4InfoIndex::MatchField(uint32_t table_id,
                                                  absl::string_view field) const {
  const auto* table = FindTable(table_id);
  if (table == nullptr) return absl::NotFoundError(absl::StrCat("P4Info has no table ", table_id));
  for (const auto& match : table->match_fields()) {
    if (match.name() == field) return FieldInfo{match.id(), match.bitwidth()};
  }
  return absl::NotFoundError(
      absl::StrCat("table '", table->preamble().name(), "' has no match field '", field, "'"));
}

absl::StatusOr<FieldInfo> P4InfoIndex::ActionParam(uint32_t action_id,
                                                   absl::string_view param) const {
  const auto* action = FindAction(action_id);
  if (action == nullptr) {
    return absl::NotFoundError(absl::StrCat("P4Info has no action ", action_id));
  }
  for (const auto& p : action->params()) {
    if (p.name() == param) return FieldInfo{p.id(), p.bitwidth()};
  }
  return absl::NotFoundError(
      absl::StrCat("action '", action->preamble().name(), "' has no parameter '", param, "'"));
}

const p4::config::v1::Table* P4InfoIndex::FindTable(uint32_t id) const {
  auto it = state_->table_by_id.find(id);
  return it == state_->table_by_id.end() ? nullptr : it->second;
}
const p4::config::v1::Action* P4InfoIndex::FindAction(uint32_t id) const {
  auto it = state_->action_by_id.find(id);
  return it == state_->action_by_id.end() ? nullptr : it->second;
}
const p4::config::v1::Counter* P4InfoIndex::FindCounter(uint32_t id) const {
  auto it = state_->counter_by_id.find(id);
  return it == state_->counter_by_id.end() ? nullptr : it->second;
}

}  // namespace inac::southbound
