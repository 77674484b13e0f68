#include "core/generators.h"

#include <gtest/gtest.h>

#include "core/validation.h"

namespace inac::core {
namespace {

class FatTreeCountsTest : public testing::TestWithParam<int> {};

TEST_P(FatTreeCountsTest, MatchesFormulas) {
  int k = GetParam();
  GeneratorOptions o;
  auto t = GenerateFatTree(k, o);
  ASSERT_TRUE(t.ok()) << t.status();
  int core = 0, agg = 0, edge = 0, ina = 0;
  for (const Switch& s : t->switches) {
    core += s.id[0] == 'c';
    agg += s.id[0] == 'a';
    edge += s.id[0] == 'e';
    ina += s.ina.capable;
  }
  EXPECT_EQ(core, k * k / 4);
  EXPECT_EQ(agg, k * k / 2);
  EXPECT_EQ(edge, k * k / 2);
  EXPECT_EQ(ina, k * k / 2);  // "tor": the edge switches
  EXPECT_EQ(static_cast<int>(t->hosts.size()), k * k * k / 4);
  // Each of the k³/4 hosts has one link; edge-agg and agg-core layers have k³/4 links each.
  EXPECT_EQ(static_cast<int>(t->links.size()), 3 * k * k * k / 4);
  EXPECT_TRUE(ValidateTopology(*t).empty());
}

INSTANTIATE_TEST_SUITE_P(K, FatTreeCountsTest, testing::Values(4, 8, 16));

TEST(FatTreeTest, GridSettingHas80SwitchesAnd192Hosts) {
  auto t = GenerateFatTree(8, GeneratorOptions{}, 6);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->switches.size(), 80u);
  EXPECT_EQ(t->hosts.size(), 192u);
}

TEST(FatTreeTest, RejectsOddOrTooLargeK) {
  EXPECT_EQ(GenerateFatTree(3, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateFatTree(0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateFatTree(130, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateFatTree(66, {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // > 65536 hosts
  EXPECT_EQ(GenerateLeafSpine(4096, 2, 17, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FatTreeTest, RandomPlacementIsExactAndSeeded) {
  GeneratorOptions o;
  o.ina = ParseInaPlacement("random:0.2").value();
  o.seed = 7;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  auto a = GenerateFatTree(8, o, 6);
  auto b = GenerateFatTree(8, o, 6);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  int ina = 0;
  for (const Switch& s : a->switches) {
    if (!s.ina.capable) continue;
    ++ina;
    EXPECT_GE(s.ina.processing_gbps, 100);
    EXPECT_LE(s.ina.processing_gbps, 3200);
  }
  EXPECT_EQ(ina, 16);  // round(0.2 * 80)
  o.seed = 8;
  EXPECT_NE(*GenerateFatTree(8, o, 6), *a);
}

TEST(FatTreeTest, P4RuntimeEndpoints) {
  GeneratorOptions o;
  o.p4runtime_base_port = 50000;
  auto t = GenerateFatTree(4, o).value();
  ASSERT_TRUE(t.switches[3].p4runtime.has_value());
  EXPECT_EQ(t.switches[3].p4runtime->address, "127.0.0.1:50003");
  EXPECT_EQ(t.switches[3].p4runtime->device_id, 4u);
  EXPECT_EQ(t.switches[3].p4runtime->target, TargetKind::kEmulator);
}

TEST(LeafSpineTest, Counts) {
  GeneratorOptions o;
  o.ina = ParseInaPlacement("all").value();
  auto t = GenerateLeafSpine(6, 3, 5, o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->switches.size(), 9u);
  EXPECT_EQ(t->hosts.size(), 30u);
  EXPECT_EQ(t->links.size(), 6u * 3 + 30);
  for (const Switch& s : t->switches) EXPECT_TRUE(s.ina.capable);
  EXPECT_TRUE(ValidateTopology(*t).empty());
  EXPECT_FALSE(GenerateLeafSpine(0, 1, 1, o).ok());
}

TEST(StarTest, OneInaSwitchAndItsHostsAsTheLabsExample) {
  GeneratorOptions o;
  o.ina = ParseInaPlacement("tor").value();
  o.aggregators = 4096;
  auto t = GenerateStar(5, o);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->switches.size(), 1u);
  EXPECT_EQ(t->switches[0].id, "s0");
  EXPECT_TRUE(t->switches[0].ina.capable);
  ASSERT_EQ(t->hosts.size(), 5u);
  EXPECT_EQ(t->hosts[4].id, "h4");
  EXPECT_EQ(t->links.size(), 5u);
  EXPECT_TRUE(ValidateTopology(*t).empty());
  o.ina = ParseInaPlacement("none").value();
  EXPECT_FALSE(GenerateStar(3, o)->switches[0].ina.capable);
  EXPECT_FALSE(GenerateStar(0, o).ok());
  EXPECT_FALSE(GenerateStar(1025, o).ok());
}

TEST(GeneratorOptionsTest, ParsesPlacementAndRanges) {
  EXPECT_EQ(ParseInaPlacement("none")->kind, InaPlacement::Kind::kNone);
  EXPECT_FALSE(ParseInaPlacement("random:1.5").ok());
  EXPECT_FALSE(ParseInaPlacement("random:x").ok());
  EXPECT_FALSE(ParseInaPlacement("edge").ok());
  GeneratorOptions o;
  ASSERT_TRUE(ParseProcessingRange("100:3200", &o).ok());
  EXPECT_EQ(o.processing_gbps_lo, 100);
  EXPECT_EQ(o.processing_gbps_hi, 3200);
  EXPECT_FALSE(ParseProcessingRange("3200:100", &o).ok());
  EXPECT_FALSE(ParseProcessingRange("-1", &o).ok());
}

}  // namespace
}  // namespace inac::core
