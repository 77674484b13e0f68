// One rule for a job's aggregators on a switch (core::SplitGrant): the grant is split over the
// job's tags there in proportion to the traffic each carries, and DeriveSwitchIntents lays the
// windows out with it; core::JobTagsOf and core::UpstreamRouteOf say which tags a switch holds
// and where its upstream packets go, as the derivation programs them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {
namespace {

using Grants = std::vector<int64_t>;

TEST(SplitGrantTest, ProportionalToTheWeightsByLargestRemainders) {
  // 64 aggregators over 3/64 and 61/64 of the traffic: exactly 3 and 61 (an even split gave
  // 32 and 32: the 61/64 tag then sustained half of what the pooled grant promised).
  EXPECT_EQ(SplitGrant(64, {3.0 / 64, 61.0 / 64}), (Grants{3, 61}));
  // 101: quotas 4.734 and 96.266, floors 4 + 96; the unit left goes to the larger remainder.
  EXPECT_EQ(SplitGrant(101, {3.0 / 64, 61.0 / 64}), (Grants{5, 96}));
  // The weights need not sum to 1.
  EXPECT_EQ(SplitGrant(10, {0.2, 0.3}), (Grants{4, 6}));
}

TEST(SplitGrantTest, TiesGoToTheEarlierTag) {
  // Equal weights: the split the layout always made (the first grant % n tags one more).
  EXPECT_EQ(SplitGrant(5, {0.5, 0.5}), (Grants{3, 2}));
  EXPECT_EQ(SplitGrant(7, {1, 1, 1}), (Grants{3, 2, 2}));
  // All weights 0 (or negative): an even split.
  EXPECT_EQ(SplitGrant(7, {0, 0, 0}), (Grants{3, 2, 2}));
  EXPECT_EQ(SplitGrant(7, {-1, 0, 0}), (Grants{3, 2, 2}));
}

TEST(SplitGrantTest, EveryTagGetsOneWhenTheGrantAllows) {
  // 10 over 3/64 and 61/64: quotas 0.47 and 9.53, largest remainders give (0, 10); the 3/64 tag
  // takes one back: (1, 9).
  EXPECT_EQ(SplitGrant(10, {3.0 / 64, 61.0 / 64}), (Grants{1, 9}));
  // 3 over (0.01, 0.01, 0.98): (0, 0, 3) by remainders, then each empty tag takes one from the
  // tag with the most aggregators per unit of weight that has two or more.
  EXPECT_EQ(SplitGrant(3, {0.01, 0.01, 0.98}), (Grants{1, 1, 1}));
  EXPECT_EQ(SplitGrant(4, {0.01, 0.01, 0.98}), (Grants{1, 1, 2}));
  // Fewer aggregators than tags: no minimum (the memory planner treats such a grant as none).
  EXPECT_EQ(SplitGrant(2, {0.1, 0.1, 0.8}), (Grants{0, 0, 2}));
  EXPECT_EQ(SplitGrant(0, {0.5, 0.5}), (Grants{0, 0}));
  EXPECT_EQ(SplitGrant(-3, {1}), (Grants{0}));
  EXPECT_TRUE(SplitGrant(5, {}).empty());
}

TEST(SplitGrantTest, SumsToTheGrantAndStaysWithinOneOfTheQuota) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 12);
    std::vector<double> w(n);
    for (double& x : w) x = 1 + static_cast<double>(rng() % 1000);
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    const int64_t grant = static_cast<int64_t>(rng() % 400);
    const Grants split = SplitGrant(grant, w);
    ASSERT_EQ(std::accumulate(split.begin(), split.end(), int64_t{0}), grant);
    bool every_quota_at_least_one = true;
    for (int i = 0; i < n; ++i) every_quota_at_least_one &= grant * w[i] / total >= 1;
    for (int i = 0; i < n; ++i) {
      if (grant >= n) {
        EXPECT_GE(split[i], 1);
      }
      // Largest remainders alone (no tag below one aggregator to lift): floor or ceil of the
      // quota.
      if (every_quota_at_least_one) {
        EXPECT_LT(std::abs(static_cast<double>(split[i]) - grant * w[i] / total), 1.0);
      }
    }
  }
}

