// DeriveSwitchIntents (core/plan.h): what every switch is programmed with for a plan -- the
// aggregation tags with their inputs and result trees, the routes of every class, the multicast
// groups, the host ports and the aggregator regions -- derived with the helpers of
// core/plan_internal.h, so that the tags and ranges match JobTagsOf and ChunkRangesOf.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/plan.h"
#include "core/plan_internal.h"
#include "core/ring_intents.h"

namespace inac::core {
namespace {

using plan_internal::DerivedFlow;
using plan_internal::NodeIndices;
using plan_internal::RangesOf;
using plan_internal::ResolveChains;
using plan_internal::ShortestSwitchPath;

// The data plane's aggregator registers (AGG_SLOTS in api/p4/ina.p4).
constexpr int64_t kAggregatorSlots = 32768;

// Per-switch accumulation while deriving intents.
struct Builder {
  std::map<uint32_t, JobAggregationIntent> jobs;  // by tag
  std::map<std::tuple<uint32_t, uint32_t>, AggregationInputIntent> inputs;
  std::map<std::tuple<uint32_t, uint8_t, uint32_t, uint32_t>, RouteIntent> routes;
  std::map<uint32_t, MulticastGroupIntent> groups;
  std::map<uint32_t, HostPortIntent> hosts;  // by port
};

class Deriver {
 public:
  Deriver(const Topology& topology) : topology_(topology), graph_(topology) {
    builders_.resize(topology.switches.size());
  }

  std::vector<SwitchIntent> Run(const Plan& plan) {
    shared_ = plan.memory_policy == "esa" || plan.memory_policy == "atp";
    no_preemption_ = plan.memory_policy == "atp";
    std::vector<const JobPlan*> jobs;
    for (const JobPlan& jp : plan.jobs) jobs.push_back(&jp);
    std::sort(jobs.begin(), jobs.end(),
              [](const JobPlan* a, const JobPlan* b) { return a->job_id < b->job_id; });
    // Tags (and their ranges) first; multicast groups in tag order, so a tag's group only
    // depends on smaller tags.
    std::vector<TagWork> work;
    for (const JobPlan* jp : jobs) {
      int ps_index = 0;
      for (const auto& [ps, share] : jp->ps_shares) {
        std::vector<const FlowPlan*> flows;
        for (const FlowPlan& f : jp->flows) {
          if (f.ps == ps && !f.path.empty()) flows.push_back(&f);
        }
        const int ps_count = static_cast<int>(jp->ps_shares.size());
        for (ChunkRange& range : RangesOf(flows, MaxRangesPerShard(ps_count))) {
          work.push_back(TagWork{
              jp, ps, AggregationTag(jp->job_id, ps_index, range.index, jp->generation, ps_count),
              std::move(range.flows), share * (range.end - range.begin)});
        }
        ++ps_index;
      }
      // Ring all-reduce (Rina, docs/rina.md "Data plane"): each abstract rack is a PS tag whose PS
      // is the rack's agent, aggregated at its ToR.
      for (const RingRackPlan& rack : RingRacksOf(*jp)) {
        if (rack.index >= kMaxRingRacks || rack.flows.empty()) continue;
        work.push_back(TagWork{jp, rack.agent, RingRackTag(jp->job_id, rack.index, jp->generation),
                               rack.flows, 1.0});
      }
    }
    std::sort(work.begin(), work.end(),
              [](const TagWork& a, const TagWork& b) { return BaseTag(a.tag) < BaseTag(b.tag); });
    std::set<uint32_t> taken;
    for (const TagWork& w : work) {
      uint32_t group = 1 + BaseTag(w.tag) % kMaxMulticastGroup;
      while (taken.count(group)) group = group % kMaxMulticastGroup + 1;
      taken.insert(group);
      group_of_[w.tag] = group;
    }
    for (const TagWork& w : work) {
      weight_of_[w.tag] = w.weight;
      AddTag(w);
    }
    for (const JobPlan* jp : jobs) AddRingHops(*jp);
    AddHostPorts(plan);
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
      for (auto& [k, v] : b.hosts) si.host_ports.push_back(v);
    }
    return out;
  }

