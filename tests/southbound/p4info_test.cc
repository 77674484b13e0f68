// api/p4/ina.p4info.txtpb against the P4Runtime id rules and against api/p4/ina.p4 itself: the
// P4Info is hand-maintained (p4c is not available in Debian), so these checks are what keeps the
// two in step: every @id of the program names the same object in the P4Info, match fields and
// action parameters agree in order, name and width.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "p4/config/v1/p4info.pb.h"

namespace {

using p4::config::v1::P4Info;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

P4Info LoadP4Info() {
  P4Info info;
  std::string text = ReadFile(std::string(INAC_P4_DIR) + "/ina.p4info.txtpb");
  EXPECT_FALSE(text.empty());
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &info));
  return info;
}

uint32_t Prefix(uint32_t id) { return id >> 24; }

TEST(P4InfoTest, ParsesAndHasTheInaObjects) {
  P4Info info = LoadP4Info();
  EXPECT_EQ(info.pkg_info().arch(), "v1model");
  std::set<std::string> tables;
  for (const auto& t : info.tables()) tables.insert(t.preamble().name());
  EXPECT_EQ(tables, (std::set<std::string>{"IngressImpl.ina_job", "IngressImpl.ina_live",
                                           "IngressImpl.ina_worker", "IngressImpl.ina_route",
                                           "IngressImpl.ipv4_forward", "EgressImpl.ina_host"}));
  std::set<std::string> counters;
  for (const auto& c : info.counters()) counters.insert(c.preamble().name());
  EXPECT_EQ(counters,
            (std::set<std::string>{"IngressImpl.job_aggregated", "IngressImpl.job_preempted",
                                   "IngressImpl.job_fallback"}));
  for (const auto& c : info.counters()) {
    EXPECT_EQ(c.size(), 65536);
    EXPECT_EQ(c.spec().unit(), p4::config::v1::CounterSpec::PACKETS);
  }
}

TEST(P4InfoTest, IdsHaveTheirTypePrefixAndAreUnique) {
  P4Info info = LoadP4Info();
  std::set<uint32_t> ids;
  auto add = [&](uint32_t id, uint32_t prefix, const std::string& name) {
    EXPECT_EQ(Prefix(id), prefix) << name;
    EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id << " " << name;
  };
  for (const auto& t : info.tables()) add(t.preamble().id(), 0x02, t.preamble().name());
  for (const auto& a : info.actions()) add(a.preamble().id(), 0x01, a.preamble().name());
  for (const auto& c : info.counters()) add(c.preamble().id(), 0x12, c.preamble().name());
  for (const auto& r : info.registers()) add(r.preamble().id(), 0x16, r.preamble().name());
  EXPECT_EQ(info.action_profiles_size(), 0);
  EXPECT_EQ(info.direct_counters_size(), 0);
  EXPECT_EQ(info.meters_size(), 0);
}

TEST(P4InfoTest, NamesAliasesAndNumbering) {
  P4Info info = LoadP4Info();
  std::map<uint32_t, const p4::config::v1::Action*> actions;
  std::set<std::string> aliases;
  auto check_preamble = [&](const p4::config::v1::Preamble& p) {
    std::string name = p.name();
    std::string last = name.substr(name.rfind('.') + 1);
    EXPECT_EQ(p.alias(), last) << name;
    EXPECT_TRUE(aliases.insert(std::to_string(Prefix(p.id())) + p.alias()).second) << name;
    if (name != "NoAction") {
      EXPECT_TRUE(name.rfind("IngressImpl.", 0) == 0 || name.rfind("EgressImpl.", 0) == 0) << name;
    }
  };
  for (const auto& a : info.actions()) {
    check_preamble(a.preamble());
    actions[a.preamble().id()] = &a;
    for (int i = 0; i < a.params_size(); ++i) {
      EXPECT_EQ(a.params(i).id(), static_cast<uint32_t>(i + 1)) << a.preamble().name();
      EXPECT_GT(a.params(i).bitwidth(), 0);
    }
  }
  for (const auto& t : info.tables()) {
    check_preamble(t.preamble());
    EXPECT_GT(t.size(), 0) << t.preamble().name();
    EXPECT_GT(t.match_fields_size(), 0);
    for (int i = 0; i < t.match_fields_size(); ++i) {
      EXPECT_EQ(t.match_fields(i).id(), static_cast<uint32_t>(i + 1)) << t.preamble().name();
      const std::map<std::string, int> widths = {
          {"hdr.ina.job_id", 32}, {"hdr.ipv4.src_addr", 32}, {"hdr.ipv4.dst_addr", 32},
          {"meta.pkt_class", 8},  {"meta.occupant", 32},     {"standard_metadata.egress_port", 9}};
      auto w = widths.find(t.match_fields(i).name());
      ASSERT_NE(w, widths.end()) << t.match_fields(i).name();
      EXPECT_EQ(t.match_fields(i).bitwidth(), w->second) << t.match_fields(i).name();
    }
    ASSERT_GT(t.action_refs_size(), 0);
    for (const auto& ref : t.action_refs()) {
      EXPECT_TRUE(actions.count(ref.id())) << t.preamble().name() << " refers to " << ref.id();
    }
  }
  for (const auto& c : info.counters()) check_preamble(c.preamble());
  for (const auto& r : info.registers()) {
    check_preamble(r.preamble());
    EXPECT_TRUE(r.type_spec().bitstring().has_bit()) << r.preamble().name();
  }
}

