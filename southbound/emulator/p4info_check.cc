#include "southbound/emulator/p4info_check.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace inac::southbound::emulator {
namespace {

// Largest counter array the emulator allocates (cells), to refuse absurd P4Infos.
constexpr int64_t kMaxCounterCells = int64_t{1} << 24;

absl::Status CheckPrefix(uint32_t id, uint32_t prefix, const std::string& name) {
  if (id == 0 || (id >> 24) != prefix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "P4Info: ", name, " has id ", id, " without the type prefix 0x", absl::Hex(prefix)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyP4Info(const p4::config::v1::P4Info& p4info) {
  using p4::config::v1::P4Ids;
  std::set<uint32_t> ids;
  auto add = [&](uint32_t id, uint32_t prefix, const std::string& name) -> absl::Status {
    if (absl::Status s = CheckPrefix(id, prefix, name); !s.ok()) return s;
    if (!ids.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("P4Info: id ", id, " used twice (", name, ")"));
    }
    return absl::OkStatus();
  };
  std::set<uint32_t> action_ids;
  for (const auto& a : p4info.actions()) {
    if (absl::Status s = add(a.preamble().id(), P4Ids::ACTION, a.preamble().name()); !s.ok()) {
      return s;
    }
    action_ids.insert(a.preamble().id());
    std::set<uint32_t> params;
    for (const auto& p : a.params()) {
      if (p.id() == 0 || !params.insert(p.id()).second || p.bitwidth() <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("P4Info: action ", a.preamble().name(), " has a bad param ", p.name()));
      }
    }
  }
  for (const auto& t : p4info.tables()) {
    if (absl::Status s = add(t.preamble().id(), P4Ids::TABLE, t.preamble().name()); !s.ok()) {
      return s;
    }
    std::set<uint32_t> fields;
    for (const auto& f : t.match_fields()) {
      if (f.id() == 0 || !fields.insert(f.id()).second || f.bitwidth() <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("P4Info: table ", t.preamble().name(),
                                                       " has a bad match field ", f.name()));
      }
    }
    for (const auto& ref : t.action_refs()) {
      if (!action_ids.count(ref.id())) {
        return absl::InvalidArgumentError(absl::StrCat("P4Info: table ", t.preamble().name(),
                                                       " refers to unknown action ", ref.id()));
      }
    }
    if (t.size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("P4Info: table ", t.preamble().name(), " has a negative size"));
    }
  }
  for (const auto& c : p4info.counters()) {
    if (absl::Status s = add(c.preamble().id(), P4Ids::COUNTER, c.preamble().name()); !s.ok()) {
      return s;
    }
    if (c.size() < 0 || c.size() > kMaxCounterCells) {
      return absl::ResourceExhaustedError(absl::StrCat("P4Info: counter ", c.preamble().name(),
                                                       " size ", c.size(), " not supported"));
    }
  }
  for (const auto& r : p4info.registers()) {
    if (absl::Status s = add(r.preamble().id(), P4Ids::REGISTER, r.preamble().name()); !s.ok()) {
      return s;
    }
  }
  for (const auto& p : p4info.action_profiles()) {
    if (absl::Status s = add(p.preamble().id(), P4Ids::ACTION_PROFILE, p.preamble().name());
        !s.ok()) {
      return s;
    }
  }
  for (const auto& c : p4info.direct_counters()) {
    if (absl::Status s = add(c.preamble().id(), P4Ids::DIRECT_COUNTER, c.preamble().name());
        !s.ok()) {
      return s;
    }
  }
  for (const auto& m : p4info.meters()) {
    if (absl::Status s = add(m.preamble().id(), P4Ids::METER, m.preamble().name()); !s.ok()) {
      return s;
    }
  }
  for (const auto& m : p4info.direct_meters()) {
    if (absl::Status s = add(m.preamble().id(), P4Ids::DIRECT_METER, m.preamble().name());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace inac::southbound::emulator
