#include "core/plan.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace inac::core {

const JobPlan* Plan::FindJob(JobId id) const {
  for (const JobPlan& j : jobs) {
    if (j.job_id == id) return &j;
  }
  return nullptr;
}

uint32_t AggregationTag(JobId job_id, int ps_index) {
  return static_cast<uint32_t>(job_id) * kMaxParameterServersPerJob +
         static_cast<uint32_t>(ps_index);
}

namespace {

// Per-switch accumulation while deriving intents.
struct Builder {
  std::map<uint32_t, JobAggregationIntent> jobs;  // by tag
  std::map<std::tuple<uint32_t, uint32_t>, AggregationInputIntent> inputs;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, RouteIntent> routes;
  std::map<uint32_t, MulticastGroupIntent> groups;
};

class Deriver {
 public:
  Deriver(const Topology& topology) : topology_(topology), graph_(topology) {
    builders_.resize(topology.switches.size());
  }

  std::vector<SwitchIntent> Run(const Plan& plan) {
    std::vector<const JobPlan*> jobs;
    for (const JobPlan& jp : plan.jobs) jobs.push_back(&jp);
    std::sort(jobs.begin(), jobs.end(),
              [](const JobPlan* a, const JobPlan* b) { return a->job_id < b->job_id; });
    // Multicast groups first, in tag order, so a tag's group only depends on smaller tags.
    std::set<uint32_t> taken;
    for (const JobPlan* jp : jobs) {
      int ps_index = 0;
      for (const auto& [ps, share] : jp->ps_shares) {
        (void)share;
        uint32_t tag = AggregationTag(jp->job_id, ps_index++);
        uint32_t group = 1 + tag % 65535;
        while (taken.count(group)) group = group % 65535 + 1;
        taken.insert(group);
        group_of_[tag] = group;
      }
    }
    for (const JobPlan* jp : jobs) AddJob(*jp);
    LayOutRegions();

    std::vector<SwitchIntent> out(topology_.switches.size());
    for (size_t i = 0; i < out.size(); ++i) {
      SwitchIntent& si = out[i];
      si.switch_id = topology_.switches[i].id;
      si.version = plan.version;
      Builder& b = builders_[i];
      for (auto& [k, v] : b.jobs) si.jobs.push_back(v);
      for (auto& [k, v] : b.inputs) si.inputs.push_back(v);
      for (auto& [k, v] : b.routes) si.routes.push_back(v);
      for (auto& [k, v] : b.groups) si.multicast_groups.push_back(v);
    }
    return out;
  }

 private:
  uint32_t Address(const std::string& id) {
    auto it = address_cache_.find(id);
    if (it != address_cache_.end()) return it->second;
    uint32_t a = NodeAddress(topology_, id);
    address_cache_.emplace(id, a);
    return a;
  }

  // Port on switch `u` toward neighbour `v`; 0 if they are not adjacent over an up link.
  uint32_t PortToward(int u, int v) {
    int arc = graph_.ArcBetween(u, v);
    if (arc < 0) return 0;
    return PortOf(topology_, graph_.name(u), graph_.arc(arc).link);
  }

  // Adds unicast route entries for traffic (tag, src -> dst) along `path` (node ids).
  void AddRoutes(uint32_t tag, JobId job, uint32_t src, uint32_t dst,
                 const std::vector<std::string>& path) {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      int u = graph_.index(path[i]);
      int v = graph_.index(path[i + 1]);
      if (u < 0 || v < 0 || !graph_.is_switch(u)) continue;
      uint32_t port = PortToward(u, v);
      if (port == 0) continue;
      RouteIntent r{tag, job, src, dst, port, 0};
      builders_[u].routes[{tag, src, dst}] = r;
    }
  }

