#include "agent/job_config.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// A required member of an object.
absl::StatusOr<const Json*> Field(const Json& object, const std::string& path, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return Bad(absl::StrCat(path, key), "required");
  return &*it;
}

absl::Status ReadString(const Json& object, const std::string& path, const char* key,
                        std::string* out, bool allow_empty = false) {
  auto f = Field(object, path, key);
  if (!f.ok()) return f.status();
  if (!(*f)->is_string()) return Bad(absl::StrCat(path, key), "must be a string");
  *out = (*f)->get<std::string>();
  if (!allow_empty && out->empty()) return Bad(absl::StrCat(path, key), "must not be empty");
  return absl::OkStatus();
}

absl::Status ReadU32(const Json& object, const std::string& path, const char* key, uint32_t* out,
                     bool required = true) {
  auto it = object.find(key);
  if (it == object.end()) {
    return required ? Bad(absl::StrCat(path, key), "required") : absl::OkStatus();
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > std::numeric_limits<uint32_t>::max()) {
    return Bad(absl::StrCat(path, key), "must be an integer in [0, 2^32)");
  }
  *out = static_cast<uint32_t>(it->get<int64_t>());
  return absl::OkStatus();
}

absl::Status ReadAddress(const Json& object, const std::string& path, const char* key,
                         uint32_t* out) {
  std::string text;
  if (absl::Status s = ReadString(object, path, key, &text); !s.ok()) return s;
  std::optional<uint32_t> a = core::ParseIpv4(text);
  if (!a.has_value() || *a == 0) return Bad(absl::StrCat(path, key), "not an IPv4 address");
  *out = *a;
  return absl::OkStatus();
}

absl::Status ReadNumber(const Json& object, const std::string& path, const char* key, double* out) {
  auto f = Field(object, path, key);
  if (!f.ok()) return f.status();
  if (!(*f)->is_number() || !std::isfinite((*f)->get<double>())) {
    return Bad(absl::StrCat(path, key), "must be a finite number");
  }
  *out = (*f)->get<double>();
  return absl::OkStatus();
}

absl::StatusOr<JobConfig::Member> ParseMember(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "must be an object");
  JobConfig::Member m;
  if (auto s = ReadString(j, path + ".", "worker", &m.worker); !s.ok()) return s;
  if (auto s = ReadAddress(j, path + ".", "address", &m.address); !s.ok()) return s;
  if (auto s = ReadString(j, path + ".", "aggregation_node", &m.aggregation_node); !s.ok()) {
    return s;
  }
  return m;
}

absl::StatusOr<JobConfig::Aggregator> ParseAggregator(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "must be an object");
  JobConfig::Aggregator a;
  const std::string p = path + ".";
  if (auto s = ReadString(j, p, "switch", &a.switch_id); !s.ok()) return s;
  if (auto s = ReadAddress(j, p, "address", &a.address); !s.ok()) return s;
  auto inputs = Field(j, p, "inputs");
  if (!inputs.ok()) return inputs.status();
  if (!(*inputs)->is_array()) return Bad(p + "inputs", "must be an array of node ids");
  if ((*inputs)->size() > 64) return Bad(p + "inputs", "at most 64 inputs (the bitmap's width)");
  for (size_t i = 0; i < (*inputs)->size(); ++i) {
    const Json& in = (**inputs)[i];
    if (!in.is_string()) return Bad(absl::StrCat(p, "inputs[", i, "]"), "must be a string");
    a.inputs.push_back(in.get<std::string>());
  }
  if (auto s = ReadU32(j, p, "aggregator_base", &a.aggregator_base); !s.ok()) return s;
  if (auto s = ReadU32(j, p, "aggregator_count", &a.aggregator_count); !s.ok()) return s;
  if (auto s = ReadU32(j, p, "slot_offset", &a.slot_offset); !s.ok()) return s;
  if (auto s = ReadU32(j, p, "window", &a.window); !s.ok()) return s;
  return a;
}

