// The ring all-reduce (Rina) contract seen from the hosts: each worker's role in a ring job's plan,
// its ring neighbours and its rack's aggregation tag (GET /jobs/{id}/config, docs/rina.md).
//
// The plan shape it reads (scheduler::RingToJobPlan, docs/formats.md "Ring jobs"): JobPlan::ring
// holds the members in ring order (hosts: the agent of an abstract INA rack, or a plain worker);
// an AggregatorPlan (ToR -> agent) marks each abstract rack; FlowPlans whose aggregation node is
// that ToR and whose `ps` is its agent, over the path [worker, ToR], are the rack's workers.
//
// Tags of ring jobs: the aggregation of the abstract rack at position r among the plan's
// AggregatorPlans is RingRackTag(job, r, generation) = (generation mod 4) * 2^30 + job * 64 + r,
// r < kMaxRingRacks; the ring hops between members use RingHopTag(job, generation) = ... + 63.
// core::DeriveSwitchIntents programs both (docs/rina.md, "Data plane"): the rack tag as a PS
// tag whose PS is the rack's agent and whose workers are the rack's other workers, aggregated at
// the ToR; the hop tag as routes only (raw: member -> next member; upstream, the ring's
// acknowledgements: member -> previous member), no aggregation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {

inline constexpr int kMaxRingRacks = 63;
inline constexpr int kRingHopSlot = 63;

// Precondition: 0 <= rack < kMaxRingRacks, job ids below 2^24.
uint32_t RingRackTag(JobId job_id, int rack, uint32_t generation);
uint32_t RingHopTag(JobId job_id, uint32_t generation);

struct RingRole {
  std::string worker;
  // "agent" (an abstract rack's member on the ring), "member" (a plain worker on the ring) or
  // "rack-worker" (a worker of an abstract rack other than its agent: it sends to its ToR and
  // receives the results the ToR multicasts).
  std::string role;
  std::string prev;  // ring neighbours (host ids); empty for rack workers and 1-member rings
  std::string next;
  uint32_t prev_address = 0;  // core::NodeAddress; 0 without a topology
  uint32_t next_address = 0;
  std::string agent;      // the rack's agent (agents and rack workers), else empty
  std::string tor;        // the abstract rack's ToR, else empty
  uint32_t rack_tag = 0;  // RingRackTag of the rack, 0 for plain members
};

// One abstract INA rack of a ring job's plan: the AggregatorPlan at position `index` (ToR ->
// agent) and the rack's other workers (FlowPlans worker -> ToR with ps = the agent, path
// [worker, ToR]), in plan order.
struct RingRackPlan {
  int index = 0;
  std::string tor;
  std::string agent;
  std::vector<std::string> workers;    // without the agent
  std::vector<const FlowPlan*> flows;  // the workers' FlowPlans, pointers into the plan
};

// The abstract racks of `plan` in AggregatorPlan order (an agent named twice counts once). Empty
// when `plan` holds no ring.
std::vector<RingRackPlan> RingRacksOf(const JobPlan& plan);

// One role per worker of `job` in `spec_workers` order (workers the plan does not place get role
// "member" with no neighbours). `topology` may be null (addresses 0). Empty when `plan` holds no
// ring.
std::vector<RingRole> RingRolesOf(const JobPlan& plan, const std::vector<std::string>& spec_workers,
                                  const Topology* topology);

}  // namespace inac::core
