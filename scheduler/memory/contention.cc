#include "scheduler/memory/contention.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace inac::scheduler {

// Within a group of equal priority, with R = A - (occupancy of strictly higher priorities) left,
// each job holds occ_j = b_j d_j (1 - (A - R + O - occ_j) / A) where O is the group's total and
// b_j = 1 - q_j l_j. Solving for occ_j: occ_j = b_j d_j (R - O) / (A - b_j d_j), and summing gives
// O = S R / (1 + S) with S = sum b_j d_j / (A - b_j d_j): a closed form, no iteration. A job whose
// effective demand b_j d_j reaches A takes everything left (shared equally among such jobs).
SwitchContention HashedContention(MemoryPolicy policy, int64_t capacity,
                                  std::span<const ChunkLoad> loads) {
  SwitchContention result;
  result.jobs.resize(loads.size());
  if (policy != MemoryPolicy::kAtp && policy != MemoryPolicy::kEsa) return result;
  const double a = static_cast<double>(std::max<int64_t>(0, capacity));
  const bool esa = policy == MemoryPolicy::kEsa;

  // Groups of equal priority, highest first (atp: one group).
  std::vector<size_t> order(loads.size());
  std::iota(order.begin(), order.end(), 0);
  if (esa) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return loads[x].priority > loads[y].priority; });
  }
  double higher_occupancy = 0;   // held by strictly higher priorities
  double higher_chunk_rate = 0;  // offered by strictly higher priorities (they preempt)
  size_t begin = 0;
  while (begin < order.size()) {
    size_t end = begin + 1;
    while (end < order.size() &&
           (!esa || loads[order[end]].priority == loads[order[begin]].priority)) {
      ++end;
    }
    const double left = std::max(0.0, a - higher_occupancy);
    // Per job: offered in-flight chunks, demand d_j, preemption q_j, effective demand b_j d_j.
    double s = 0;
    int saturating = 0;
    for (size_t k = begin; k < end; ++k) {
      const size_t j = order[k];
      const ChunkLoad& load = loads[j];
      ChunkContention& c = result.jobs[j];
      const double offered = std::max(0.0, load.chunks_per_s) * std::max(0.0, load.hold_s);
      const double demand = std::min(offered, a);
      c.preempted = (esa && a > 0) ? 1.0 - std::exp(-load.hold_s * higher_chunk_rate / a) : 0.0;
      const double effective = std::clamp(load.active_fraction, 0.0, 1.0) * demand *
                               (1.0 - c.preempted * std::clamp(load.preemption_loss, 0.0, 1.0));
      if (a > 0 && effective >= a * (1 - 1e-12)) {
        ++saturating;
      } else if (a > 0) {
        s += effective / (a - effective);
      }
      c.occupancy = effective;  // temporarily: effective demand
    }
    double group_total = 0;
    if (saturating > 0) {
      group_total = left;
      for (size_t k = begin; k < end; ++k) {
        ChunkContention& c = result.jobs[order[k]];
        c.occupancy = (c.occupancy >= a * (1 - 1e-12)) ? left / saturating : 0.0;
      }
    } else {
      group_total = s * left / (1 + s);
      for (size_t k = begin; k < end; ++k) {
        ChunkContention& c = result.jobs[order[k]];
        c.occupancy = a > 0 ? c.occupancy * (left - group_total) / (a - c.occupancy) : 0.0;
      }
    }
    for (size_t k = begin; k < end; ++k) {
      const size_t j = order[k];
      const ChunkLoad& load = loads[j];
      ChunkContention& c = result.jobs[j];
      const double offered = std::max(0.0, load.chunks_per_s) * std::max(0.0, load.hold_s);
      if (offered <= 0) {
        c = ChunkContention{};
        continue;
      }
      const double demand = std::min(offered, a);
      // Collision: the hashed aggregator is held by an occupant this chunk cannot preempt, or
      // the job's own window overflows the memory.
      const double blocked = a > 0 ? (higher_occupancy + group_total - c.occupancy) / a : 1.0;
      c.collision =
          std::clamp(1.0 - (1.0 - std::clamp(blocked, 0.0, 1.0)) * demand / offered, 0.0, 1.0);
      c.unaggregated = c.collision +
                       (1 - c.collision) * c.preempted * std::clamp(load.preemption_loss, 0.0, 1.0);
      c.preemptions_per_s = std::clamp(load.active_fraction, 0.0, 1.0) * load.chunks_per_s *
                            (1 - c.collision) * c.preempted;
    }
    higher_occupancy += group_total;
    for (size_t k = begin; k < end; ++k)
      higher_chunk_rate += std::clamp(loads[order[k]].active_fraction, 0.0, 1.0) *
                           std::max(0.0, loads[order[k]].chunks_per_s);
    begin = end;
  }
  for (const ChunkContention& c : result.jobs) result.occupancy += c.occupancy;
  result.occupancy = std::min(result.occupancy, a);
  return result;
}

}  // namespace inac::scheduler
