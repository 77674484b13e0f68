#include "core/plan.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

namespace inac::core {
namespace {

// w1, w2 - s1 - s2 - ps ; w3 - s2.
Topology Small() {
  Topology t;
  t.switches = {{"s1", {true, 10, 1000, 248}, {}}, {"s2", {true, 10, 1000, 248}, {}}};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"w3", {}, {}}, {"ps", {}, {}}};
  t.links = {{"w1~s1", "w1", "s1", 10},
             {"w2~s1", "w2", "s1", 10},
             {"s1~s2", "s1", "s2", 10},
             {"w3~s2", "w3", "s2", 10},
             {"s2~ps", "s2", "ps", 10}};
  return t;
}

Plan OneJob() {
  Plan plan;
  plan.version = 5;
  JobPlan jp;
  jp.job_id = 2;
  jp.priority = 3;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}},
              {"w2", "ps", "s1", {"w2", "s1"}},
              {"w3", "ps", "ps", {"w3", "s2", "ps"}}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2", "ps"}}};
  jp.aggregators = {{"s1", 64}};
  plan.jobs.push_back(jp);
  return plan;
}

TEST(AggregationGenerationTest, KeptWhileTheAggregationIsTheSameBumpedWhenItChanges) {
  Plan previous = OneJob();
  previous.jobs[0].generation = 3;
  // Same aggregation, other paths, grants and priority: the generation is kept.
  Plan same = OneJob();
  same.jobs[0].aggregators = {{"s1", 8}};
  same.jobs[0].priority = 9;
  same.jobs[0].aggregator_paths.clear();
  CarryAggregationGenerations(&previous, &same);
  EXPECT_EQ(same.jobs[0].generation, 3u);
  // w3 now aggregated at s2: every tag of the job changes.
  Plan moved = OneJob();
  moved.jobs[0].flows[2].aggregation_node = "s2";
  CarryAggregationGenerations(&previous, &moved);
  EXPECT_EQ(moved.jobs[0].generation, 4u);
  // A worker's gradient split over two aggregation nodes: other ranges, other tags.
  Plan split = OneJob();
  split.jobs[0].flows[0].fraction = 0.5;
  split.jobs[0].flows.push_back({"w1", "ps", "s2", {"w1", "s1", "s2"}, 0.5});
  CarryAggregationGenerations(&previous, &split);
  EXPECT_EQ(split.jobs[0].generation, 4u);
  // A job the previous plan does not hold, or no previous plan: generation 0.
  Plan other = OneJob();
  other.jobs[0].job_id = 7;
  other.jobs[0].generation = 5;
  CarryAggregationGenerations(&previous, &other);
  EXPECT_EQ(other.jobs[0].generation, 0u);
  CarryAggregationGenerations(nullptr, &moved);
  EXPECT_EQ(moved.jobs[0].generation, 0u);
}

TEST(AggregationGenerationTest, GenerationBitsInTheTagMulticastGroupKept) {
  EXPECT_EQ(AggregationTag(2, 1, 3, 0), 2u * 64 + 8 + 3);
  EXPECT_EQ(AggregationTag(2, 1, 3, 1), (1u << 30) + 2 * 64 + 8 + 3);
  EXPECT_EQ(AggregationTag(2, 1, 3, 6), (2u << 30) + 2 * 64 + 8 + 3);  // two bits
  EXPECT_EQ(BaseTag(AggregationTag(2, 1, 3, 7)), AggregationTag(2, 1, 3));
  Topology t = Small();
  Plan plan = OneJob();
  auto before = DeriveSwitchIntents(t, plan);
  plan.jobs[0].generation = 1;
  auto after = DeriveSwitchIntents(t, plan);
  ASSERT_EQ(after[0].jobs.size(), 1u);
  EXPECT_EQ(after[0].jobs[0].tag, AggregationTag(2, 0, 0, 1));
  for (const AggregationInputIntent& in : after[0].inputs) EXPECT_EQ(in.tag, after[0].jobs[0].tag);
  for (const RouteIntent& r : after[1].routes) EXPECT_EQ(r.tag, after[0].jobs[0].tag);
  // Same multicast group (and per-tag counter cells) in both generations.
  EXPECT_EQ(after[0].jobs[0].multicast_group, before[0].jobs[0].multicast_group);
}

