#include "core/ring_intents.h"

#include <algorithm>
#include <map>

namespace inac::core {

uint32_t RingRackTag(JobId job_id, int rack, uint32_t generation) {
  return ((generation & 3u) << kTagGenerationShift) |
         (static_cast<uint32_t>(job_id) * 64u + static_cast<uint32_t>(rack));
}

uint32_t RingHopTag(JobId job_id, uint32_t generation) {
  return RingRackTag(job_id, kRingHopSlot, generation);
}

std::vector<RingRole> RingRolesOf(const JobPlan& plan, const std::vector<std::string>& spec_workers,
                                  const Topology* topology) {
  std::vector<RingRole> out;
  if (plan.ring.empty()) return out;
  // Abstract racks: agent -> (ToR, rack index).
  std::map<std::string, std::pair<std::string, int>> rack_of_agent;
  for (const AggregatorPlan& a : plan.aggregator_paths) {
    if (rack_of_agent.count(a.ps)) continue;
    const int index = static_cast<int>(rack_of_agent.size());
    rack_of_agent[a.ps] = {a.switch_id, index};
  }
  std::map<std::string, std::string> agent_of_worker;
  for (const FlowPlan& f : plan.flows) {
    auto rack = rack_of_agent.find(f.ps);
    if (rack == rack_of_agent.end() || rack->second.first != f.aggregation_node) continue;
    if (f.path.size() == 2 && f.path[0] == f.worker) agent_of_worker[f.worker] = f.ps;
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