absl::StatusOr<JobConfig::Tag> ParseTag(const Json& j, const std::string& path) {
  if (!j.is_object()) return Bad(path, "must be an object");
  JobConfig::Tag t;
  const std::string p = path + ".";
  if (auto s = ReadU32(j, p, "tag", &t.tag); !s.ok()) return s;
  if (auto s = ReadString(j, p, "ps", &t.ps); !s.ok()) return s;
  if (auto s = ReadAddress(j, p, "ps_address", &t.ps_address); !s.ok()) return s;
  if (auto s = ReadNumber(j, p, "share", &t.share); !s.ok()) return s;
  if (!(t.share > 0 && t.share <= 1)) return Bad(p + "share", "must be in (0, 1]");
  auto range = Field(j, p, "range");
  if (!range.ok()) return range.status();
  if (!(*range)->is_array() || (*range)->size() != 2 || !(**range)[0].is_number() ||
      !(**range)[1].is_number()) {
    return Bad(p + "range", "must be [begin, end], two numbers");
  }
  t.begin = (**range)[0].get<double>();
  t.end = (**range)[1].get<double>();
  if (!(t.begin >= 0 && t.begin < t.end && t.end <= 1)) {
    return Bad(p + "range", "must satisfy 0 <= begin < end <= 1");
  }
  if (auto s = ReadU32(j, p, "multicast_group", &t.multicast_group, /*required=*/false); !s.ok()) {
    return s;
  }
  auto members = Field(j, p, "members");
  if (!members.ok()) return members.status();
  if (!(*members)->is_array()) return Bad(p + "members", "must be an array");
  std::set<std::string> names;
  std::set<uint32_t> addresses;
  for (size_t i = 0; i < (*members)->size(); ++i) {
    const std::string mp = absl::StrCat(p, "members[", i, "]");
    auto m = ParseMember((**members)[i], mp);
    if (!m.ok()) return m.status();
    if (!names.insert(m->worker).second) return Bad(mp + ".worker", "duplicate worker");
    if (!addresses.insert(m->address).second) return Bad(mp + ".address", "duplicate address");
    t.members.push_back(std::move(*m));
  }
  if (t.members.size() > 255) return Bad(p + "members", "at most 255 (the header's count)");
  auto aggs = j.find("aggregators");
  if (aggs != j.end()) {
    if (!aggs->is_array()) return Bad(p + "aggregators", "must be an array");
    std::set<std::string> switches;
    for (size_t i = 0; i < aggs->size(); ++i) {
      const std::string ap = absl::StrCat(p, "aggregators[", i, "]");
      auto a = ParseAggregator((*aggs)[i], ap);
      if (!a.ok()) return a.status();
      if (!switches.insert(a->switch_id).second) return Bad(ap + ".switch", "duplicate switch");
      t.aggregators.push_back(std::move(*a));
    }
  }
  return t;
}

