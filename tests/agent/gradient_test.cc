// Synthetic gradients, fixed-point scaling of float files, and the report's figures.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "agent/gradient.h"
#include "agent/report.h"

namespace inac::agent {
namespace {

TEST(GradientTest, SyntheticIsDeterministicAndSmall) {
  std::vector<int32_t> a(500), b(500);
  FillSynthetic(7, "h1", 2, 100, a);
  FillSynthetic(7, "h1", 2, 100, b);
  EXPECT_EQ(a, b);
  int distinct_from_other_worker = 0;
  for (int i = 0; i < 500; ++i) {
    EXPECT_EQ(a[i], SyntheticLane(7, "h1", 2, 100 + i));
    EXPECT_LE(std::abs(a[i]), kSyntheticMax);
    if (a[i] != SyntheticLane(7, "h2", 2, 100 + i)) ++distinct_from_other_worker;
  }
  EXPECT_GT(distinct_from_other_worker, 400);
  int distinct_from_next_iteration = 0;
  for (int i = 0; i < 500; ++i) {
    if (a[i] != SyntheticLane(7, "h1", 3, 100 + i)) ++distinct_from_next_iteration;
  }
  EXPECT_GT(distinct_from_next_iteration, 400);
}

TEST(GradientTest, FixedPointRoundsToNearestAndSaturates) {
  bool sat = false;
  EXPECT_EQ(ToFixedPoint(1.0f, 16, &sat), 65536);
  EXPECT_EQ(ToFixedPoint(-0.5f, 16, &sat), -32768);
  EXPECT_EQ(ToFixedPoint(1.0f / 65536 * 0.75f, 16, &sat), 1);  // 0.75 rounds to 1
  EXPECT_EQ(ToFixedPoint(1.0f / 65536 * 0.25f, 16, &sat), 0);
  EXPECT_FALSE(sat);
  EXPECT_EQ(ToFixedPoint(40000.0f, 16, &sat), std::numeric_limits<int32_t>::max());
  EXPECT_TRUE(sat);
  sat = false;
  EXPECT_EQ(ToFixedPoint(-40000.0f, 16, &sat), std::numeric_limits<int32_t>::min());
  EXPECT_TRUE(sat);
  EXPECT_FLOAT_EQ(FromFixedPoint(98304, 16), 1.5f);
}

TEST(GradientTest, FilesRoundTrip) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("agent_gradient_" + std::to_string(::getpid())))
          .string();
  std::vector<int32_t> lanes = {0, 1, -1, 65536, -98304, std::numeric_limits<int32_t>::min()};
  ASSERT_TRUE(WriteGradientFile(path, lanes, FileFormat{}).ok());
  auto back = ReadGradientFile(path, FileFormat{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lanes, lanes);
  // Little-endian on disk.
  {
    std::ifstream in(path, std::ios::binary);
    char b[8];
    in.read(b, 8);
    EXPECT_EQ(static_cast<uint8_t>(b[4]), 1);
  }
  std::vector<int32_t> fixed = {65536, -32768, 3};
  ASSERT_TRUE(WriteGradientFile(path, fixed, FileFormat{true, 16}).ok());
  auto f = ReadGradientFile(path, FileFormat{true, 16});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->lanes, fixed);
  EXPECT_EQ(f->saturated, 0);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("abcde", 5);
  }
  EXPECT_EQ(ReadGradientFile(path, FileFormat{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
  EXPECT_EQ(ReadGradientFile(path, FileFormat{}).status().code(), absl::StatusCode::kNotFound);
}

TEST(ReportTest, BandwidthsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(AlgBwGBps(1000000, 1.0), 1.0);  // 1 MB in 1 ms = 1 GB/s
  EXPECT_DOUBLE_EQ(BusBwGBps(1.0, 4), 1.5);        // 2 (n - 1) / n
  EXPECT_DOUBLE_EQ(BusBwGBps(1.0, 1), 1.0);
  EXPECT_DOUBLE_EQ(InNetworkPercent(8, 6), 75.0);
  EXPECT_LT(InNetworkPercent(-1, -1), 0);
  IterationStats s{0, 1048576, 2.0, 3, 10, 5};
  EXPECT_NE(TableLine(s, 3).find("50.0"), std::string::npos);
  nlohmann::json j;
  AddSummaryJson({s}, 3, &j);
  EXPECT_EQ(j["retransmissions"], 3);
  EXPECT_DOUBLE_EQ(j["in_network_share"].get<double>(), 0.5);
  s.contributions = s.in_network = -1;
  nlohmann::json w;
  AddSummaryJson({s}, 3, &w);
  EXPECT_TRUE(w["in_network_share"].is_null());
}

// The array conversions give exactly what the one-value ones give (and count the clamped), for
// random values, halves (ties to even), zeros, the int32 edges, infinities and NaN.
TEST(GradientTest, FixedPointLanesEqualTheScalarConversion) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               0.5f,
                               1.5f,
                               2.5f,
                               -0.5f,
                               -1.5f,
                               1e-30f,
                               -1e-30f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               2147483520.0f,
                               -2147483648.0f,
                               2147483648.0f,
                               -2147483904.0f,
                               std::numeric_limits<float>::quiet_NaN()};
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 10000; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const float unit = static_cast<float>(x % 2000001) / 1000000.0f - 1.0f;  // [-1, 1]
    values.push_back(std::ldexp(unit, static_cast<int>(x >> 40) % 40 - 20));
  }
  for (int bits : {0, 8, 16, 30}) {
    std::vector<int32_t> lanes(values.size());
    const int64_t clamped = ToFixedPointLanes(values, bits, lanes);
    int64_t want_clamped = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(values[i])) {
        EXPECT_EQ(lanes[i], 0);
        ++want_clamped;
        continue;
      }
      bool sat = false;
      ASSERT_EQ(lanes[i], ToFixedPoint(values[i], bits, &sat)) << values[i] << " at " << bits;
      want_clamped += sat ? 1 : 0;
    }
    EXPECT_EQ(clamped, want_clamped) << bits;
    std::vector<float> back(lanes.size());
    FromFixedPointLanes(lanes, bits, back);
    for (size_t i = 0; i < lanes.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]),
                std::bit_cast<uint32_t>(FromFixedPoint(lanes[i], bits)))
          << lanes[i] << " at " << bits;
    }
  }
}

}  // namespace
}  // namespace inac::agent