TEST(DeriveSwitchIntentsTest, AggregationInputsRoutesAndMulticast) {
  Topology t = Small();
  auto intents = DeriveSwitchIntents(t, OneJob());
  ASSERT_EQ(intents.size(), 2u);
  const SwitchIntent& s1 = intents[0];
  const SwitchIntent& s2 = intents[1];
  EXPECT_EQ(s1.switch_id, "s1");
  EXPECT_EQ(s1.version, 5);
  uint32_t tag = AggregationTag(2, 0);
  EXPECT_EQ(tag, 128u);
  uint32_t ps = NodeAddress(t, "ps");
  ASSERT_EQ(s1.jobs.size(), 1u);
  EXPECT_EQ(s1.jobs[0].tag, tag);
  EXPECT_EQ(s1.jobs[0].fan_in, 2u);
  EXPECT_EQ(s1.jobs[0].input_bitmap, 3u);
  EXPECT_EQ(s1.jobs[0].aggregator_count, 64u);
  EXPECT_EQ(s1.jobs[0].priority, 3);
  EXPECT_EQ(s1.jobs[0].upstream_address, ps);
  EXPECT_EQ(s1.jobs[0].self_address, NodeAddress(t, "s1"));
  EXPECT_EQ(s1.jobs[0].multicast_group, 1 + tag);
  ASSERT_EQ(s1.inputs.size(), 2u);
  EXPECT_EQ(s1.inputs[0].source_address, NodeAddress(t, "w1"));
  EXPECT_EQ(s1.inputs[1].index, 1u);
  EXPECT_TRUE(s2.jobs.empty());  // s2 only forwards

  // The aggregate leaves s1 toward s2 (port 3 of s1) and s2 sends it to ps (port 3 of s2).
  auto find_route = [](const SwitchIntent& s, RouteClass cls, uint32_t src,
                       uint32_t dst) -> const RouteIntent* {
    for (const RouteIntent& r : s.routes) {
      if (r.packet_class == cls && r.source_address == src && r.destination_address == dst) {
        return &r;
      }
    }
    return nullptr;
  };
  const RouteIntent* up = find_route(s1, RouteClass::kUpstream, NodeAddress(t, "s1"), ps);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->egress_port, 3u);
  ASSERT_NE(find_route(s2, RouteClass::kUpstream, NodeAddress(t, "s1"), ps), nullptr);
  EXPECT_EQ(find_route(s2, RouteClass::kRaw, NodeAddress(t, "w3"), ps)->egress_port, 3u);
  // w1's raw chunks end at s1: what leaves s1 for the PS (aggregate or fallback) is upstream.
  EXPECT_EQ(find_route(s1, RouteClass::kRaw, NodeAddress(t, "w1"), ps), nullptr);
  auto find = find_route;
  // Results: ps -> s2 replicates to s1 (port 1) and w3 (port 2); s1 to w1 and w2.
  ASSERT_EQ(s2.multicast_groups.size(), 1u);
  EXPECT_EQ(s2.multicast_groups[0].egress_ports, (std::vector<uint32_t>{1, 2}));
  ASSERT_EQ(s1.multicast_groups.size(), 1u);
  EXPECT_EQ(s1.multicast_groups[0].egress_ports, (std::vector<uint32_t>{1, 2}));
  const RouteIntent* down = find(s2, RouteClass::kResult, ps, 0);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->multicast_group, s2.multicast_groups[0].group_id);
}

TEST(DeriveSwitchIntentsTest, DeterministicAndEmptyWithoutJobs) {
  Topology t = Small();
  EXPECT_EQ(DeriveSwitchIntents(t, OneJob()), DeriveSwitchIntents(t, OneJob()));
  Plan empty;
  for (const SwitchIntent& s : DeriveSwitchIntents(t, empty)) EXPECT_TRUE(s.empty());
}

TEST(DeriveSwitchIntentsTest, MulticastGroupsProbePastCollisions) {
  Topology t = Small();
  Plan plan = OneJob();
  // A job whose tag is congruent to job 2's modulo 32767.
  JobPlan other = plan.jobs[0];
  other.job_id = 2 + 32767;  // tag differs by 64*32767, same group candidate
  plan.jobs.push_back(other);
  auto intents = DeriveSwitchIntents(t, plan);
  ASSERT_EQ(intents[0].jobs.size(), 2u);
  EXPECT_NE(intents[0].jobs[0].multicast_group, intents[0].jobs[1].multicast_group);
  // Two shards of memory regions do not overlap.
  EXPECT_EQ(intents[0].jobs[1].aggregator_base,
            intents[0].jobs[0].aggregator_base + intents[0].jobs[0].aggregator_count);
}

TEST(DeriveSwitchIntentsTest, TwoShardsSplitTheJobsAggregators) {
  Topology t = Small();
  Plan plan = OneJob();
  JobPlan& jp = plan.jobs[0];
  jp.ps_shares = {{"ps", 0.5}, {"w3", 0.5}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}},
              {"w2", "ps", "s1", {"w2", "s1"}},
              {"w1", "w3", "s1", {"w1", "s1"}},
              {"w2", "w3", "s1", {"w2", "s1"}}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2", "ps"}}, {"s1", "w3", {"s1", "s2", "w3"}}};
  jp.aggregators = {{"s1", 65}};
  auto s1 = DeriveSwitchIntents(t, plan)[0];
  ASSERT_EQ(s1.jobs.size(), 2u);
  EXPECT_EQ(s1.jobs[0].tag, AggregationTag(2, 0));
  EXPECT_EQ(s1.jobs[1].tag, AggregationTag(2, 1));
  EXPECT_EQ(s1.jobs[0].aggregator_count + s1.jobs[1].aggregator_count, 65u);
  EXPECT_EQ(s1.jobs[1].upstream_address, NodeAddress(t, "w3"));
}

