// The flow-level ("planner") form of the three memory policies (docs/memory.md section 2): how
// many of a switch's A_v aggregators each job that aggregates there is granted. The planner
// writes the result into core::JobPlan::aggregators (the southbound turns it into the job's
// aggregator region), and the flow evaluator caps a job's rate by it.
//
//   switchml (SwitchML, NSDI 2021, section 4): static pools at admission. In admission order, a
//            job that has no pool yet gets a full window W_j if it fits in what is left;
//            otherwise nothing (no INA on that switch until memory frees). Pools are kept for
//            the job's life: a later, more urgent job never takes one.
//   atp      (ATP, NSDI 2021, section 3.3): best-effort sharing of the whole memory by hashing.
//            The planner form is the expected share: W_j when sum W <= A_v, otherwise
//            floor(A_v * W_j / sum W) (proportional to demand, as uniform hashing is).
//   esa      (ESA, ICNP 2023, section 3): priority preemption. Jobs ranked by priority (higher
//            first, ties by lower job id) get min(W_j, what is left) in that order.
//   no_ina:  nothing.
// In every policy the grants on one switch sum to at most A_v. Deterministic; O(J log J) per
// switch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/job.h"
#include "scheduler/memory/aggregator_model.h"

namespace inac::scheduler {

// One job's claim on one switch's memory.
struct MemoryDemand {
  core::JobId job_id = 0;
  int64_t window = 0;     // W_j: aggregators it needs there to run at its line rate (>= 0)
  int priority = 0;       // higher first (esa)
  int64_t admission = 0;  // admission order, smaller first (switchml); ties by job id
  int64_t held = 0;       // aggregators it holds there now (switchml keeps a pool it holds)
};

// The policy behind one interface. Implementations are stateless: whatever must persist between
// plans (a SwitchML pool) comes in through MemoryDemand::held.
class AggregatorAllocator {
 public:
  virtual ~AggregatorAllocator() = default;
  virtual MemoryPolicy policy() const = 0;
  // Grants per demand, in the order of `demands`. Precondition: capacity >= 0, windows >= 0.
  // Postcondition: 0 <= grant_i <= window_i and sum grant_i <= capacity.
  virtual std::vector<int64_t> Allocate(int64_t capacity,
                                        std::span<const MemoryDemand> demands) const = 0;
};

class StaticPoolAllocator : public AggregatorAllocator {
 public:
  MemoryPolicy policy() const override { return MemoryPolicy::kSwitchMl; }
  std::vector<int64_t> Allocate(int64_t capacity,
                                std::span<const MemoryDemand> demands) const override;
};

class HashedSharingAllocator : public AggregatorAllocator {
 public:
  MemoryPolicy policy() const override { return MemoryPolicy::kAtp; }
  std::vector<int64_t> Allocate(int64_t capacity,
                                std::span<const MemoryDemand> demands) const override;
};

class PreemptivePriorityAllocator : public AggregatorAllocator {
 public:
  MemoryPolicy policy() const override { return MemoryPolicy::kEsa; }
  std::vector<int64_t> Allocate(int64_t capacity,
                                std::span<const MemoryDemand> demands) const override;
};

class NoAggregationAllocator : public AggregatorAllocator {
 public:
  MemoryPolicy policy() const override { return MemoryPolicy::kNoIna; }
  std::vector<int64_t> Allocate(int64_t capacity,
                                std::span<const MemoryDemand> demands) const override;
};

// The allocator of `policy`. Never null.
std::unique_ptr<AggregatorAllocator> MakeAllocator(MemoryPolicy policy);

}  // namespace inac::scheduler