 private:
  struct TagWork {
    const JobPlan* job;
    std::string ps;
    uint32_t tag;
    std::vector<const FlowPlan*> flows;
    double weight;  // JobTag::weight (ring racks: 1)
  };

  uint32_t Address(const std::string& id) {
    auto it = address_cache_.find(id);
    if (it != address_cache_.end()) return it->second;
    uint32_t a = NodeAddress(topology_, id);
    address_cache_.emplace(id, a);
    return a;
  }

  // Port on switch `u` toward neighbour `v`; 0 if they are not adjacent over an up link.
  // PortOf's rule, with every link's implicit ports counted in one pass over the links (PortOf
  // scans them per call: ~1 s of a k=32 plan).
  uint32_t PortToward(int u, int v) {
    const int arc = graph_.ArcBetween(u, v);
    if (arc < 0) return 0;
    if (implicit_ports_.empty()) {
      std::unordered_map<std::string_view, uint32_t> seen;
      for (const Link& l : topology_.links) {
        const uint32_t a = ++seen[l.a];
        const uint32_t b = l.b == l.a ? a : ++seen[l.b];
        implicit_ports_.emplace_back(a, b);
      }
    }
    const int index = graph_.arc(arc).link;
    if (index < 0 || index >= static_cast<int>(topology_.links.size())) return 0;
    const Link& l = topology_.links[index];
    const std::string& name = graph_.name(u);
    if (l.a == name) return l.a_port ? *l.a_port : implicit_ports_[index].first;
    if (l.b == name) return l.b_port ? *l.b_port : implicit_ports_[index].second;
    return 0;
  }

  std::vector<int> Indices(const std::vector<std::string>& path) {
    return NodeIndices(graph_, path);
  }
  std::vector<int> ShortestPath(int from, int to) { return ShortestSwitchPath(graph_, from, to); }

  // Unicast routes (tag, class, src -> dst) on the switches of `path` that forward (every node
  // but the last); `skip_first` leaves out the first node. Records the links in `tree_edges`.
  void AddRoutes(uint32_t tag, JobId job, RouteClass cls, uint32_t src, uint32_t dst,
                 const std::vector<int>& path, std::set<std::pair<int, int>>* tree_edges) {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      int u = path[i];
      int v = path[i + 1];
      tree_edges->insert({std::min(u, v), std::max(u, v)});
      if (!graph_.is_switch(u)) continue;
      uint32_t port = PortToward(u, v);
      if (port == 0) continue;
      RouteIntent r{tag, job, src, dst, port, 0, cls};
      builders_[u].routes[{tag, static_cast<uint8_t>(cls), src, dst}] = r;
    }
  }