// w1, w2 - s1 - s2 - ps; w3 - s2. Both switches INA with 1000 aggregators of 248 B.
Topology Fabric() {
  Topology t;
  t.switches = {{"s1", {true, 400, 1000, 248}, {}}, {"s2", {true, 400, 1000, 248}, {}}};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"w3", {}, {}}, {"ps", {}, {}}};
  t.links = {{"w1~s1", "w1", "s1", 100},
             {"w2~s1", "w2", "s1", 100},
             {"s1~s2", "s1", "s2", 100},
             {"w3~s2", "w3", "s2", 100},
             {"s2~ps", "s2", "ps", 100}};
  return t;
}

// Job 2, one PS: w1 sends [0, 3/64) and [3/64, 1) of its gradient to s1 as two flows, w2 all of
// it: the shard is cut into two ranges, two tags, both aggregated at s1, which holds 64
// aggregators for the job.
Plan SplitAtOneSwitch(const std::string& policy) {
  Plan plan;
  plan.memory_policy = policy;
  JobPlan jp;
  jp.job_id = 2;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}, 3.0 / 64},
              {"w1", "ps", "s1", {"w1", "s1"}, 61.0 / 64},
              {"w2", "ps", "s1", {"w2", "s1"}, 1}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2", "ps"}}};
  jp.aggregators = {{"s1", 64}};
  plan.jobs.push_back(jp);
  return plan;
}

const JobAggregationIntent* Entry(const std::vector<SwitchIntent>& intents, const std::string& sw,
                                  uint32_t tag) {
  for (const SwitchIntent& si : intents) {
    if (si.switch_id != sw) continue;
    for (const JobAggregationIntent& ji : si.jobs) {
      if (ji.tag == tag) return &ji;
    }
  }
  return nullptr;
}

TEST(TagWindowsTest, TheLayoutSplitsAGrantByTheTagsTraffic) {
  const Topology t = Fabric();
  const uint32_t small = AggregationTag(2, 0, 0), large = AggregationTag(2, 0, 1);
  {  // Static pools: each tag's region is its window.
    const auto intents = DeriveSwitchIntents(t, SplitAtOneSwitch("switchml"));
    const JobAggregationIntent* a = Entry(intents, "s1", small);
    const JobAggregationIntent* b = Entry(intents, "s1", large);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->window, 3u);
    EXPECT_EQ(a->aggregator_base, 0u);
    EXPECT_EQ(a->aggregator_count, 3u);
    EXPECT_EQ(b->window, 61u);
    EXPECT_EQ(b->aggregator_base, 3u);
    EXPECT_EQ(b->aggregator_count, 61u);
  }
  {  // Shared memory (esa): the whole pool, windows placed one after the other.
    const auto intents = DeriveSwitchIntents(t, SplitAtOneSwitch("esa"));
    const JobAggregationIntent* a = Entry(intents, "s1", small);
    const JobAggregationIntent* b = Entry(intents, "s1", large);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->window, 3u);
    EXPECT_EQ(a->slot_offset, 0u);
    EXPECT_EQ(b->window, 61u);
    EXPECT_EQ(b->slot_offset, 3u);
    EXPECT_EQ(a->aggregator_count, 1000u);
    EXPECT_EQ(b->aggregator_base, 0u);
  }
  {  // 10 aggregators: the 3/64 tag keeps one, the other gets 9 (SplitGrant).
    Plan plan = SplitAtOneSwitch("esa");
    plan.jobs[0].aggregators["s1"] = 10;
    const auto intents = DeriveSwitchIntents(t, plan);
    EXPECT_EQ(Entry(intents, "s1", small)->window, 1u);
    EXPECT_EQ(Entry(intents, "s1", large)->window, 9u);
  }
}

