// The agents' clock: microseconds of std::chrono::steady_clock (monotonic; for timeouts, round
// trips and the reports' durations, never for wall time).
#pragma once

#include <chrono>
#include <cstdint>

namespace inac::agent {

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace inac::agent