  void AddTag(const TagWork& w) {
    const JobPlan& jp = *w.job;
    const uint32_t tag = w.tag;
    const uint32_t group = group_of_[tag];
    const int ps_node = graph_.index(w.ps);
    if (ps_node < 0) return;
    const uint32_t ps_addr = Address(w.ps);
    std::set<std::pair<int, int>> edges;     // undirected links the tag's traffic uses
    std::map<int, std::set<int>> inputs_at;  // aggregating switch -> its input nodes
    std::set<int> workers;
    for (const FlowPlan* f : w.flows) {
      std::vector<int> path;
      int agg = -1;
      if (!DerivedFlow(graph_, *f, &path, &agg)) continue;
      const int worker = graph_.index(f->worker);
      workers.insert(worker);
      const uint32_t w_addr = Address(f->worker);
      // Raw chunks up to the aggregation switch, which consumes them (or sends them on as
      // upstream packets); not aggregated in the network: raw all the way to the PS.
      const int to = agg >= 0 ? agg : ps_node;
      if (agg >= 0) inputs_at[agg].insert(worker);
      if (path.back() != to) {
        std::vector<int> rest = ShortestPath(path.back(), to);
        if (rest.size() > 1) path.insert(path.end(), rest.begin() + 1, rest.end());
      }
      AddRoutes(tag, jp.job_id, RouteClass::kRaw, w_addr, ps_addr, path, &edges);
    }
    // Chains (two-level aggregation): a switch whose aggregator path ends at another INA switch
    // that has an aggregator path of its own toward the same PS is an input of that switch
    // (RoutedStream::via); the parent aggregates the tag even without workers.
    std::map<int, std::vector<int>> route_of;  // aggregating switch -> its route to the PS
    ResolveChains(graph_, jp, w.ps, ps_node, &inputs_at, &route_of);
    for (const auto& [sw, input_nodes] : inputs_at) {
      std::set<std::pair<uint32_t, std::string>> inputs;  // by address: the bitmap's order
      for (int n : input_nodes) inputs.insert({Address(graph_.name(n)), graph_.name(n)});
      JobAggregationIntent ji;
      ji.tag = tag;
      ji.job_id = jp.job_id;
      ji.fan_in = static_cast<uint32_t>(inputs.size());
      ji.input_bitmap = ji.fan_in >= 64 ? ~uint64_t{0} : ((uint64_t{1} << ji.fan_in) - 1);
      ji.multicast_group = group;
      ji.priority = no_preemption_ ? 0 : jp.priority;
      ji.upstream_address = ps_addr;
      ji.self_address = Address(graph_.name(sw));
      builders_[sw].jobs[tag] = ji;
      uint32_t index = 0;
      for (const auto& [addr, worker] : inputs) {
        builders_[sw].inputs[{tag, addr}] = AggregationInputIntent{tag, jp.job_id, addr, index++};
      }
      // Upstream: the plan's path from this switch to the PS (through its parent in a chain),
      // or a shortest one.
      const std::vector<int>& up = route_of[sw];
      AddRoutes(tag, jp.job_id, RouteClass::kUpstream, ji.self_address, ps_addr, up, &edges);
      auto a = jp.aggregators.find(graph_.name(sw));
      if (a != jp.aggregators.end()) job_aggregators_[{sw, jp.job_id}] = a->second;
    }
    AddResultTree(tag, jp.job_id, group, ps_node, ps_addr, workers, edges);
  }

  // Breadth-first tree from the PS over the links the tag's traffic uses; each worker's branch is
  // kept, and each switch on it replicates toward its children only.
  void AddResultTree(uint32_t tag, JobId job, uint32_t group, int root, uint32_t root_addr,
                     const std::set<int>& workers, const std::set<std::pair<int, int>>& edges) {
    std::map<int, std::vector<int>> adjacency;
    for (const auto& [a, b] : edges) {
      adjacency[a].push_back(b);
      adjacency[b].push_back(a);
    }
    for (auto& [n, list] : adjacency) std::sort(list.begin(), list.end());
    std::map<int, int> parent = {{root, root}};
    std::deque<int> queue = {root};
    while (!queue.empty()) {
      int u = queue.front();
      queue.pop_front();
      if (u != root && !graph_.is_switch(u)) continue;  // hosts do not forward
      for (int v : adjacency[u]) {
        if (parent.count(v)) continue;
        parent[v] = u;
        queue.push_back(v);
      }
    }
    std::map<int, std::set<uint32_t>> children;
    for (int worker : workers) {
      if (!parent.count(worker)) continue;
      for (int v = worker; v != root; v = parent[v]) {
        const int u = parent[v];
        if (!graph_.is_switch(u)) continue;
        uint32_t port = PortToward(u, v);
        if (port != 0) children[u].insert(port);
      }
    }
    for (const auto& [u, ports] : children) {
      builders_[u].routes[{tag, static_cast<uint8_t>(RouteClass::kResult), root_addr, 0}] =
          RouteIntent{tag, job, root_addr, 0, 0, group, RouteClass::kResult};
      builders_[u].groups[group] =
          MulticastGroupIntent{group, job, std::vector<uint32_t>(ports.begin(), ports.end())};
    }
  }