  void AddJob(const JobPlan& jp) {
    int ps_index = 0;
    for (const auto& [ps, share] : jp.ps_shares) {
      (void)share;
      uint32_t tag = AggregationTag(jp.job_id, ps_index++);
      uint32_t group = group_of_[tag];
      uint32_t ps_addr = Address(ps);
      std::map<std::string, const AggregatorPlan*> upstream;  // switch -> its path to ps
      for (const AggregatorPlan& ap : jp.aggregator_paths) {
        if (ap.ps == ps) upstream[ap.switch_id] = &ap;
      }
      // Inputs per aggregation switch, sorted by address for a stable bit assignment.
      std::map<std::string, std::set<std::pair<uint32_t, std::string>>> inputs_at;
      // Downward tree: per switch, the set of egress ports toward workers.
      std::map<int, std::set<uint32_t>> children;
      for (const FlowPlan& f : jp.flows) {
        if (f.ps != ps || f.path.empty()) continue;
        uint32_t w_addr = Address(f.worker);
        std::vector<std::string> full = f.path;
        int agg = graph_.index(f.aggregation_node);
        if (agg >= 0 && graph_.is_switch(agg)) {
          inputs_at[f.aggregation_node].insert({w_addr, f.worker});
          auto it = upstream.find(f.aggregation_node);
          if (it != upstream.end() && it->second->path.size() > 1) {
            full.insert(full.end(), it->second->path.begin() + 1, it->second->path.end());
          }
        }
        // Worker -> PS traffic is routed along the whole way: up to the aggregator it is consumed
        // there, beyond it only fallback (unaggregated) packets use these entries.
        AddRoutes(tag, jp.job_id, w_addr, ps_addr, full);
        for (size_t i = full.size(); i-- > 1;) {
          int u = graph_.index(full[i]);
          int v = graph_.index(full[i - 1]);
          if (u < 0 || v < 0 || !graph_.is_switch(u)) continue;
          uint32_t port = PortToward(u, v);
          if (port != 0) children[u].insert(port);
        }
      }
      for (const auto& [sw, inputs] : inputs_at) {
        int u = graph_.index(sw);
        JobAggregationIntent ji;
        ji.tag = tag;
        ji.job_id = jp.job_id;
        ji.fan_in = static_cast<uint32_t>(inputs.size());
        ji.input_bitmap = ji.fan_in >= 64 ? ~uint64_t{0} : ((uint64_t{1} << ji.fan_in) - 1);
        ji.multicast_group = group;
        ji.priority = jp.priority;
        ji.upstream_address = ps_addr;
        builders_[u].jobs[tag] = ji;
        uint32_t index = 0;
        for (const auto& [addr, worker] : inputs) {
          builders_[u].inputs[{tag, addr}] = AggregationInputIntent{tag, jp.job_id, addr, index++};
        }
        auto it = upstream.find(sw);
        if (it != upstream.end()) AddRoutes(tag, jp.job_id, Address(sw), ps_addr, it->second->path);
        // The job's aggregators on this switch are shared by its shards aggregating here.
        auto a = jp.aggregators.find(sw);
        if (a != jp.aggregators.end()) job_aggregators_[{u, jp.job_id}] = a->second;
      }
      for (const auto& [u, ports] : children) {
        builders_[u].routes[{tag, ps_addr, 0}] = RouteIntent{tag, jp.job_id, ps_addr, 0, 0, group};
        MulticastGroupIntent g{group, jp.job_id, std::vector<uint32_t>(ports.begin(), ports.end())};
        builders_[u].groups[group] = g;
      }
    }
  }

  // Splits each job's aggregators on a switch over its shards there and lays out regions in tag
  // order.
  void LayOutRegions() {
    for (size_t u = 0; u < builders_.size(); ++u) {
      std::map<JobId, int> shards;
      for (auto& [tag, ji] : builders_[u].jobs) shards[ji.job_id]++;
      std::map<JobId, int> seen;
      uint32_t base = 0;
      for (auto& [tag, ji] : builders_[u].jobs) {
        auto it = job_aggregators_.find({static_cast<int>(u), ji.job_id});
        int64_t total = it == job_aggregators_.end() ? 0 : it->second;
        int n = shards[ji.job_id];
        int k = seen[ji.job_id]++;
        int64_t count = total / n + (k < total % n ? 1 : 0);
        ji.aggregator_base = base;
        ji.aggregator_count = static_cast<uint32_t>(count);
        base += static_cast<uint32_t>(count);
      }
    }
  }

  const Topology& topology_;
  Graph graph_;
  std::vector<Builder> builders_;
  std::unordered_map<std::string, uint32_t> address_cache_;
  std::map<uint32_t, uint32_t> group_of_;
  std::map<std::pair<int, JobId>, int64_t> job_aggregators_;
};

}  // namespace

std::vector<SwitchIntent> DeriveSwitchIntents(const Topology& topology, const Plan& plan) {
  return Deriver(topology).Run(plan);
}

}  // namespace inac::core
