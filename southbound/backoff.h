// Exponential backoff with jitter for reconnecting to a switch. Deterministic for a given random
// source: delay(n) = min(max, initial * multiplier^n) * (1 + jitter * (2u - 1)), u in [0, 1)
// drawn from the injected source, clamped to [0, max].
#pragma once

#include <functional>

#include "absl/time/time.h"

namespace inac::southbound {

struct BackoffPolicy {
  absl::Duration initial = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(10);
  double multiplier = 2.0;
  double jitter = 0.2;  // +-20%
};

// Thread safety: not thread-safe; one owner (the session thread).
class ExponentialBackoff {
 public:
  // `uniform01` returns values in [0, 1); it is called once per Next().
  ExponentialBackoff(BackoffPolicy policy, std::function<double()> uniform01);

  // The delay before the next attempt; each call grows the base delay.
  absl::Duration Next();
  // Back to the initial delay (after a successful connection).
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  BackoffPolicy policy_;
  std::function<double()> uniform01_;
  int attempt_ = 0;
};

}  // namespace inac::southbound
