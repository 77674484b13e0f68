// The gradient layout (agent/layout.h): PS shards in tag order, ranges within shards, whole
// chunks of 62 lanes, every lane exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "agent/layout.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

JobConfig::Tag Tag(uint32_t tag, const std::string& ps, double share, double begin, double end) {
  JobConfig::Tag t;
  t.tag = tag;
  t.ps = ps;
  t.ps_address = 0x0A000000u + tag;
  t.share = share;
  t.begin = begin;
  t.end = end;
  return t;
}

// Every lane of [0, lanes) belongs to exactly one (tag, chunk); chunks are whole except the
// gradient's last one; a tag's chunks are contiguous.
void ExpectCoversExactlyOnce(const Layout& layout) {
  std::vector<int> seen(static_cast<size_t>(layout.lanes), 0);
  int64_t chunks = 0;
  for (const TagSpan& s : layout.tags) {
    chunks += s.chunks;
    EXPECT_EQ(s.first_lane, s.first_chunk * 62);
    int64_t lanes = 0;
    for (int64_t k = 0; k < s.chunks; ++k) {
      const int64_t b = s.ChunkBegin(k), e = s.ChunkEnd(k);
      ASSERT_LE(b, e);
      if (e - b < 62) {
        EXPECT_EQ(e, layout.lanes) << "only the gradient's last chunk is short";
      }
      for (int64_t l = b; l < e; ++l) ++seen[static_cast<size_t>(l)];
      lanes += e - b;
    }
    EXPECT_EQ(lanes, s.lanes);
  }
  EXPECT_EQ(chunks, layout.chunks);
  for (size_t l = 0; l < seen.size(); ++l) ASSERT_EQ(seen[l], 1) << "lane " << l;
}

TEST(LayoutTest, OnePsOneTag) {
  JobConfig c;
  c.tags = {Tag(64, "h4", 1, 0, 1)};
  auto l = ComputeLayout(c, 1000);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->chunks, 17);  // ceil(1000 / 62)
  ASSERT_EQ(l->tags.size(), 1u);
  EXPECT_EQ(l->tags[0].chunks, 17);
  EXPECT_EQ(l->tags[0].lanes, 1000);
  EXPECT_EQ(l->tags[0].ChunkBegin(16), 992);
  EXPECT_EQ(l->tags[0].ChunkEnd(16), 1000);
  ExpectCoversExactlyOnce(*l);
}

TEST(LayoutTest, ShardsInOrderOfFirstAppearanceRangesByBegin) {
  JobConfig c;
  // PS h5 appears first (its second range), then h6, then h5's first range.
  c.tags = {Tag(73, "h5", 0.6, 0.5, 1), Tag(80, "h6", 0.4, 0, 1), Tag(72, "h5", 0.6, 0, 0.5)};
  auto l = ComputeLayout(c, 100 * 62);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->chunks, 100);
  // h5: chunks [0, 60): its range [0, .5) -> [0, 30), [.5, 1) -> [30, 60); h6: [60, 100).
  EXPECT_EQ(l->tags[2].tag, 72u);
  EXPECT_EQ(l->tags[2].first_chunk, 0);
  EXPECT_EQ(l->tags[2].chunks, 30);
  EXPECT_EQ(l->tags[0].first_chunk, 30);
  EXPECT_EQ(l->tags[0].chunks, 30);
  EXPECT_EQ(l->tags[1].first_chunk, 60);
  EXPECT_EQ(l->tags[1].chunks, 40);
  EXPECT_EQ(l->tags[1].first_lane, 60 * 62);
  ExpectCoversExactlyOnce(*l);
}

TEST(LayoutTest, SharesAreNormalisedAndTheLastPsTakesTheRest) {
  JobConfig c;
  c.tags = {Tag(1, "a", 0.3, 0, 1), Tag(2, "b", 0.3, 0, 1), Tag(3, "c", 0.3, 0, 1)};
  auto l = ComputeLayout(c, 10 * 62 + 5);  // 11 chunks, the last one 5 lanes
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->chunks, 11);
  EXPECT_EQ(l->tags[0].chunks, 4);  // round(11 / 3)
  EXPECT_EQ(l->tags[1].chunks, 3);  // round(22 / 3) - 4
  EXPECT_EQ(l->tags[2].chunks, 4);  // the rest
  EXPECT_EQ(l->tags[2].lanes, 3 * 62 + 5);
  ExpectCoversExactlyOnce(*l);
}

