// The agents' clock: microseconds of std::chrono::steady_clock (monotonic; for timeouts, round
// trips and the reports' durations, never for wall time), and a thread's CPU time.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace inac::agent {

inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU time (user + system) the calling thread has used, in microseconds.
inline int64_t ThreadCpuUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace inac::agent
