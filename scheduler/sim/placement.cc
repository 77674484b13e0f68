#include "scheduler/sim/placement.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace inac::scheduler {

std::string_view PlacementRuleName(PlacementRule rule) {
  switch (rule) {
    case PlacementRule::kShared:
      return "shared";
    case PlacementRule::kPack:
      return "pack";
    case PlacementRule::kSpread:
      return "spread";
    case PlacementRule::kRandom:
      return "random";
  }
  return "unknown";
}

std::optional<PlacementRule> ParsePlacementRule(std::string_view name) {
  for (PlacementRule r : {PlacementRule::kShared, PlacementRule::kPack, PlacementRule::kSpread,
                          PlacementRule::kRandom}) {
    if (PlacementRuleName(r) == name) return r;
  }
  return std::nullopt;
}

HostPlacer::HostPlacer(const core::Graph& graph, PlacementRule rule, uint64_t seed)
    : graph_(&graph), rule_(rule), rng_(seed) {
  std::map<int, std::vector<int>> by_tor;
  for (int v = graph.num_switches(); v < graph.num_nodes(); ++v) {
    by_tor[graph.tor_of(v)].push_back(static_cast<int>(hosts_.size()));
    hosts_.push_back(v);
  }
  load_.assign(hosts_.size(), 0);
  for (auto& [tor, list] : by_tor) racks_.push_back(std::move(list));
}

int HostPlacer::Position(const std::string& id) const {
  const int node = graph_->index(id);
  return node >= 0 && graph_->is_host(node) ? node - graph_->num_switches() : -1;
}

int HostPlacer::HostsNeeded(const TraceJob& job) {
  return (job.hosts.empty() ? job.workers : 0) + (job.parameter_servers.empty() ? 1 : 0);
}

std::optional<Placement> HostPlacer::Place(const TraceJob& job) {
  Placement p;
  p.workers = job.hosts;
  p.parameter_servers = job.parameter_servers;
  const int needed = HostsNeeded(job);
  // Positions of explicit hosts are excluded from the choice.
  std::vector<char> taken(hosts_.size(), 0);
  for (const auto* list : {&p.workers, &p.parameter_servers}) {
    for (const std::string& id : *list) {
      const int i = Position(id);
      if (i >= 0) taken[i] = 1;
    }
  }
  std::vector<int> chosen;
  if (rule_ == PlacementRule::kShared) {
    std::vector<int> order(hosts_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load_[a] < load_[b]; });
    for (int i : order) {
      if (static_cast<int>(chosen.size()) == needed) break;
      if (!taken[i]) chosen.push_back(i);
    }
  } else {
    std::vector<int> free;
    if (rule_ == PlacementRule::kSpread) {
      // Round robin over racks, starting after the rack used last.
      std::vector<size_t> cursor(racks_.size(), 0);
      bool progress = true;
      while (progress && static_cast<int>(free.size()) < needed) {
        progress = false;
        for (size_t k = 0; k < racks_.size() && static_cast<int>(free.size()) < needed; ++k) {
          const size_t r = (next_rack_ + k) % racks_.size();
          while (cursor[r] < racks_[r].size()) {
            const int i = racks_[r][cursor[r]++];
            if (load_[i] == 0 && !taken[i]) {
              free.push_back(i);
              progress = true;
              break;
            }
          }
        }
      }
      if (!racks_.empty()) next_rack_ = (next_rack_ + 1) % racks_.size();
    } else {
      for (size_t i = 0; i < hosts_.size(); ++i) {
        if (load_[i] == 0 && !taken[i]) free.push_back(static_cast<int>(i));
      }
      if (rule_ == PlacementRule::kRandom) {
        // Partial Fisher-Yates with the placer's own stream.
        for (int k = 0; k < needed && k < static_cast<int>(free.size()); ++k) {
          const size_t pick = k + rng_.Below(free.size() - k);
          std::swap(free[k], free[pick]);
        }
      }
    }
    if (static_cast<int>(free.size()) < needed) return std::nullopt;
    chosen.assign(free.begin(), free.begin() + needed);
  }
  if (static_cast<int>(chosen.size()) < needed) return std::nullopt;
  size_t k = 0;
  if (p.workers.empty()) {
    for (int w = 0; w < job.workers; ++w) p.workers.push_back(graph_->name(hosts_[chosen[k++]]));
  }
  if (p.parameter_servers.empty()) p.parameter_servers.push_back(graph_->name(hosts_[chosen[k++]]));
  return p;
}

void HostPlacer::Occupy(const Placement& placement) {
  for (const auto* list : {&placement.workers, &placement.parameter_servers}) {
    for (const std::string& id : *list) {
      const int i = Position(id);
      if (i >= 0) ++load_[i];
    }
  }
}

void HostPlacer::Release(const Placement& placement) {
  for (const auto* list : {&placement.workers, &placement.parameter_servers}) {
    for (const std::string& id : *list) {
      const int i = Position(id);
      if (i >= 0 && load_[i] > 0) --load_[i];
    }
  }
}

}  // namespace inac::scheduler
