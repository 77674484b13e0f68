#include "core/topology.h"

#include <gtest/gtest.h>

#include "core/generators.h"

namespace inac::core {
namespace {

Topology Line() {
  // h1 - s1 - s2 - h2, plus a down link s1 - s3 - s2.
  Topology t;
  t.switches = {{"s1", {}, {}}, {"s2", {}, {}}, {"s3", {}, {}}};
  t.switches[0].ina = {true, 10, 100, 248};
  t.hosts = {{"h1", std::nullopt, std::nullopt}, {"h2", 25.0, std::string("10.9.9.9")}};
  t.links = {{"h1~s1", "h1", "s1", 10},
             {"s1~s2", "s1", "s2", 40},
             {"s2~h2", "s2", "h2", 10},
             {"s1~s3", "s1", "s3", 5, std::nullopt, LinkStatus::kDown},
             {"s3~s2", "s3", "s2", 5, std::nullopt, LinkStatus::kUp, 7, 9}};
  return t;
}

TEST(GraphTest, IndexesSwitchesBeforeHosts) {
  Topology t = Line();
  Graph g(t);
  EXPECT_EQ(g.num_nodes(), 5);
  EXPECT_EQ(g.num_switches(), 3);
  EXPECT_EQ(g.index("s1"), 0);
  EXPECT_EQ(g.index("h1"), 3);
  EXPECT_EQ(g.index("nope"), -1);
  EXPECT_TRUE(g.is_switch(2));
  EXPECT_TRUE(g.is_host(4));
}

TEST(GraphTest, DownLinksAreNotAdjacent) {
  Topology t = Line();
  Graph g(t);
  EXPECT_EQ(g.ArcBetween(g.index("s1"), g.index("s3")), -1);
  EXPECT_GE(g.ArcBetween(g.index("s3"), g.index("s2")), 0);
  auto seen = g.Reachable(g.index("s3"));
  EXPECT_TRUE(seen[g.index("h1")]);  // via s2
}

TEST(GraphTest, InaPropertiesAndIngress) {
  Topology t = Line();
  Graph g(t);
  EXPECT_TRUE(g.ina_capable(0));
  EXPECT_FALSE(g.ina_capable(1));
  EXPECT_DOUBLE_EQ(g.processing_gbps(0), 10);
  EXPECT_EQ(g.aggregators(0), 100);
  EXPECT_EQ(g.aggregators(1), 0);
  EXPECT_DOUBLE_EQ(g.host_ingress_gbps(g.index("h1")), 10);  // sum of its links
  EXPECT_DOUBLE_EQ(g.host_ingress_gbps(g.index("h2")), 25);  // explicit
  EXPECT_EQ(g.tor_of(g.index("h2")), g.index("s2"));
}

TEST(TopologyTest, AddressesAndPorts) {
  Topology t = Line();
  EXPECT_EQ(NodeAddress(t, "h1"), ParseIpv4("10.0.0.1").value());
  EXPECT_EQ(NodeAddress(t, "h2"), ParseIpv4("10.9.9.9").value());
  EXPECT_EQ(NodeAddress(t, "s2"), ParseIpv4("10.255.0.2").value());
  EXPECT_EQ(NodeAddress(t, "zz"), 0u);
  EXPECT_EQ(PortOf(t, "s1", 0), 1u);
  EXPECT_EQ(PortOf(t, "s1", 1), 2u);
  EXPECT_EQ(PortOf(t, "s1", 3), 3u);
  EXPECT_EQ(PortOf(t, "s3", 4), 7u);  // explicit a_port
  EXPECT_EQ(PortOf(t, "s2", 4), 9u);  // explicit b_port
  EXPECT_EQ(PortOf(t, "s3", 0), 0u);  // not its link
}

TEST(TopologyTest, Ipv4ParseAndFormat) {
  EXPECT_EQ(FormatIpv4(ParseIpv4("192.168.1.20").value()), "192.168.1.20");
  EXPECT_FALSE(ParseIpv4("256.1.1.1"));
  EXPECT_FALSE(ParseIpv4("1.2.3"));
  EXPECT_FALSE(ParseIpv4("1.2.3.4x"));
  EXPECT_FALSE(ParseIpv4(" 1.2.3.4"));
  EXPECT_FALSE(ParseIpv4("1.2.3.+4"));
}

TEST(TopologyTest, FindById) {
  Topology t = Line();
  ASSERT_NE(t.FindSwitch("s2"), nullptr);
  EXPECT_EQ(t.FindSwitch("h1"), nullptr);
  ASSERT_NE(t.FindHost("h1"), nullptr);
  ASSERT_NE(t.FindLink("s1~s2"), nullptr);
  EXPECT_EQ(t.FindLink("s2~s1"), nullptr);
  EXPECT_EQ(DefaultLinkId("a", "b"), "a~b");
}

}  // namespace
}  // namespace inac::core
