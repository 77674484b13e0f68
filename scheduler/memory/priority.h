// Job priorities for preemptive aggregator scheduling (ESA, ICNP 2023 / arXiv 2201.06398,
// section 3: priority scheduling in the data plane). ESA's paper leaves the priority rule to the
// operator; INAC's default (inferred; docs/memory.md section 3) is shortest remaining
// communication work first, with aging so that no job starves. The priority is the integer the
// southbound writes into the switch (JobAggregationIntent::priority): higher wins.
//
// Pure and deterministic.
#pragma once

#include <cstdint>
#include <memory>

namespace inac::scheduler {

// What a priority rule may look at. No clock: the caller supplies the job's age.
struct PriorityInput {
  int user_priority = 0;            // JobSpec::priority
  double remaining_comm_bytes = 0;  // remaining iterations x gradient bytes
  double age_s = 0;                 // time since the job arrived (>= 0)
};

// Largest priority any rule may return; the switch field is a non-negative int32.
inline constexpr int kMaxPriority = 0x7fffffff;

// A pluggable priority rule. Implementations must be pure: equal inputs give equal outputs, and
// the result is in [0, kMaxPriority].
class PriorityFunction {
 public:
  virtual ~PriorityFunction() = default;
  virtual int Priority(const PriorityInput& input) const = 0;
};

// Shortest remaining communication work first with aging:
//   priority = clamp(user_priority * user_step
//                    + max_work_class - work_class(remaining)
//                    + floor(age_s / aging_step_s), 0, kMaxPriority)
//   work_class(bytes) = floor(classes_per_doubling * log2(1 + bytes / 1 MiB)), capped at
//                       max_work_class.
// A job's class falls as it makes progress, and every aging_step_s in the system raises it by
// one, so a waiting job eventually outranks any newer arrival (no starvation). Ties are broken by
// the caller (INAC: lower job id first).
class ShortestRemainingWorkWithAging : public PriorityFunction {
 public:
  struct Options {
    int classes_per_doubling = 8;
    int max_work_class = 1000;
    double aging_step_s = 10.0;  // <= 0 disables aging
    int user_step = 1 << 20;
  };
  ShortestRemainingWorkWithAging() = default;
  explicit ShortestRemainingWorkWithAging(const Options& options) : options_(options) {}

  int Priority(const PriorityInput& input) const override;

 private:
  Options options_;
};

// Uses JobSpec::priority only (clamped to [0, kMaxPriority]); for operators who set priorities
// themselves and for tests.
class UserPriorityOnly : public PriorityFunction {
 public:
  int Priority(const PriorityInput& input) const override;
};

}  // namespace inac::scheduler
