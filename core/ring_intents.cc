#include "core/ring_intents.h"

#include <algorithm>
#include <map>
#include <set>

namespace inac::core {

uint32_t RingRackTag(JobId job_id, int rack, uint32_t generation) {
  return ((generation & 3u) << kTagGenerationShift) |
         (static_cast<uint32_t>(job_id) * 64u + static_cast<uint32_t>(rack));
}

uint32_t RingHopTag(JobId job_id, uint32_t generation) {
  return RingRackTag(job_id, kRingHopSlot, generation);
}

std::vector<RingRackPlan> RingRacksOf(const JobPlan& plan) {
  std::vector<RingRackPlan> racks;
  if (plan.ring.empty()) return racks;
  std::map<std::string, size_t> rack_of_agent;
  for (const AggregatorPlan& a : plan.aggregator_paths) {
    if (rack_of_agent.count(a.ps)) continue;
    rack_of_agent[a.ps] = racks.size();
    RingRackPlan r;
    r.index = static_cast<int>(racks.size());
    r.tor = a.switch_id;
    r.agent = a.ps;
    racks.push_back(std::move(r));
  }
  std::set<std::string> tors, placed;
  for (const RingRackPlan& r : racks) tors.insert(r.tor);
  for (const FlowPlan& f : plan.flows) {
    if (tors.count(f.worker)) continue;  // a ring hop leaving an abstract rack's ToR
    auto rack = rack_of_agent.find(f.ps);
    if (rack == rack_of_agent.end()) continue;
    RingRackPlan& r = racks[rack->second];
    if (r.tor != f.aggregation_node || f.path.size() != 2 || f.path[0] != f.worker ||
        f.path[1] != r.tor || f.worker == r.agent || !placed.insert(f.worker).second) {
      continue;
    }
    r.workers.push_back(f.worker);
    r.flows.push_back(&f);
  }
  return racks;
}

std::vector<RingRole> RingRolesOf(const JobPlan& plan, const std::vector<std::string>& spec_workers,
                                  const Topology* topology) {
  std::vector<RingRole> out;
  if (plan.ring.empty()) return out;
  // Abstract racks: agent -> (ToR, rack index).
  std::map<std::string, std::pair<std::string, int>> rack_of_agent;
  std::map<std::string, std::string> agent_of_worker;
  for (const RingRackPlan& r : RingRacksOf(plan)) {
    rack_of_agent[r.agent] = {r.tor, r.index};
    for (const std::string& w : r.workers) agent_of_worker[w] = r.agent;
  }
  auto address = [&](const std::string& id) {
    return topology != nullptr ? NodeAddress(*topology, id) : 0u;
  };
  const int n = static_cast<int>(plan.ring.size());
  for (const std::string& w : spec_workers) {
    RingRole role;
    role.worker = w;
    const auto pos = std::find(plan.ring.begin(), plan.ring.end(), w);
    auto agent = agent_of_worker.find(w);
    if (pos != plan.ring.end()) {
      const int i = static_cast<int>(pos - plan.ring.begin());
      role.role = rack_of_agent.count(w) ? "agent" : "member";
      if (n > 1) {
        role.prev = plan.ring[(i + n - 1) % n];
        role.next = plan.ring[(i + 1) % n];
        role.prev_address = address(role.prev);
        role.next_address = address(role.next);
      }
      if (rack_of_agent.count(w)) role.agent = w;
    } else if (agent != agent_of_worker.end()) {
      role.role = "rack-worker";
      role.agent = agent->second;
    } else {
      role.role = "member";
    }
    if (!role.agent.empty()) {
      const auto& [tor, index] = rack_of_agent.at(role.agent);
      role.tor = tor;
      if (index < kMaxRingRacks) role.rack_tag = RingRackTag(plan.job_id, index, plan.generation);
    }
    out.push_back(std::move(role));
  }
  return out;
}

}  // namespace inac::core
