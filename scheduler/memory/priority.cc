#include "scheduler/memory/priority.h"

#include <algorithm>
#include <cmath>

namespace inac::scheduler {

int ShortestRemainingWorkWithAging::Priority(const PriorityInput& input) const {
  const double mib = std::max(0.0, input.remaining_comm_bytes) / (1024.0 * 1024.0);
  double work_class = std::floor(options_.classes_per_doubling * std::log2(1.0 + mib));
  work_class = std::min(work_class, static_cast<double>(options_.max_work_class));
  double aging = 0;
  if (options_.aging_step_s > 0)
    aging = std::floor(std::max(0.0, input.age_s) / options_.aging_step_s);
  const double value = static_cast<double>(input.user_priority) * options_.user_step +
                       (options_.max_work_class - work_class) + aging;
  return static_cast<int>(std::clamp(value, 0.0, static_cast<double>(kMaxPriority)));
}

int UserPriorityOnly::Priority(const PriorityInput& input) const {
  return std::clamp(input.user_priority, 0, kMaxPriority);
}

}  // namespace inac::scheduler