TEST(P4InfoTest, SetJobMatchesTheControlContract) {
  P4Info info = LoadP4Info();
  const p4::config::v1::Action* set_job = nullptr;
  for (const auto& a : info.actions()) {
    if (a.preamble().name() == "IngressImpl.set_job") set_job = &a;
  }
  ASSERT_NE(set_job, nullptr);
  std::vector<std::pair<std::string, int>> want = {
      {"fan_in", 32},        {"input_bitmap", 64}, {"mcast_grp", 16},
      {"agg_base", 32},      {"agg_count", 32},    {"priority", 32},
      {"upstream_addr", 32}, {"self_addr", 32},    {"slot_shift", 32}};
  ASSERT_EQ(set_job->params_size(), static_cast<int>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(set_job->params(i).name(), want[i].first);
    EXPECT_EQ(set_job->params(i).bitwidth(), want[i].second);
  }
}

// Pulls the @id-annotated objects out of the P4 source: id -> (kind, local name), and for tables
// their key list, for actions their parameter list.
struct P4Object {
  std::string kind;
  std::string name;
  std::vector<std::pair<std::string, int>> items;  // (name, bitwidth) or (key expr, 0)
  std::vector<std::string> match_kinds;
};

std::map<uint32_t, P4Object> ScanProgram(const std::string& src) {
  std::map<uint32_t, P4Object> out;
  std::regex id_re(R"(@id\((0x[0-9A-Fa-f]+)\)\s*)");
  for (auto it = std::sregex_iterator(src.begin(), src.end(), id_re); it != std::sregex_iterator();
       ++it) {
    uint32_t id = static_cast<uint32_t>(std::stoul((*it)[1].str(), nullptr, 16));
    std::string rest = src.substr(it->position() + it->length(), 2000);
    std::smatch m;
    P4Object obj;
    if (std::regex_search(rest, m, std::regex(R"(^table\s+(\w+)\s*\{\s*key\s*=\s*\{([^}]*)\})"))) {
      obj.kind = "table";
      obj.name = m[1];
      std::string keys = m[2];
      std::regex key_re(R"(([\w.]+)\s*:\s*(\w+)\s*;)");
      for (auto k = std::sregex_iterator(keys.begin(), keys.end(), key_re);
           k != std::sregex_iterator(); ++k) {
        obj.items.push_back({(*k)[1].str(), 0});
        obj.match_kinds.push_back((*k)[2].str());
      }
    } else if (std::regex_search(rest, m, std::regex(R"(^action\s+(\w+)\s*\(([^)]*)\))"))) {
      obj.kind = "action";
      obj.name = m[1];
      std::string params = m[2];
      std::regex p_re(R"(bit<(\d+)>\s+(\w+))");
      for (auto p = std::sregex_iterator(params.begin(), params.end(), p_re);
           p != std::sregex_iterator(); ++p) {
        obj.items.push_back({(*p)[2].str(), std::stoi((*p)[1].str())});
      }
    } else if (std::regex_search(rest, m, std::regex(R"(^counter\((\d+),[^)]*\)\s+(\w+);)"))) {
      obj.kind = "counter";
      obj.name = m[2];
      obj.items.push_back({"size", std::stoi(m[1].str())});
    } else if (std::regex_search(rest, m,
                                 std::regex(R"(^register<bit<(\d+)>>\((\w+)\)\s+(\w+);)"))) {
      obj.kind = "register";
      obj.name = m[3];
      obj.items.push_back({"width", std::stoi(m[1].str())});
    } else {
      obj.kind = "unknown";
      obj.name = rest.substr(0, 40);
    }
    EXPECT_TRUE(out.emplace(id, obj).second) << "id used twice in ina.p4: " << id;
  }
  return out;
}

