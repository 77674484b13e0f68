#include "agent/gradient.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "agent/mix.h"

namespace inac::agent {
namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

int32_t SyntheticLane(uint64_t seed, const std::string& worker, int64_t iteration, int64_t lane) {
  const uint64_t base =
      Mix64(Mix64(seed) ^ Fnv1a(worker)) ^ Mix64(static_cast<uint64_t>(iteration));
  const uint64_t h = Mix64(base + static_cast<uint64_t>(lane));
  return static_cast<int32_t>(h % (2 * kSyntheticMax + 1)) - kSyntheticMax;
}

void FillSynthetic(uint64_t seed, const std::string& worker, int64_t iteration, int64_t first_lane,
                   std::span<int32_t> out) {
  const uint64_t base =
      Mix64(Mix64(seed) ^ Fnv1a(worker)) ^ Mix64(static_cast<uint64_t>(iteration));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t h = Mix64(base + static_cast<uint64_t>(first_lane) + i);
    out[i] = static_cast<int32_t>(h % (2 * kSyntheticMax + 1)) - kSyntheticMax;
  }
}

int32_t ToFixedPoint(float value, int scale_bits, bool* saturated) {
  const double scaled = std::nearbyint(std::ldexp(static_cast<double>(value), scale_bits));
  if (scaled > std::numeric_limits<int32_t>::max()) {
    *saturated = true;
    return std::numeric_limits<int32_t>::max();
  }
  if (scaled < std::numeric_limits<int32_t>::min()) {
    *saturated = true;
    return std::numeric_limits<int32_t>::min();
  }
  return static_cast<int32_t>(scaled);
}

float FromFixedPoint(int32_t lane, int scale_bits) {
  return static_cast<float>(std::ldexp(static_cast<double>(lane), -scale_bits));
}

namespace {

__attribute__((target_clones("avx2", "default"))) int64_t ToFixedPointLoop(
    const float* __restrict values, size_t n, float scale, int32_t* __restrict out) {
  constexpr float kTwo31 = 2147483648.0f;  // 2^31, exactly
  int64_t clamped = 0;
  for (size_t i = 0; i < n; ++i) {
    // value * 2^s is exact (a power of two); rint rounds half to even, as nearbyint does.
    const float x = __builtin_rintf(values[i] * scale);
    const bool over = x >= kTwo31;
    const bool under = x < -kTwo31;
    const bool nan = x != x;
    int32_t v = static_cast<int32_t>(over || under || nan ? 0.0f : x);
    v = over ? std::numeric_limits<int32_t>::max() : v;
    v = under ? std::numeric_limits<int32_t>::min() : v;
    clamped += (over || under || nan) ? 1 : 0;
    out[i] = v;
  }
  return clamped;
}

__attribute__((target_clones("avx2", "default"))) void FromFixedPointLoop(
    const int32_t* __restrict lanes, size_t n, float inverse_scale, float* __restrict out) {
  // int32 -> float rounds once; the power-of-two scale is exact: as the double path does.
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(lanes[i]) * inverse_scale;
}

}  // namespace

int64_t ToFixedPointLanes(std::span<const float> values, int scale_bits, std::span<int32_t> out) {
  return ToFixedPointLoop(values.data(), std::min(values.size(), out.size()),
                          std::ldexp(1.0f, scale_bits), out.data());
}

void FromFixedPointLanes(std::span<const int32_t> lanes, int scale_bits, std::span<float> out) {
  FromFixedPointLoop(lanes.data(), std::min(lanes.size(), out.size()),
                     std::ldexp(1.0f, -scale_bits), out.data());
}

absl::StatusOr<FileGradient> ReadGradientFile(const std::string& path, const FileFormat& format) {
  if (format.scale_bits < 0 || format.scale_bits > 30) {
    return absl::InvalidArgumentError("--scale-bits: must be in [0, 30]");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return errno == ENOENT ? absl::NotFoundError(absl::StrCat(path, ": no such file"))
                           : absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (bytes.size() % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.size(), " bytes, not a whole number of 4-byte lanes"));
  }
  FileGradient g;
  g.lanes.resize(bytes.size() / 4);
  std::vector<float> values(format.is_float ? g.lanes.size() : 0);
  for (size_t i = 0; i < g.lanes.size(); ++i) {
    const uint8_t* p = &bytes[4 * i];
    const uint32_t u = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                       (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    if (!format.is_float) {
      g.lanes[i] = static_cast<int32_t>(u);
      continue;
    }
    values[i] = std::bit_cast<float>(u);
    if (std::isnan(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": value ", i, " is NaN"));
    }
  }
  if (format.is_float) g.saturated = ToFixedPointLanes(values, format.scale_bits, g.lanes);
  return g;
}

absl::Status WriteGradientFile(const std::string& path, std::span<const int32_t> lanes,
                               const FileFormat& format) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  std::vector<uint8_t> bytes(lanes.size() * 4);
  std::vector<float> values(format.is_float ? lanes.size() : 0);
  if (format.is_float) FromFixedPointLanes(lanes, format.scale_bits, values);
  for (size_t i = 0; i < lanes.size(); ++i) {
    const uint32_t u =
        format.is_float ? std::bit_cast<uint32_t>(values[i]) : static_cast<uint32_t>(lanes[i]);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(u >> (8 * b));
  }
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GradientLanes(const std::vector<int32_t>* input, int64_t lanes,
                                      bool check) {
  const int64_t n = input != nullptr ? static_cast<int64_t>(input->size()) : lanes;
  if (n < 1) return absl::InvalidArgumentError("gradient: needs at least one lane");
  if (check && input != nullptr) {
    return absl::InvalidArgumentError(
        "--check: needs the synthetic gradient (other members' files are unknown here)");
  }
  return n;
}

}  // namespace inac::agent
