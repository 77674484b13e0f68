#include "southbound/backoff.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace inac::southbound {

ExponentialBackoff::ExponentialBackoff(BackoffPolicy policy, std::function<double()> uniform01)
    : policy_(policy), uniform01_(std::move(uniform01)) {}

absl::Duration ExponentialBackoff::Next() {
  const double max_s = absl::ToDoubleSeconds(policy_.max);
  double base_s = absl::ToDoubleSeconds(policy_.initial) *
                  std::pow(policy_.multiplier, static_cast<double>(attempt_));
  base_s = std::min(base_s, max_s);
  if (attempt_ < 1000) ++attempt_;
  const double u = uniform01_ ? uniform01_() : 0.5;
  const double factor = 1.0 + policy_.jitter * (2.0 * u - 1.0);
  return absl::Seconds(std::clamp(base_s * factor, 0.0, max_s));
}

}  // namespace inac::southbound