TEST(P4InfoTest, AgreesWithTheProgram) {
  P4Info info = LoadP4Info();
  std::string src = ReadFile(std::string(INAC_P4_DIR) + "/ina.p4");
  ASSERT_FALSE(src.empty());
  std::map<uint32_t, P4Object> program = ScanProgram(src);
  size_t matched = 0;
  for (const auto& t : info.tables()) {
    auto it = program.find(t.preamble().id());
    ASSERT_NE(it, program.end()) << t.preamble().name();
    EXPECT_EQ(it->second.kind, "table");
    EXPECT_TRUE("IngressImpl." + it->second.name == t.preamble().name() ||
                "EgressImpl." + it->second.name == t.preamble().name())
        << t.preamble().name();
    ASSERT_EQ(static_cast<int>(it->second.items.size()), t.match_fields_size());
    for (int i = 0; i < t.match_fields_size(); ++i) {
      EXPECT_EQ(it->second.items[i].first, t.match_fields(i).name());
      std::string kind = it->second.match_kinds[i];
      auto want =
          kind == "exact" ? p4::config::v1::MatchField::EXACT : p4::config::v1::MatchField::LPM;
      EXPECT_EQ(t.match_fields(i).match_type(), want) << t.preamble().name();
    }
    EXPECT_NE(src.find("size = " + std::to_string(t.size()) + ";"), std::string::npos);
    ++matched;
  }
  for (const auto& a : info.actions()) {
    if (a.preamble().name() == "NoAction") continue;  // from core.p4, id chosen by p4c
    auto it = program.find(a.preamble().id());
    ASSERT_NE(it, program.end()) << a.preamble().name();
    EXPECT_EQ(it->second.kind, "action");
    EXPECT_TRUE("IngressImpl." + it->second.name == a.preamble().name() ||
                "EgressImpl." + it->second.name == a.preamble().name())
        << a.preamble().name();
    // Helper actions called from apply (not in any table) have their arguments bound at the
    // call: p4c lists them without parameters.
    bool in_table = false;
    for (const auto& t : info.tables()) {
      for (const auto& ref : t.action_refs()) in_table |= ref.id() == a.preamble().id();
    }
    if (!in_table) {
      ++matched;
      continue;
    }
    ASSERT_EQ(static_cast<int>(it->second.items.size()), a.params_size());
    for (int i = 0; i < a.params_size(); ++i) {
      EXPECT_EQ(it->second.items[i].first, a.params(i).name());
      EXPECT_EQ(it->second.items[i].second, a.params(i).bitwidth());
    }
    ++matched;
  }
  for (const auto& c : info.counters()) {
    auto it = program.find(c.preamble().id());
    ASSERT_NE(it, program.end()) << c.preamble().name();
    EXPECT_EQ(it->second.kind, "counter");
    EXPECT_EQ("IngressImpl." + it->second.name, c.preamble().name());
    EXPECT_EQ(it->second.items[0].second, c.size());
    ++matched;
  }
  std::smatch slots;
  ASSERT_TRUE(std::regex_search(src, slots, std::regex(R"(#define AGG_SLOTS (\d+))")));
  for (const auto& r : info.registers()) {
    EXPECT_EQ(r.size(), std::stoi(slots[1].str())) << r.preamble().name();
    auto it = program.find(r.preamble().id());
    ASSERT_NE(it, program.end()) << r.preamble().name();
    EXPECT_EQ(it->second.kind, "register");
    EXPECT_EQ("IngressImpl." + it->second.name, r.preamble().name());
    EXPECT_EQ(it->second.items[0].second, r.type_spec().bitstring().bit().bitwidth());
    ++matched;
  }
  // Nothing in the program carries an @id that the P4Info lacks.
  EXPECT_EQ(matched, program.size());
}

}  // namespace
