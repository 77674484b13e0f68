#include "scheduler/memory/contention.h"

#include <cmath>

#include <gtest/gtest.h>

namespace inac::scheduler {
namespace {

TEST(HashedContentionTest, AtpSymmetricPairSolvesClosedForm) {
  // Two jobs each offering x = 0.2 of the memory: p = x / (1 + x), occ = x A / (1 + x).
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6},
                                  {.chunks_per_s = 1e8, .hold_s = 2e-6}};
  const SwitchContention c = HashedContention(MemoryPolicy::kAtp, 1000, loads);
  for (const ChunkContention& j : c.jobs) {
    EXPECT_NEAR(j.collision, 0.2 / 1.2, 1e-12);
    EXPECT_NEAR(j.occupancy, 200 / 1.2, 1e-9);
    EXPECT_DOUBLE_EQ(j.preempted, 0);
    EXPECT_NEAR(j.unaggregated, j.collision, 1e-15);
    EXPECT_DOUBLE_EQ(j.preemptions_per_s, 0);
  }
  EXPECT_NEAR(c.occupancy, 400 / 1.2, 1e-9);
}

TEST(HashedContentionTest, OnOffJobsMeetTheOthersMeanOccupancy) {
  // The pair above, each on half the time: every formula holds with the demand halved where it
  // is what the job leaves for others. p = f x (1 - p) with f x = 0.1: p = 0.1 / 1.1; the mean
  // occupancy is f times 200 (1 - p).
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6, .active_fraction = 0.5},
                                  {.chunks_per_s = 1e8, .hold_s = 2e-6, .active_fraction = 0.5}};
  const SwitchContention c = HashedContention(MemoryPolicy::kAtp, 1000, loads);
  for (const ChunkContention& j : c.jobs) {
    EXPECT_NEAR(j.collision, 0.1 / 1.1, 1e-12);
    EXPECT_NEAR(j.occupancy, 0.5 * 200 * (1 - 0.1 / 1.1), 1e-9);
  }
  // ESA: the low job is preempted at the high job's mean chunk rate f c.
  loads[0].priority = 2;
  loads[1].priority = 1;
  const SwitchContention e = HashedContention(MemoryPolicy::kEsa, 1000, loads);
  EXPECT_NEAR(e.jobs[0].collision, 0, 1e-15);
  EXPECT_NEAR(e.jobs[1].preempted, 1 - std::exp(-2e-6 * 0.5 * 1e8 / 1000), 1e-12);
  EXPECT_NEAR(e.jobs[1].collision, 0.5 * 200 / 1000, 1e-12);  // meets the high job's 100
  // Always on (f = 1) is the default and gives the continuous closed form.
  loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6}, {.chunks_per_s = 1e8, .hold_s = 2e-6}};
  EXPECT_NEAR(HashedContention(MemoryPolicy::kAtp, 1000, loads).jobs[0].collision, 0.2 / 1.2,
              1e-12);
}

TEST(HashedContentionTest, AtpIgnoresPriorities) {
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6, .priority = 9},
                                  {.chunks_per_s = 1e8, .hold_s = 2e-6, .priority = 1}};
  const SwitchContention c = HashedContention(MemoryPolicy::kAtp, 1000, loads);
  EXPECT_DOUBLE_EQ(c.jobs[0].collision, c.jobs[1].collision);
}

TEST(HashedContentionTest, EsaHighPriorityNeverCollidesLowIsPreempted) {
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6, .priority = 1},
                                  {.chunks_per_s = 1e8, .hold_s = 2e-6, .priority = 2}};
  const SwitchContention c = HashedContention(MemoryPolicy::kEsa, 1000, loads);
  const ChunkContention& low = c.jobs[0];
  const ChunkContention& high = c.jobs[1];
  EXPECT_DOUBLE_EQ(high.collision, 0);
  EXPECT_DOUBLE_EQ(high.preempted, 0);
  EXPECT_NEAR(high.occupancy, 200, 1e-9);
  const double q = 1 - std::exp(-0.2);  // h * c_high / A = 2e-6 * 1e8 / 1000
  EXPECT_NEAR(low.collision, 0.2, 1e-12);
  EXPECT_NEAR(low.preempted, q, 1e-12);
  EXPECT_NEAR(low.unaggregated, 0.2 + 0.8 * q / 2, 1e-12);
  EXPECT_NEAR(low.occupancy, 200 * (1 - q / 2) * 0.8, 1e-9);
  EXPECT_NEAR(low.preemptions_per_s, 1e8 * 0.8 * q, 1e-3);
}

