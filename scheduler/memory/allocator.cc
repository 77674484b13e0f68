#include "scheduler/memory/allocator.h"

#include <algorithm>
#include <numeric>

namespace inac::scheduler {
namespace {

std::vector<size_t> Order(std::span<const MemoryDemand> demands, auto less) {
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return less(demands[a], demands[b]); });
  return order;
}

}  // namespace

std::vector<int64_t> StaticPoolAllocator::Allocate(int64_t capacity,
                                                   std::span<const MemoryDemand> demands) const {
  std::vector<int64_t> grants(demands.size(), 0);
  int64_t left = capacity;
  // Existing pools first: they are never taken away (no preemption). A pool never grows.
  for (size_t i = 0; i < demands.size(); ++i) {
    const int64_t keep = std::min(demands[i].held, demands[i].window);
    if (keep > 0 && keep <= left) {
      grants[i] = keep;
      left -= keep;
    }
  }
  // Then admissions, first come first served, all or nothing.
  const auto order = Order(demands, [](const MemoryDemand& a, const MemoryDemand& b) {
    if (a.admission != b.admission) return a.admission < b.admission;
    return a.job_id < b.job_id;
  });
  for (size_t i : order) {
    if (grants[i] > 0 || demands[i].window <= 0) continue;
    if (demands[i].window <= left) {
      grants[i] = demands[i].window;
      left -= grants[i];
    }
  }
  return grants;
}

std::vector<int64_t> HashedSharingAllocator::Allocate(int64_t capacity,
                                                      std::span<const MemoryDemand> demands) const {
  std::vector<int64_t> grants(demands.size(), 0);
  int64_t total = 0;
  for (const MemoryDemand& d : demands) total += std::max<int64_t>(0, d.window);
  for (size_t i = 0; i < demands.size(); ++i) {
    const int64_t w = std::max<int64_t>(0, demands[i].window);
    if (total <= capacity) {
      grants[i] = w;
    } else {
      // floor(capacity * w / total) without overflow for realistic sizes.
      grants[i] = static_cast<int64_t>(static_cast<__int128>(capacity) * w / total);
    }
  }
  return grants;
}

std::vector<int64_t> PreemptivePriorityAllocator::Allocate(
    int64_t capacity, std::span<const MemoryDemand> demands) const {
  std::vector<int64_t> grants(demands.size(), 0);
  const auto order = Order(demands, [](const MemoryDemand& a, const MemoryDemand& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.job_id < b.job_id;
  });
  int64_t left = capacity;
  for (size_t i : order) {
    grants[i] = std::clamp<int64_t>(demands[i].window, 0, left);
    left -= grants[i];
  }
  return grants;
}

std::vector<int64_t> NoAggregationAllocator::Allocate(int64_t,
                                                      std::span<const MemoryDemand> demands) const {
  return std::vector<int64_t>(demands.size(), 0);
}

std::unique_ptr<AggregatorAllocator> MakeAllocator(MemoryPolicy policy) {
  switch (policy) {
    case MemoryPolicy::kSwitchMl:
      return std::make_unique<StaticPoolAllocator>();
    case MemoryPolicy::kAtp:
      return std::make_unique<HashedSharingAllocator>();
    case MemoryPolicy::kEsa:
      return std::make_unique<PreemptivePriorityAllocator>();
    case MemoryPolicy::kNoIna:
      break;
  }
  return std::make_unique<NoAggregationAllocator>();
}

}  // namespace inac::scheduler