  // The ring hops of a ring job (RingHopTag): raw routes from each member to the next one, and
  // upstream routes (the ring's acknowledgements, flag AGGREGATE) back along the reverse path.
  // The path is the plan's first hop part between the members' ports (an abstract rack's ToR,
  // extended to its agent), or a shortest path when the plan has none. No ina_job entry: nothing
  // on a hop aggregates.
  void AddRingHops(const JobPlan& jp) {
    const int n = static_cast<int>(jp.ring.size());
    if (n < 2) return;
    std::map<std::string, std::string> tor_of;  // agent -> ToR
    for (const RingRackPlan& rack : RingRacksOf(jp)) tor_of[rack.agent] = rack.tor;
    auto port_of = [&](const std::string& member) {
      auto it = tor_of.find(member);
      return it != tor_of.end() ? it->second : member;
    };
    const uint32_t tag = RingHopTag(jp.job_id, jp.generation);
    std::set<std::pair<int, int>> edges;  // unused: hops have no result tree
    for (int i = 0; i < n; ++i) {
      const std::string& from = jp.ring[i];
      const std::string& to = jp.ring[(i + 1) % n];
      const int from_node = graph_.index(from), to_node = graph_.index(to);
      if (from_node < 0 || to_node < 0 || from_node == to_node) continue;
      std::vector<int> path;
      for (const FlowPlan& f : jp.flows) {
        if (f.worker != port_of(from) || f.ps != to || f.aggregation_node != port_of(to) ||
            f.path.empty() || f.path.front() != f.worker) {
          continue;
        }
        std::vector<std::string> ids = f.path;
        if (ids.front() != from) ids.insert(ids.begin(), from);
        if (ids.back() != to) ids.push_back(to);
        path = Indices(ids);
        std::set<int> distinct(path.begin(), path.end());
        if (distinct.size() != path.size()) path.clear();
        for (size_t k = 0; k + 1 < path.size(); ++k) {
          if (graph_.ArcBetween(path[k], path[k + 1]) < 0) path.clear();
        }
        break;
      }
      if (path.empty()) path = ShortestPath(from_node, to_node);
      if (path.size() < 2) continue;
      AddRoutes(tag, jp.job_id, RouteClass::kRaw, Address(from), Address(to), path, &edges);
      std::vector<int> back(path.rbegin(), path.rend());
      AddRoutes(tag, jp.job_id, RouteClass::kUpstream, Address(to), Address(from), back, &edges);
    }
  }

  // `ina_host` entries for the hosts of the plan's jobs, on the switch each attaches to.
  void AddHostPorts(const Plan& plan) {
    std::set<std::string> hosts;
    for (const JobPlan& jp : plan.jobs) {
      for (const FlowPlan& f : jp.flows) hosts.insert(f.worker);
      for (const auto& [ps, share] : jp.ps_shares) hosts.insert(ps);
      for (const std::string& member : jp.ring) hosts.insert(member);
    }
    for (const std::string& id : hosts) {
      const int h = graph_.index(id);
      if (h < 0 || !graph_.is_host(h)) continue;
      for (int a : graph_.out_arcs(h)) {
        const int sw = graph_.arc(a).to;
        if (!graph_.is_switch(sw)) continue;
        uint32_t port = PortToward(sw, h);
        if (port == 0) continue;
        builders_[sw].hosts[port] = HostPortIntent{port, NodeMac(topology_, id), Address(id)};
      }
    }
  }