TEST(HashedContentionTest, WindowLargerThanMemoryOverflows) {
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e9, .hold_s = 3e-6}};  // offers 3000
  for (MemoryPolicy p : {MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
    const SwitchContention c = HashedContention(p, 1000, loads);
    EXPECT_NEAR(c.jobs[0].occupancy, 1000, 1e-9);
    EXPECT_NEAR(c.jobs[0].collision, 2.0 / 3, 1e-12);
  }
}

TEST(HashedContentionTest, NoMemoryMeansEverythingCollides) {
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e8, .hold_s = 2e-6}};
  const SwitchContention c = HashedContention(MemoryPolicy::kEsa, 0, loads);
  EXPECT_DOUBLE_EQ(c.jobs[0].collision, 1);
  EXPECT_DOUBLE_EQ(c.jobs[0].unaggregated, 1);
  EXPECT_DOUBLE_EQ(c.occupancy, 0);
}

TEST(HashedContentionTest, StaticPoliciesAreUncontended) {
  std::vector<ChunkLoad> loads = {{.chunks_per_s = 1e9, .hold_s = 3e-6}};
  for (MemoryPolicy p : {MemoryPolicy::kSwitchMl, MemoryPolicy::kNoIna}) {
    const SwitchContention c = HashedContention(p, 10, loads);
    EXPECT_DOUBLE_EQ(c.jobs[0].unaggregated, 0);
    EXPECT_DOUBLE_EQ(c.occupancy, 0);
  }
}

TEST(HashedContentionTest, InvariantsOnRandomLoads) {
  uint64_t x = 99;
  auto uniform = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(x >> 11) / 9007199254740992.0;
  };
  for (int round = 0; round < 300; ++round) {
    std::vector<ChunkLoad> loads;
    const int n = 1 + static_cast<int>(uniform() * 20);
    for (int i = 0; i < n; ++i) {
      loads.push_back({.chunks_per_s = uniform() * 1e8,
                       .hold_s = uniform() * 1e-5,
                       .priority = static_cast<int>(uniform() * 5),
                       .active_fraction = round % 2 == 0 ? 1.0 : uniform()});
    }
    const int64_t cap = static_cast<int64_t>(uniform() * 3000);
    for (MemoryPolicy p : {MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
      const SwitchContention c = HashedContention(p, cap, loads);
      double sum = 0;
      for (size_t i = 0; i < loads.size(); ++i) {
        const ChunkContention& j = c.jobs[i];
        EXPECT_GE(j.collision, 0);
        EXPECT_LE(j.collision, 1);
        EXPECT_GE(j.unaggregated, j.collision - 1e-15);
        EXPECT_LE(j.unaggregated, 1);
        EXPECT_GE(j.occupancy, 0);
        sum += j.occupancy;
      }
      EXPECT_LE(sum, cap * (1 + 1e-9) + 1e-9);
      // ESA: the highest-priority group collides no more than under ATP.
      if (p == MemoryPolicy::kEsa) {
        const SwitchContention atp = HashedContention(MemoryPolicy::kAtp, cap, loads);
        int top = 0;
        for (const ChunkLoad& l : loads) top = std::max(top, l.priority);
        for (size_t i = 0; i < loads.size(); ++i) {
          if (loads[i].priority == top) {
            EXPECT_LE(c.jobs[i].collision, atp.jobs[i].collision + 1e-12);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace inac::scheduler