TEST(TagWindowsTest, JobTagsOfNamesTheTagsEverySwitchHoldsChainsIncluded) {
  const Topology t = Fabric();
  const Graph g(t);
  // Single-range job on the chain s1 -> s2 -> ps: w1, w2 at s1, w3 at s2; s1's partial sum is
  // re-aggregated at s2 (its aggregator path ends there).
  JobPlan jp;
  jp.job_id = 3;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}},
              {"w2", "ps", "s1", {"w2", "s1"}},
              {"w3", "ps", "s2", {"w3", "s2"}}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2"}}, {"s2", "ps", {"s2", "ps"}}};
  std::vector<JobTag> tags = JobTagsOf(g, jp);
  ASSERT_EQ(tags.size(), 1u);
  EXPECT_EQ(tags[0].tag, AggregationTag(3, 0, 0));
  EXPECT_DOUBLE_EQ(tags[0].weight, 1);
  EXPECT_EQ(tags[0].switches, (std::vector<std::string>{"s1", "s2"}));
  // The chain child's upstream route runs through its parent on to the PS.
  EXPECT_EQ(UpstreamRouteOf(g, jp, "ps", "s1"), (std::vector<std::string>{"s1", "s2", "ps"}));
  EXPECT_EQ(UpstreamRouteOf(g, jp, "ps", "s2"), (std::vector<std::string>{"s2", "ps"}));
  // The derivation agrees: s2 has an entry with two inputs (w3 and s1).
  const Plan plan{.jobs = {jp}};
  const auto intents = DeriveSwitchIntents(t, plan);
  ASSERT_NE(Entry(intents, "s2", tags[0].tag), nullptr);
  EXPECT_EQ(Entry(intents, "s2", tags[0].tag)->fan_in, 2u);

  // The split job: two tags at s1 weighted by their ranges; with two PSs of shares 0.25 / 0.75,
  // a tag's weight is its share times its range.
  const Plan split = SplitAtOneSwitch("esa");
  tags = JobTagsOf(g, split.jobs[0]);
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_DOUBLE_EQ(tags[0].weight, 3.0 / 64);
  EXPECT_DOUBLE_EQ(tags[1].weight, 61.0 / 64);
  EXPECT_EQ(tags[0].switches, (std::vector<std::string>{"s1"}));
  JobPlan two = jp;
  two.ps_shares = {{"ps", 0.75}, {"w3", 0.25}};
  two.flows.push_back({"w1", "w3", "s1", {"w1", "s1"}});
  two.flows.push_back({"w2", "w3", "s1", {"w2", "s1"}});
  two.aggregator_paths.push_back({"s1", "w3", {"s1", "s2", "w3"}});
  tags = JobTagsOf(g, two);
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0].ps, "ps");
  EXPECT_DOUBLE_EQ(tags[0].weight, 0.75);
  EXPECT_EQ(tags[1].ps, "w3");
  EXPECT_DOUBLE_EQ(tags[1].weight, 0.25);
  EXPECT_EQ(tags[1].switches, (std::vector<std::string>{"s1"}));
}

TEST(TagWindowsTest, AChainThatDoesNotReachThePsIsNotProgrammed) {
  const Topology t = Fabric();
  const Graph g(t);
  // s1's path ends at s2, but s2 has no aggregator path of its own: no chain, s1 sends to the PS
  // over a shortest path and s2 holds no tag.
  JobPlan jp;
  jp.job_id = 4;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}}, {"w2", "ps", "s1", {"w2", "s1"}}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2"}}};
  const std::vector<JobTag> tags = JobTagsOf(g, jp);
  ASSERT_EQ(tags.size(), 1u);
  EXPECT_EQ(tags[0].switches, (std::vector<std::string>{"s1"}));
  EXPECT_EQ(UpstreamRouteOf(g, jp, "ps", "s1"), (std::vector<std::string>{"s1", "s2", "ps"}));
  EXPECT_TRUE(UpstreamRouteOf(g, jp, "nowhere", "s1").empty());
}

}  // namespace
}  // namespace inac::core
