// The gradients the worker agent all-reduces: synthetic (reproducible by every host from the
// seed, so a worker can check the sum of all members exactly) or read from a file.
//
// Contract:
//  - SyntheticLane(seed, worker, iteration, lane) is a pure function with values in
//    [-kSyntheticMax, kSyntheticMax]: a sum over at most 255 members (the header's count) stays
//    far inside int32.
//  - Files are raw little-endian arrays: int32 lanes, or float32 values (`is_float`) turned into
//    fixed point as SwitchML does: lane = round-to-nearest(value * 2^scale_bits), saturated to
//    int32 (saturations are counted; NaN is an error). The sum of n workers' lanes must stay
//    within int32 for an exact result: |value| < 2^(31 - scale_bits) / n (e.g. scale 16, 8
//    workers: |value| < 4096). The switch and the PS add modulo 2^32; an overflow wraps.
//  - WriteGradientFile writes lanes back the same way (float: lane / 2^scale_bits).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace inac::agent {

inline constexpr int32_t kSyntheticMax = 1000;

int32_t SyntheticLane(uint64_t seed, const std::string& worker, int64_t iteration, int64_t lane);
// out[i] = SyntheticLane(seed, worker, iteration, first_lane + i).
void FillSynthetic(uint64_t seed, const std::string& worker, int64_t iteration, int64_t first_lane,
                   std::span<int32_t> out);

struct FileFormat {
  bool is_float = false;
  int scale_bits = 16;  // [0, 30]
};

struct FileGradient {
  std::vector<int32_t> lanes;
  int64_t saturated = 0;  // float values clamped to the int32 range
};

// Fixed point of one float value; sets *saturated when it was clamped.
int32_t ToFixedPoint(float value, int scale_bits, bool* saturated);
float FromFixedPoint(int32_t lane, int scale_bits);

// The same over arrays, at memory speed (plain loops the compiler vectorises; an AVX2 clone is
// picked at load time): out[i] = ToFixedPoint(values[i], scale_bits) for i < values.size()
// (`out` at least as long), returning how many were clamped; a NaN gives 0 and counts as clamped.
// FromFixedPointLanes: out[i] = FromFixedPoint(lanes[i], scale_bits), bit for bit.
int64_t ToFixedPointLanes(std::span<const float> values, int scale_bits, std::span<int32_t> out);
void FromFixedPointLanes(std::span<const int32_t> lanes, int scale_bits, std::span<float> out);

// InvalidArgument for a size that is not a multiple of 4, NaN values or scale_bits out of range;
// NotFound / Internal when the file cannot be read.
absl::StatusOr<FileGradient> ReadGradientFile(const std::string& path, const FileFormat& format);
absl::Status WriteGradientFile(const std::string& path, std::span<const int32_t> lanes,
                               const FileFormat& format);

// The gradient's size in lanes for an agent's options: the file's (`input`, when given) else
// `lanes`. InvalidArgument when it is < 1, or when `check` asks for the synthetic gradients of
// every member with a file input (the other members' files are unknown on this host).
absl::StatusOr<int64_t> GradientLanes(const std::vector<int32_t>* input, int64_t lanes, bool check);

}  // namespace inac::agent
