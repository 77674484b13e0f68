// Host placement for simulated jobs that do not name their hosts: which hosts become a job's
// workers and its parameter server. Deterministic for a seed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/topology.h"
#include "scheduler/sim/trace.h"

namespace inac::scheduler {

enum class PlacementRule {
  kShared,  // least-loaded hosts (fewest jobs), ties in topology order; never waits
  kPack,    // free hosts only, in topology order (fills one rack before the next)
  kSpread,  // free hosts only, round robin over the racks (ToRs)
  kRandom,  // free hosts only, uniformly at random (seeded)
};

// "shared", "pack", "spread", "random".
std::string_view PlacementRuleName(PlacementRule rule);
std::optional<PlacementRule> ParsePlacementRule(std::string_view name);

struct Placement {
  std::vector<std::string> workers;
  std::vector<std::string> parameter_servers;
};

// Tracks which hosts run which jobs and places jobs by a rule. The graph is not owned.
class HostPlacer {
 public:
  HostPlacer(const core::Graph& graph, PlacementRule rule, uint64_t seed);

  // Places `job`: explicit hosts are used as given (and may be shared whatever the rule); the
  // missing ones (workers, then one PS) are chosen by the rule. nullopt when a free-hosts rule
  // cannot find enough free hosts now (the job waits).
  std::optional<Placement> Place(const TraceJob& job);
  // Hosts needed beyond the explicit ones: workers (when no hosts are given) + 1 PS (when none
  // is given).
  static int HostsNeeded(const TraceJob& job);
  // Marks a placement's hosts as busy / free again.
  void Occupy(const Placement& placement);
  void Release(const Placement& placement);

  int num_hosts() const { return static_cast<int>(hosts_.size()); }

 private:
  // Index into hosts_ of a host id; -1 when it is not a host.
  int Position(const std::string& id) const;

  const core::Graph* graph_;
  PlacementRule rule_;
  SplitMix64 rng_;
  std::vector<int> hosts_;               // host node indices, topology order
  std::vector<int> load_;                // jobs per host (index into hosts_)
  std::vector<std::vector<int>> racks_;  // positions in hosts_ grouped by ToR, ToR order
  size_t next_rack_ = 0;
};

}  // namespace inac::scheduler