  // Splits each job's aggregators on a switch over its tags there (SplitGrant, by the tags'
  // weights). A chain child forwards its aggregate in the slot its workers chose, so every switch
  // of a tag must index the same chunk alike: the tag has one window, the least of its non-zero
  // shares over its switches (a switch whose share is 0 gets no region and falls back). Regions
  // are then laid out per switch in tag order: static pools of the window, or the switch's whole
  // pool (shared memory) with the windows one after the other. A chain child's
  // upstream_slot_shift moves the slot from its window to its parent's.
  void LayOutRegions() {
    std::map<uint32_t, int64_t> window_of;  // tag -> its window over its tree (-1: none yet)
    for (size_t u = 0; u < builders_.size(); ++u) {
      std::map<JobId, std::vector<JobAggregationIntent*>> by_job;  // each in tag order
      for (auto& [tag, ji] : builders_[u].jobs) by_job[ji.job_id].push_back(&ji);
      for (auto& [job, tags] : by_job) {
        auto it = job_aggregators_.find({static_cast<int>(u), job});
        const int64_t total = it == job_aggregators_.end() ? 0 : it->second;
        std::vector<double> weights;
        for (const JobAggregationIntent* ji : tags) weights.push_back(weight_of_[ji->tag]);
        const std::vector<int64_t> split = SplitGrant(total, weights);
        for (size_t k = 0; k < tags.size(); ++k) {
          tags[k]->window = static_cast<uint32_t>(split[k]);
          auto [w, fresh] = window_of.try_emplace(tags[k]->tag, -1);
          if (split[k] > 0) w->second = w->second < 0 ? split[k] : std::min(w->second, split[k]);
        }
      }
    }
    std::map<std::pair<uint32_t, uint32_t>, JobAggregationIntent*> by_address;
    for (size_t u = 0; u < builders_.size(); ++u) {
      const int64_t pool =
          std::min<int64_t>(kAggregatorSlots, std::max<int64_t>(0, graph_.aggregators(u)));
      uint32_t base = 0;
      for (auto& [tag, ji] : builders_[u].jobs) {
        const uint32_t count =
            ji.window == 0 ? 0 : static_cast<uint32_t>(std::max<int64_t>(0, window_of[tag]));
        ji.window = count;
        if (count == 0) {  // every slot is beyond the region: the switch falls back
          ji.aggregator_base = 0;
          ji.aggregator_count = 0;
          ji.slot_offset = 0;
        } else if (shared_) {
          ji.aggregator_base = 0;
          ji.aggregator_count = static_cast<uint32_t>(pool);
          // Windows wrap around the shared pool.
          ji.slot_offset = pool > 0 ? static_cast<uint32_t>(base % pool) : 0;
        } else {
          ji.aggregator_base = base;
          ji.aggregator_count = count;
          ji.slot_offset = 0;
        }
        base += count;
        by_address[{tag, ji.self_address}] = &ji;
      }
    }
    // A chain child is an input of its parent under the child's own address.
    for (size_t v = 0; v < builders_.size(); ++v) {
      for (const auto& [key, input] : builders_[v].inputs) {
        auto child = by_address.find({input.tag, input.source_address});
        if (child == by_address.end()) continue;
        const JobAggregationIntent& parent = builders_[v].jobs.at(input.tag);
        JobAggregationIntent* ji = child->second;
        ji->upstream_slot_shift = static_cast<int32_t>(static_cast<int64_t>(parent.slot_offset) -
                                                       static_cast<int64_t>(ji->slot_offset));
      }
    }
  }

  const Topology& topology_;
  Graph graph_;
  bool shared_ = false;
  bool no_preemption_ = false;
  std::vector<Builder> builders_;
  std::unordered_map<std::string, uint32_t> address_cache_;
  std::vector<std::pair<uint32_t, uint32_t>> implicit_ports_;  // per link: (a's, b's) position
  std::map<uint32_t, uint32_t> group_of_;
  std::map<std::pair<int, JobId>, int64_t> job_aggregators_;
  std::map<uint32_t, double> weight_of_;  // tag -> its traffic weight
};

}  // namespace

std::vector<SwitchIntent> DeriveSwitchIntents(const Topology& topology, const Plan& plan) {
  return Deriver(topology).Run(plan);
}

}  // namespace inac::core