TEST(LayoutTest, TinyGradientsLeaveSomeTagsEmpty) {
  JobConfig c;
  c.tags = {Tag(1, "a", 0.5, 0, 0.5), Tag(2, "a", 0.5, 0.5, 1), Tag(3, "b", 0.5, 0, 1)};
  for (int64_t lanes : {1, 10, 62, 63, 124, 125}) {
    auto l = ComputeLayout(c, lanes);
    ASSERT_TRUE(l.ok()) << l.status();
    ExpectCoversExactlyOnce(*l);
  }
}

TEST(LayoutTest, RandomConfigsCoverEveryLaneOnce) {
  std::mt19937 rng(12);
  for (int round = 0; round < 300; ++round) {
    JobConfig c;
    const int pss = 1 + static_cast<int>(rng() % 4);
    uint32_t tag = 1;
    std::vector<JobConfig::Tag> tags;
    for (int p = 0; p < pss; ++p) {
      const double share = 0.05 + (rng() % 100) / 100.0 * 0.95;
      const int ranges = 1 + static_cast<int>(rng() % 8);
      std::vector<double> cuts = {0, 1};
      for (int r = 1; r < ranges; ++r) cuts.push_back((rng() % 999 + 1) / 1000.0);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      for (size_t r = 0; r + 1 < cuts.size(); ++r) {
        tags.push_back(Tag(tag++, "ps" + std::to_string(p), share, cuts[r], cuts[r + 1]));
      }
    }
    std::shuffle(tags.begin(), tags.end(), rng);
    c.tags = tags;
    const int64_t lanes = 1 + static_cast<int64_t>(rng() % 20000);
    auto l = ComputeLayout(c, lanes);
    ASSERT_TRUE(l.ok()) << l.status();
    ExpectCoversExactlyOnce(*l);
    // Each PS's tags form one contiguous shard.
    for (int p = 0; p < pss; ++p) {
      int64_t lo = INT64_MAX, hi = 0, sum = 0;
      for (size_t i = 0; i < c.tags.size(); ++i) {
        if (c.tags[i].ps != "ps" + std::to_string(p)) continue;
        lo = std::min(lo, l->tags[i].first_chunk);
        hi = std::max(hi, l->tags[i].first_chunk + l->tags[i].chunks);
        sum += l->tags[i].chunks;
      }
      if (sum > 0) {
        EXPECT_EQ(hi - lo, sum);
      }
    }
  }
}

