// Parsing the JSON of GET /jobs/{id}/config (northbound/http_api.cc ConfigJson): good and bad
// input.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/job_config.h"

namespace inac::agent {
namespace {

using Json = nlohmann::json;

// Shaped like ConfigJson's output, other fields included (they are ignored).
Json GoodConfig() {
  return Json::parse(R"({
    "job_id": 7, "state": "running", "plan_version": 3, "algorithm": "grid", "batch_size": 32,
    "priority": 1, "rate_gbps": 10.5, "iteration_ms": 4.2,
    "parameter_servers": [{"ps": "h4", "ps_address": "10.0.0.4", "share": 1, "tag": 448,
                           "multicast_group": 5}],
    "workers": [], "aggregator_regions": [],
    "tags": [
      {"tag": 448, "ps": "h4", "ps_address": "10.0.0.4", "share": 1, "range": [0, 1],
       "multicast_group": 5,
       "members": [
         {"worker": "h1", "address": "10.0.0.1", "aggregation_node": "s1"},
         {"worker": "h2", "address": "10.0.0.2", "aggregation_node": "s1"},
         {"worker": "h3", "address": "10.0.0.3", "aggregation_node": "s2"}],
       "aggregators": [
         {"switch": "s1", "address": "10.255.0.1", "inputs": ["h1", "h2", "s2"],
          "aggregator_base": 0, "aggregator_count": 100, "slot_offset": 10, "window": 20},
         {"switch": "s2", "address": "10.255.0.2", "inputs": ["h3"],
          "aggregator_base": 50, "aggregator_count": 8, "slot_offset": 0, "window": 8}]}
    ]})");
}

TEST(JobConfigTest, ParsesTheControllersJson) {
  auto c = ParseJobConfig(GoodConfig().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->job_id, 7);
  EXPECT_EQ(c->plan_version, 3);
  EXPECT_EQ(c->batch_size, 32);
  ASSERT_EQ(c->tags.size(), 1u);
  const JobConfig::Tag& t = c->tags[0];
  EXPECT_EQ(t.tag, 448u);
  EXPECT_EQ(t.ps, "h4");
  EXPECT_EQ(t.ps_address, 0x0A000004u);
  EXPECT_EQ(t.share, 1);
  EXPECT_EQ(t.begin, 0);
  EXPECT_EQ(t.end, 1);
  EXPECT_EQ(t.multicast_group, 5u);
  ASSERT_EQ(t.members.size(), 3u);
  EXPECT_EQ(t.members[2].worker, "h3");
  EXPECT_EQ(t.members[2].address, 0x0A000003u);
  EXPECT_EQ(t.members[2].aggregation_node, "s2");
  ASSERT_EQ(t.aggregators.size(), 2u);
  const JobConfig::Aggregator& s1 = t.aggregators[0];
  EXPECT_EQ(s1.switch_id, "s1");
  EXPECT_EQ(s1.address, 0x0AFF0001u);
  EXPECT_EQ(s1.inputs, (std::vector<std::string>{"h1", "h2", "s2"}));
  EXPECT_EQ(s1.aggregator_base, 0u);
  EXPECT_EQ(s1.aggregator_count, 100u);
  EXPECT_EQ(s1.slot_offset, 10u);
  EXPECT_EQ(s1.window, 20u);
  EXPECT_EQ(t.FindAggregator("s2"), &t.aggregators[1]);
  EXPECT_EQ(t.FindAggregator("h1"), nullptr);
  EXPECT_EQ(t.MemberIndex("h2"), 1);
  EXPECT_EQ(t.MemberIndex("s1"), -1);
}

TEST(JobConfigTest, NoTagsYetIsValid) {
  auto c = ParseJobConfig(R"({"job_id": 1, "tags": []})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->tags.empty());
}

struct BadCase {
  const char* name;
  std::function<void(Json&)> mutate;
  const char* message;  // a substring of the error
};

TEST(JobConfigTest, RefusesMalformedInput) {
  const std::vector<BadCase> cases = {
      {"not an object", [](Json& j) { j = Json::array(); }, "config: must be a JSON object"},
      {"no job id", [](Json& j) { j.erase("job_id"); }, "job_id: required"},
      {"job id zero", [](Json& j) { j["job_id"] = 0; }, "job_id"},
      {"no tags", [](Json& j) { j.erase("tags"); }, "tags: required"},
      {"tags object", [](Json& j) { j["tags"] = Json::object(); }, "tags: must be an array"},
      {"tag string", [](Json& j) { j["tags"][0]["tag"] = "448"; },
       "tags[0].tag: must be an integer"},
      {"tag negative", [](Json& j) { j["tags"][0]["tag"] = -1; }, "tags[0].tag"},
      {"tag huge", [](Json& j) { j["tags"][0]["tag"] = 1ll << 33; }, "tags[0].tag"},
      {"duplicate tag", [](Json& j) { j["tags"].push_back(j["tags"][0]); },
       "tags[1].tag: duplicate"},
      {"no ps", [](Json& j) { j["tags"][0].erase("ps"); }, "tags[0].ps: required"},
      {"empty ps", [](Json& j) { j["tags"][0]["ps"] = ""; }, "tags[0].ps: must not be empty"},
      {"bad ps address", [](Json& j) { j["tags"][0]["ps_address"] = "10.0.0"; },
       "tags[0].ps_address: not an IPv4 address"},
      {"zero ps address", [](Json& j) { j["tags"][0]["ps_address"] = "0.0.0.0"; },
       "tags[0].ps_address: not an IPv4 address"},
      {"share 0", [](Json& j) { j["tags"][0]["share"] = 0; }, "tags[0].share: must be in (0, 1]"},
      {"share 2", [](Json& j) { j["tags"][0]["share"] = 2; }, "tags[0].share"},
      {"share string", [](Json& j) { j["tags"][0]["share"] = "1"; }, "tags[0].share: must be a"},
      {"range 1 number", [](Json& j) { j["tags"][0]["range"] = {0}; }, "tags[0].range: must be"},
      {"range reversed",
       [](Json& j) {
         j["tags"][0]["range"] = {0.5, 0.25};
       },
       "tags[0].range: must satisfy"},
      {"range beyond 1",
       [](Json& j) {
         j["tags"][0]["range"] = {0, 1.5};
       },
       "tags[0].range"},
      {"members missing", [](Json& j) { j["tags"][0].erase("members"); },
       "tags[0].members: required"},
      {"member not object", [](Json& j) { j["tags"][0]["members"][1] = "h2"; },
       "tags[0].members[1]: must be an object"},
      {"member without worker", [](Json& j) { j["tags"][0]["members"][0].erase("worker"); },
       "tags[0].members[0].worker: required"},
      {"member bad address", [](Json& j) { j["tags"][0]["members"][2]["address"] = "h3"; },
       "tags[0].members[2].address: not an IPv4 address"},
      {"duplicate member", [](Json& j) { j["tags"][0]["members"][1]["worker"] = "h1"; },
       "tags[0].members[1].worker: duplicate"},
      {"duplicate address", [](Json& j) { j["tags"][0]["members"][1]["address"] = "10.0.0.1"; },
       "tags[0].members[1].address: duplicate"},
      {"aggregators object", [](Json& j) { j["tags"][0]["aggregators"] = Json::object(); },
       "tags[0].aggregators: must be an array"},
      {"aggregator inputs string", [](Json& j) { j["tags"][0]["aggregators"][0]["inputs"] = "h1"; },
       "tags[0].aggregators[0].inputs: must be an array"},
      {"aggregator input number", [](Json& j) { j["tags"][0]["aggregators"][0]["inputs"][1] = 2; },
       "tags[0].aggregators[0].inputs[1]: must be a string"},
      {"aggregator 65 inputs",
       [](Json& j) {
         Json in = Json::array();
         for (int i = 0; i < 65; ++i) in.push_back(std::string("h").append(std::to_string(i)));
         j["tags"][0]["aggregators"][0]["inputs"] = in;
       },
       "at most 64 inputs"},
      {"aggregator window negative", [](Json& j) { j["tags"][0]["aggregators"][1]["window"] = -3; },
       "tags[0].aggregators[1].window"},
      {"aggregator without count",
       [](Json& j) { j["tags"][0]["aggregators"][1].erase("aggregator_count"); },
       "tags[0].aggregators[1].aggregator_count: required"},
      {"duplicate switch", [](Json& j) { j["tags"][0]["aggregators"][1]["switch"] = "s1"; },
       "tags[0].aggregators[1].switch: duplicate"},
  };
  for (const BadCase& bc : cases) {
    Json j = GoodConfig();
    bc.mutate(j);
    auto c = ParseJobConfig(j.dump());
    ASSERT_FALSE(c.ok()) << bc.name;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bc.name;
    EXPECT_NE(std::string(c.status().message()).find(bc.message), std::string::npos)
        << bc.name << ": " << c.status().message();
  }
  EXPECT_EQ(ParseJobConfig("{not json").status().message(), "config: not valid JSON");
}

}  // namespace
}  // namespace inac::agent
