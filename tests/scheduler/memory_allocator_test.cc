#include "scheduler/memory/allocator.h"

#include <gtest/gtest.h>

#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/priority.h"

namespace inac::scheduler {
namespace {

TEST(AggregatorModelTest, WindowFollowsLittlesLaw) {
  // 100 Gbps x 6 us = 75,000 bytes in flight = 302.4 chunks of 248 B -> 303.
  EXPECT_EQ(WindowAggregators(100, 6, 248), 303);
  // 100 Gbps x 1.984 us = 24,800 bytes = exactly 100 chunks.
  EXPECT_EQ(WindowAggregators(100, 1.984, 248), 100);
  EXPECT_EQ(WindowAggregators(0, 6, 248), 0);
  EXPECT_DOUBLE_EQ(MemoryRateCapGbps(100, 1.984, 248), 100);
}

TEST(AggregatorModelTest, HoldTimePerPolicy) {
  AggregationTiming t{.spread_us = 2, .ps_rtt_us = 4};
  EXPECT_DOUBLE_EQ(HoldTimeUs(MemoryPolicy::kEsa, t), 2);
  EXPECT_DOUBLE_EQ(HoldTimeUs(MemoryPolicy::kAtp, t), 6);
  EXPECT_DOUBLE_EQ(HoldTimeUs(MemoryPolicy::kSwitchMl, t), 6);
  EXPECT_DOUBLE_EQ(HoldTimeUs(MemoryPolicy::kNoIna, t), 0);
}

TEST(AggregatorModelTest, PolicyNamesRoundTrip) {
  for (MemoryPolicy p :
       {MemoryPolicy::kNoIna, MemoryPolicy::kSwitchMl, MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
    EXPECT_EQ(ParseMemoryPolicy(MemoryPolicyName(p)), p);
  }
  EXPECT_FALSE(ParseMemoryPolicy("ESA").has_value());
}

std::vector<int64_t> Grants(MemoryPolicy policy, int64_t capacity,
                            const std::vector<MemoryDemand>& demands) {
  return MakeAllocator(policy)->Allocate(capacity, demands);
}

TEST(PreemptivePriorityAllocatorTest, HigherPriorityFirstThenWhatIsLeft) {
  std::vector<MemoryDemand> d = {{.job_id = 1, .window = 60, .priority = 1},
                                 {.job_id = 2, .window = 60, .priority = 5},
                                 {.job_id = 3, .window = 60, .priority = 3}};
  EXPECT_EQ(Grants(MemoryPolicy::kEsa, 100, d), (std::vector<int64_t>{0, 60, 40}));
}

TEST(PreemptivePriorityAllocatorTest, TiesGoToLowerJobId) {
  std::vector<MemoryDemand> d = {{.job_id = 7, .window = 80, .priority = 2},
                                 {.job_id = 3, .window = 80, .priority = 2}};
  EXPECT_EQ(Grants(MemoryPolicy::kEsa, 100, d), (std::vector<int64_t>{20, 80}));
}

TEST(PreemptivePriorityAllocatorTest, TakesMemoryFromAHolder) {
  // Job 1 holds a full window; the more urgent job 2 preempts it.
  std::vector<MemoryDemand> d = {{.job_id = 1, .window = 100, .priority = 1, .held = 100},
                                 {.job_id = 2, .window = 100, .priority = 9}};
  EXPECT_EQ(Grants(MemoryPolicy::kEsa, 100, d), (std::vector<int64_t>{0, 100}));
}

TEST(StaticPoolAllocatorTest, KeepsPoolsAndAdmitsInOrderAllOrNothing) {
  std::vector<MemoryDemand> d = {
      {.job_id = 1, .window = 100, .priority = 1, .admission = 0, .held = 100},
      {.job_id = 2, .window = 100, .priority = 9, .admission = 5},
      {.job_id = 3, .window = 50, .priority = 0, .admission = 1}};
  // Pool of job 1 kept; job 3 (earlier) admitted with its full 50; job 2 does not fit.
  EXPECT_EQ(Grants(MemoryPolicy::kSwitchMl, 160, d), (std::vector<int64_t>{100, 0, 50}));
  // With room for both new jobs both are admitted.
  EXPECT_EQ(Grants(MemoryPolicy::kSwitchMl, 250, d), (std::vector<int64_t>{100, 100, 50}));
}

TEST(StaticPoolAllocatorTest, NoPartialPools) {
  std::vector<MemoryDemand> d = {{.job_id = 1, .window = 100}};
  EXPECT_EQ(Grants(MemoryPolicy::kSwitchMl, 99, d), (std::vector<int64_t>{0}));
}

TEST(HashedSharingAllocatorTest, ProportionalWhenOversubscribed) {
  std::vector<MemoryDemand> d = {{.job_id = 1, .window = 300}, {.job_id = 2, .window = 100}};
  EXPECT_EQ(Grants(MemoryPolicy::kAtp, 1000, d), (std::vector<int64_t>{300, 100}));
  EXPECT_EQ(Grants(MemoryPolicy::kAtp, 200, d), (std::vector<int64_t>{150, 50}));
}

TEST(NoAggregationAllocatorTest, GrantsNothing) {
  std::vector<MemoryDemand> d = {{.job_id = 1, .window = 10}};
  EXPECT_EQ(Grants(MemoryPolicy::kNoIna, 1000, d), (std::vector<int64_t>{0}));
}

TEST(AllocatorInvariantTest, GrantsNeverExceedCapacityOrWindow) {
  uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>(x >> 40);
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<MemoryDemand> d;
    const int n = 1 + next() % 12;
    for (int i = 0; i < n; ++i) {
      d.push_back({.job_id = i,
                   .window = next() % 500,
                   .priority = static_cast<int>(next() % 4),
                   .admission = next() % 10,
                   .held = (next() % 2) ? next() % 500 : 0});
    }
    const int64_t cap = next() % 2000;
    for (MemoryPolicy p : {MemoryPolicy::kSwitchMl, MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
      const auto g = Grants(p, cap, d);
      int64_t sum = 0;
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_GE(g[i], 0);
        EXPECT_LE(g[i], d[i].window);
        sum += g[i];
      }
      EXPECT_LE(sum, cap) << MemoryPolicyName(p);
    }
  }
}

TEST(ShortestRemainingWorkWithAgingTest, LessWorkRanksHigher) {
  ShortestRemainingWorkWithAging f;
  const int small = f.Priority({.remaining_comm_bytes = 1e9});
  const int large = f.Priority({.remaining_comm_bytes = 1e12});
  EXPECT_GT(small, large);
  // User priority dominates work.
  EXPECT_GT(f.Priority({.user_priority = 1, .remaining_comm_bytes = 1e15}), small);
}

TEST(ShortestRemainingWorkWithAgingTest, AgingEventuallyOutranksAnyNewJob) {
  ShortestRemainingWorkWithAging f;
  const int fresh_tiny = f.Priority({.remaining_comm_bytes = 0, .age_s = 0});
  // A huge job that has waited long enough beats a fresh job with no work left at all.
  const int old_huge = f.Priority({.remaining_comm_bytes = 1e18, .age_s = 1e4});
  EXPECT_GT(old_huge, fresh_tiny);
  EXPECT_EQ(f.Priority({.remaining_comm_bytes = 1e9, .age_s = 9.9}),
            f.Priority({.remaining_comm_bytes = 1e9, .age_s = 0}));
  EXPECT_EQ(f.Priority({.remaining_comm_bytes = 1e9, .age_s = 10}),
            f.Priority({.remaining_comm_bytes = 1e9, .age_s = 0}) + 1);
}

TEST(ShortestRemainingWorkWithAgingTest, StaysInSwitchRange) {
  ShortestRemainingWorkWithAging f;
  EXPECT_EQ(f.Priority({.user_priority = -5, .remaining_comm_bytes = 1e18}), 0);
  EXPECT_EQ(f.Priority({.user_priority = 1 << 20}), kMaxPriority);
  EXPECT_EQ(UserPriorityOnly().Priority({.user_priority = 7}), 7);
}

}  // namespace
}  // namespace inac::scheduler