TEST(LayoutTest, RefusesRangesThatDoNotTile) {
  JobConfig c;
  EXPECT_EQ(ComputeLayout(c, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  c.tags = {Tag(1, "a", 1, 0, 0.5)};
  EXPECT_EQ(ComputeLayout(c, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  c.tags = {Tag(1, "a", 1, 0, 0.5), Tag(2, "a", 1, 0.6, 1)};  // gap
  EXPECT_EQ(ComputeLayout(c, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  c.tags = {Tag(1, "a", 1, 0, 0.7), Tag(2, "a", 1, 0.5, 1)};  // overlap
  EXPECT_EQ(ComputeLayout(c, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  c.tags = {Tag(1, "a", 0.5, 0, 0.5), Tag(2, "a", 0.4, 0.5, 1)};  // shares differ
  EXPECT_EQ(ComputeLayout(c, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  c.tags = {Tag(1, "a", 1, 0, 1)};
  EXPECT_EQ(ComputeLayout(c, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChunkOwnersTest, EveryChunkHasTheTagThatCarriesIt) {
  using testing::DirectTag;
  JobConfig c;
  c.job_id = 3;
  c.tags = {DirectTag(193, "psb", 11, 0.5, 0.5, 1, {"w1"}, {2}),
            DirectTag(192, "psa", 10, 0.5, 0, 1, {"w1"}, {2}),
            DirectTag(194, "psb", 11, 0.5, 0, 0.5, {"w1"}, {2})};
  auto l = ComputeLayout(c, 620);  // 10 chunks: psb [0, 5) cut at 2.5 -> [0, 3) [3, 5); psa [5, 10)
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(ChunkOwners(*l), (std::vector<uint32_t>{2, 2, 2, 0, 0, 1, 1, 1, 1, 1}));
}

TEST(CheckContinuationTest, SamePsAndMembersPerChunkContinueWhateverTheCut) {
  using testing::DirectTag;
  JobConfig from;
  from.job_id = 3;
  from.tags = {DirectTag(193, "psb", 11, 0.5, 0, 1, {"w1", "w2"}, {2, 3}),
               DirectTag(192, "psa", 10, 0.5, 0, 1, {"w1", "w2"}, {2, 3})};
  const auto a = ComputeLayout(from, 1000);
  ASSERT_TRUE(a.ok());
  auto check = [&](const JobConfig& to) {
    auto b = ComputeLayout(to, 1000);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? CheckContinuation(from, *a, to, *b) : b.status();
  };
  // New tag values (a new generation), members in another order: continues.
  JobConfig to = from;
  to.plan_version = 9;
  for (auto& t : to.tags) t.tag += 1u << 30;
  std::reverse(to.tags[1].members.begin(), to.tags[1].members.end());
  EXPECT_TRUE(check(to).ok()) << check(to);
  // psb's shard cut into three ranges, psa's into two (grid-split re-plans): continues.
  JobConfig recut = to;
  recut.tags = {DirectTag(193 + (1u << 30), "psb", 11, 0.5, 0, 0.25, {"w2", "w1"}, {3, 2}),
                DirectTag(192 + (1u << 30), "psa", 10, 0.5, 0.5, 1, {"w1", "w2"}, {2, 3}),
                DirectTag(195 + (1u << 30), "psb", 11, 0.5, 0.25, 0.6, {"w1", "w2"}, {2, 3}),
                DirectTag(196 + (1u << 30), "psb", 11, 0.5, 0.6, 1, {"w1", "w2"}, {2, 3}),
                DirectTag(197 + (1u << 30), "psa", 10, 0.5, 0, 0.5, {"w1", "w2"}, {2, 3})};
  EXPECT_TRUE(check(recut).ok()) << check(recut);
  // The PSs in the other order: chunk 0 would go to psa.
  JobConfig swapped = to;
  std::swap(swapped.tags[0], swapped.tags[1]);
  EXPECT_EQ(check(swapped).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      check(swapped).message().find("gradient chunk 0 to PS psa at 0.0.0.10, not psb at 0.0.0.11"),
      std::string::npos)
      << check(swapped);
  // Another share, another PS address, another member, a member's new address, another job.
  JobConfig other = to;
  other.tags[0].share = 0.7;
  other.tags[1].share = 0.3;
  EXPECT_EQ(check(other).code(), absl::StatusCode::kFailedPrecondition);
  other = to;
  other.tags[1].ps_address = 12;
  EXPECT_EQ(check(other).code(), absl::StatusCode::kFailedPrecondition);
  other = to;
  other.tags[0].members[1].worker = "w9";
  EXPECT_NE(check(other).message().find("other members"), std::string::npos) << check(other);
  other = to;
  other.tags[0].members[1].address = 9;
  EXPECT_EQ(check(other).code(), absl::StatusCode::kFailedPrecondition);
  other = to;
  other.job_id = 4;
  EXPECT_EQ(check(other).code(), absl::StatusCode::kFailedPrecondition);
  // A tag value kept with other lanes (a re-cut without a new generation): refused.
  JobConfig same_value = from;
  same_value.tags[0].end = 0.5;
  same_value.tags.push_back(DirectTag(198, "psb", 11, 0.5, 0.5, 1, {"w1", "w2"}, {2, 3}));
  EXPECT_NE(check(same_value).message().find("tag 193 other lanes"), std::string::npos)
      << check(same_value);
  // Another gradient size: refused.
  auto longer = ComputeLayout(to, 2000);
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(CheckContinuation(from, *a, to, *longer).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace inac::agent
