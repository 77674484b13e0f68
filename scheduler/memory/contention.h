// Analytical, flow-level model of chunk-level contention for hashed aggregator memory (ATP and
// ESA; SwitchML's static pools have none). Used by the simulator; derivation in docs/memory.md.
//
// On one switch with A aggregators, job j offers c_j chunks/s (per-worker rate / chunk bytes),
// each chunk addressed to an aggregator by a uniform hash of (job, sequence number) and held
// h_j seconds if it gets one. Its demand is d_j = min(c_j h_j, A) aggregators (Little's law; a
// job cannot hold more than the memory, the excess overflows).
//   ATP (ATP, NSDI 2021, section 3.3): a chunk whose aggregator is held by another job collides
//     and all its n_j fragments go to the PS unaggregated:
//       p_j = 1 - (1 - O_{-j} / A) * d_j / (c_j h_j),   O_{-j} = sum_{i != j} occ_i,
//       occ_j = c_j h_j (1 - p_j).
//   ESA (ESA, ICNP 2023, section 3.2): a chunk takes an aggregator held by a lower-priority job
//     (preemption: the old partial aggregate goes to the old job's PS); it collides only with
//     occupants of higher or equal priority:
//       p_j = 1 - (1 - H_j / A) * d_j / (c_j h_j),  H_j = occupancy of the others with
//                                                    priority >= j's,
//       q_j = 1 - exp(-h_j * sum_{i: prio_i > prio_j} c_i / A)   (held chunk is preempted),
//       occ_j = c_j h_j (1 - p_j) (1 - q_j l_j).
//     A preempted chunk sends its partial sum (one packet, as the aggregate would) and the
//     fragments still to come to the PS: it loses l_j = ChunkLoad::preemption_loss of an
//     aggregation (1/2 for evenly spread fragments; less with a straggler tail, where a chunk
//     is mostly complete while it waits: docs/memory.md "Stragglers").
// On/off traffic (ChunkLoad::active_fraction f_j): a job's chunks meet the others' time-average
// occupancy (independent phases), so every formula above holds with d_j, c_j replaced by
// f_j d_j, f_j c_j where they describe what the job leaves for others (occupancy, preemption
// hazard); p_j and q_j stay per chunk sent.
// Unaggregated fraction psi_j = p_j + (1 - p_j) q_j l_j: per chunk the PS receives
// (1 - psi_j) + psi_j n_j streams' worth of bytes. At the fixed point sum occ_j <= A.
// Solved by Gauss-Seidel sweeps in priority order (exact in one sweep when priorities are
// distinct); deterministic; O(J^2) per sweep.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/memory/aggregator_model.h"

namespace inac::scheduler {

// One job's offered load at one switch.
struct ChunkLoad {
  double chunks_per_s = 0;  // c_j >= 0, while the job communicates
  double hold_s = 0;        // h_j >= 0
  int priority = 0;         // esa only
  // f_j in [0, 1]: fraction of time the job communicates (on/off traffic; 1 = always). Other
  // jobs' chunks meet its mean occupancy f_j * occ_j, and its chunks preempt at mean rate
  // f_j * c_j; its own chunks are sent only while it is on.
  double active_fraction = 1;
  // esa: fraction of a preempted chunk's aggregation lost -- the other fragments still to come
  // when it is preempted (they go to the PS; the partial sum is one packet like the aggregate).
  // 1/2 for evenly spread fragments; AggregationTiming::remaining_at_preemption with stragglers.
  double preemption_loss = 0.5;
};

struct ChunkContention {
  double collision = 0;          // p_j: fraction of chunks that found their aggregator taken
  double preempted = 0;          // q_j: fraction of placed chunks preempted before completion (esa)
  double unaggregated = 0;       // psi_j: equivalent fraction of chunks not aggregated in network
  double occupancy = 0;          // time-average aggregators held (f_j * occ_j)
  double preemptions_per_s = 0;  // time-average chunks of this job preempted per second
};

struct SwitchContention {
  std::vector<ChunkContention> jobs;  // in input order
  double occupancy = 0;               // sum occ_j (<= capacity)
};

// Contention of `loads` on a switch of `capacity` aggregators under `policy` (kAtp or kEsa; for
// kSwitchMl and kNoIna every job is returned uncontended with zero occupancy: static pools are
// modelled by the allocator, not here). Precondition: capacity >= 0.
SwitchContention HashedContention(MemoryPolicy policy, int64_t capacity,
                                  std::span<const ChunkLoad> loads);

}  // namespace inac::scheduler