// The case that keys `ina_route` by packet class (docs/ina-pipeline.md, "Classes"): W1, W2 on S1;
// W3 and the PS on S2; all three aggregated at S1. W3's raw chunks must travel S2 -> S1 while S1's
// aggregate travels S1 -> S2 -> PS: different keys.
TEST(DeriveSwitchIntentsTest, RawAndUpstreamTrafficAreKeyedApartAndResultsDoNotLoop) {
  Topology t = Small();
  Plan plan = OneJob();
  JobPlan& jp = plan.jobs[0];
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}},
              {"w2", "ps", "s1", {"w2", "s1"}},
              {"w3", "ps", "s1", {"w3", "s2", "s1"}}};
  auto intents = DeriveSwitchIntents(t, plan);
  const SwitchIntent& s1 = intents[0];
  const SwitchIntent& s2 = intents[1];
  const uint32_t ps = NodeAddress(t, "ps");
  std::map<std::tuple<RouteClass, uint32_t>, uint32_t> s2_routes;
  for (const RouteIntent& r : s2.routes) {
    if (r.destination_address == ps) s2_routes[{r.packet_class, r.source_address}] = r.egress_port;
  }
  EXPECT_EQ((s2_routes[{RouteClass::kRaw, NodeAddress(t, "w3")}]), 1u);       // toward s1
  EXPECT_EQ((s2_routes[{RouteClass::kUpstream, NodeAddress(t, "s1")}]), 3u);  // toward ps
  ASSERT_EQ(s1.jobs.size(), 1u);
  EXPECT_EQ(s1.jobs[0].fan_in, 3u);
  // Results: s2 replicates to s1 and w3; s1 only to w1 and w2 (never back to s2).
  ASSERT_EQ(s1.multicast_groups.size(), 1u);
  EXPECT_EQ(s1.multicast_groups[0].egress_ports, (std::vector<uint32_t>{1, 2}));
  ASSERT_EQ(s2.multicast_groups.size(), 1u);
  EXPECT_EQ(s2.multicast_groups[0].egress_ports, (std::vector<uint32_t>{1, 2}));
}

TEST(DeriveSwitchIntentsTest, HostPortsCarryTheHostsMacAndAddress) {
  Topology t = Small();
  auto intents = DeriveSwitchIntents(t, OneJob());
  ASSERT_EQ(intents[0].host_ports.size(), 2u);  // w1, w2 on s1
  EXPECT_EQ(intents[0].host_ports[0].port, 1u);
  EXPECT_EQ(intents[0].host_ports[0].address, NodeAddress(t, "w1"));
  EXPECT_EQ(intents[0].host_ports[0].mac, (uint64_t{0x0200} << 32) | NodeAddress(t, "w1"));
  ASSERT_EQ(intents[1].host_ports.size(), 2u);  // w3, ps on s2
}

TEST(DeriveSwitchIntentsTest, EsaSharesTheSwitchsPoolAndStaticPoolsDoNot) {
  Topology t = Small();
  Plan plan = OneJob();
  JobPlan other = plan.jobs[0];
  other.job_id = 3;
  other.priority = 1;
  other.aggregators = {{"s1", 100}};
  plan.jobs.push_back(other);
  auto static_s1 = DeriveSwitchIntents(t, plan)[0];
  ASSERT_EQ(static_s1.jobs.size(), 2u);
  EXPECT_EQ(static_s1.jobs[0].aggregator_base, 0u);
  EXPECT_EQ(static_s1.jobs[0].aggregator_count, 64u);
  EXPECT_EQ(static_s1.jobs[1].aggregator_base, 64u);
  EXPECT_EQ(static_s1.jobs[1].aggregator_count, 100u);
  EXPECT_EQ(static_s1.jobs[1].window, 100u);
  plan.memory_policy = "esa";
  auto esa_s1 = DeriveSwitchIntents(t, plan)[0];
  for (const JobAggregationIntent& j : esa_s1.jobs) {
    EXPECT_EQ(j.aggregator_base, 0u);
    EXPECT_EQ(j.aggregator_count, 1000u);  // the switch's whole pool
  }
  EXPECT_EQ(esa_s1.jobs[1].slot_offset, 64u);
  EXPECT_EQ(esa_s1.jobs[1].window, 100u);
  EXPECT_EQ(esa_s1.jobs[1].priority, 1);
  plan.memory_policy = "atp";
  auto atp_s1 = DeriveSwitchIntents(t, plan)[0];
  EXPECT_EQ(atp_s1.jobs[0].priority, 0);  // no preemption
  EXPECT_EQ(atp_s1.jobs[1].priority, 0);
}

}  // namespace
}  // namespace inac::core