// `ring` and `ring_roles` of a ring job (docs/rina.md); absent for PS jobs.
absl::Status ParseRing(const Json& j, JobConfig* c) {
  if (auto ring = j.find("ring"); ring != j.end()) {
    if (!ring->is_array()) return Bad("ring", "must be an array of host ids");
    for (size_t i = 0; i < ring->size(); ++i) {
      if (!(*ring)[i].is_string()) return Bad(absl::StrCat("ring[", i, "]"), "must be a string");
      c->ring.push_back((*ring)[i].get<std::string>());
    }
  }
  auto roles = j.find("ring_roles");
  if (roles == j.end()) return absl::OkStatus();
  if (!roles->is_array()) return Bad("ring_roles", "must be an array");
  for (size_t i = 0; i < roles->size(); ++i) {
    const std::string p = absl::StrCat("ring_roles[", i, "].");
    const Json& r = (*roles)[i];
    if (!r.is_object()) return Bad(absl::StrCat("ring_roles[", i, "]"), "must be an object");
    JobConfig::RingRole role;
    if (auto s = ReadString(r, p, "worker", &role.worker); !s.ok()) return s;
    if (auto s = ReadString(r, p, "role", &role.role); !s.ok()) return s;
    if (role.role != "agent" && role.role != "member" && role.role != "rack-worker") {
      return Bad(p + "role", "must be agent, member or rack-worker");
    }
    for (const char* side : {"prev", "next"}) {
      auto n = r.find(side);
      if (n == r.end()) continue;
      if (!n->is_object()) return Bad(p + side, "must be an object with id and address");
      const std::string np = absl::StrCat(p, side, ".");
      std::string* id = std::string(side) == "prev" ? &role.prev : &role.next;
      uint32_t* address = std::string(side) == "prev" ? &role.prev_address : &role.next_address;
      if (auto s = ReadString(*n, np, "id", id); !s.ok()) return s;
      if (auto s = ReadAddress(*n, np, "address", address); !s.ok()) return s;
    }
    if (r.contains("agent")) {
      if (auto s = ReadString(r, p, "agent", &role.agent); !s.ok()) return s;
      if (auto s = ReadString(r, p, "tor", &role.tor); !s.ok()) return s;
      if (auto s = ReadU32(r, p, "rack_tag", &role.rack_tag); !s.ok()) return s;
    }
    c->ring_roles.push_back(std::move(role));
  }
  return absl::OkStatus();
}

}  // namespace

const JobConfig::Aggregator* JobConfig::Tag::FindAggregator(const std::string& switch_id) const {
  for (const Aggregator& a : aggregators) {
    if (a.switch_id == switch_id) return &a;
  }
  return nullptr;
}

int JobConfig::Tag::MemberIndex(const std::string& worker) const {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].worker == worker) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<JobConfig> JobConfigFromJson(const Json& j) {
  if (!j.is_object()) return Bad("config", "must be a JSON object");
  JobConfig c;
  auto id = j.find("job_id");
  if (id == j.end() || !id->is_number_integer() || id->get<int64_t>() <= 0) {
    return Bad("job_id", "required, a positive integer");
  }
  c.job_id = id->get<int64_t>();
  if (auto v = j.find("plan_version"); v != j.end()) {
    if (!v->is_number_integer()) return Bad("plan_version", "must be an integer");
    c.plan_version = v->get<int64_t>();
  }
  if (auto v = j.find("batch_size"); v != j.end()) {
    if (!v->is_number_integer()) return Bad("batch_size", "must be an integer");
    c.batch_size = v->get<int64_t>();
  }
  if (auto v = j.find("gradient_bytes"); v != j.end()) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0) {
      return Bad("gradient_bytes", "must be a non-negative integer");
    }
    c.gradient_bytes = v->get<int64_t>();
  }
  auto tags = j.find("tags");
  if (tags == j.end()) return Bad("tags", "required");
  if (!tags->is_array()) return Bad("tags", "must be an array");
  std::set<uint32_t> seen;
  for (size_t i = 0; i < tags->size(); ++i) {
    const std::string path = absl::StrCat("tags[", i, "]");
    auto t = ParseTag((*tags)[i], path);
    if (!t.ok()) return t.status();
    if (!seen.insert(t->tag).second) return Bad(path + ".tag", "duplicate tag");
    c.tags.push_back(std::move(*t));
  }
  if (auto v = j.find("generation"); v != j.end()) {
    if (!v->is_number_unsigned() || v->get<uint64_t>() > 0xffffffffu) {
      return Bad("generation", "must be a 32-bit unsigned integer");
    }
    c.generation = v->get<uint32_t>();
  }
  if (auto s = ParseRing(j, &c); !s.ok()) return s;
  return c;
}

absl::StatusOr<JobConfig> ParseJobConfig(std::string_view json_text) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("config: not valid JSON");
  try {
    return JobConfigFromJson(j);
  } catch (const Json::exception& e) {  // defensive: the checks above should prevent any
    return absl::InvalidArgumentError(absl::StrCat("config: ", e.what()));
  }
}

}  // namespace inac::agent
