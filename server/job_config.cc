#include "server/job_config.h"

#include <map>

namespace inac::server {

JobConfig BuildJobConfig(const core::Job& job, const core::Plan* plan,
                         const std::vector<core::SwitchIntent>& intents,
                         const core::Topology* topology) {
  const core::JobId id = job.id;
  JobConfig config;
  config.job = job;
  config.batch_size = job.spec.batch_size;
  config.priority = job.spec.priority;
  if (plan == nullptr) return config;
  const core::JobPlan* jp = plan->FindJob(id);
  if (!jp) return config;
  config.plan_version = plan->version;
  config.generation = jp->generation;
  config.algorithm = plan->algorithm;
  config.batch_size = jp->batch_size;
  config.dataplane_priority = jp->priority;
  config.rate_gbps = jp->rate_gbps;
  config.iteration_ms = jp->iteration_ms;
  config.ring = jp->ring;
  config.ring_roles = core::RingRolesOf(*jp, job.spec.workers, topology);
  int ps_index = 0;
  for (const auto& [ps, share] : jp->ps_shares) {
    JobConfig::Shard shard;
    shard.ps = ps;
    shard.share = share;
    shard.tag = core::AggregationTag(id, ps_index++, 0, jp->generation);
    if (topology) shard.ps_address = core::NodeAddress(*topology, ps);
    for (const auto& intent : intents) {
      for (const auto& g : intent.jobs) {
        if (g.tag == shard.tag && g.multicast_group) shard.multicast_group = g.multicast_group;
      }
      for (const auto& r : intent.routes) {
        if (r.tag == shard.tag && r.multicast_group) shard.multicast_group = r.multicast_group;
      }
    }
    config.shards.push_back(shard);
  }
  for (const auto& f : jp->flows) {
    config.routes.push_back({f.worker, f.ps, f.aggregation_node, f.fraction});
  }
  for (const auto& intent : intents) {
    for (const auto& g : intent.jobs) {
      if (g.job_id == id) {
        config.regions.push_back({intent.switch_id, g.tag, g.aggregator_base, g.aggregator_count,
                                  g.slot_offset, g.window});
      }
    }
  }
  if (topology == nullptr) return config;
  const core::Topology& t = *topology;
  std::map<uint32_t, std::string> node_of;  // address -> node id
  for (const core::Host& h : t.hosts) node_of[core::NodeAddress(t, h.id)] = h.id;
  for (const core::Switch& sw : t.switches) node_of[core::NodeAddress(t, sw.id)] = sw.id;
  // The switch side of tag `tag`: its aggregators (inputs named by node id) and multicast group.
  auto add_switch_side = [&](JobConfig::Tag* tag) {
    for (const auto& intent : intents) {
      for (const auto& g : intent.jobs) {
        if (g.tag != tag->tag) continue;
        tag->multicast_group = g.multicast_group;
        JobConfig::Tag::Aggregator agg;
        agg.switch_id = intent.switch_id;
        agg.address = g.self_address;
        agg.inputs.resize(g.fan_in);
        for (const auto& in : intent.inputs) {
          if (in.tag == tag->tag && in.index < agg.inputs.size()) {
            auto node = node_of.find(in.source_address);
            agg.inputs[in.index] =
                node != node_of.end() ? node->second : core::FormatIpv4(in.source_address);
          }
        }
        agg.aggregator_base = g.aggregator_base;
        agg.aggregator_count = g.aggregator_count;
        agg.slot_offset = g.slot_offset;
        agg.window = g.window;
        tag->aggregators.push_back(std::move(agg));
      }
      for (const auto& r : intent.routes) {
        if (r.tag == tag->tag && r.multicast_group) tag->multicast_group = r.multicast_group;
      }
    }
  };
  // Ring jobs (docs/rina.md "Data plane"): one tag per abstract rack, whose PS is the agent and
  // whose members are the rack's other workers, aggregated at the ToR.
  for (const core::RingRackPlan& rack : core::RingRacksOf(*jp)) {
    if (rack.index >= core::kMaxRingRacks || rack.workers.empty()) continue;
    JobConfig::Tag tag;
    tag.tag = core::RingRackTag(id, rack.index, jp->generation);
    tag.ps = rack.agent;
    tag.ps_address = core::NodeAddress(t, rack.agent);
    tag.share = 1;
    for (const std::string& w : rack.workers) {
      tag.members.push_back({w, core::NodeAddress(t, w), rack.tor});
    }
    add_switch_side(&tag);
    config.tags.push_back(std::move(tag));
  }
  ps_index = 0;
  for (const auto& [ps, share] : jp->ps_shares) {
    for (const core::ChunkRange& range : core::ChunkRangesOf(*jp, ps)) {
      JobConfig::Tag tag;
      tag.tag = core::AggregationTag(id, ps_index, range.index, jp->generation,
                                     static_cast<int>(jp->ps_shares.size()));
      tag.ps = ps;
      tag.ps_address = core::NodeAddress(t, ps);
      tag.share = share;
      tag.begin = range.begin;
      tag.end = range.end;
      for (const core::FlowPlan* f : range.flows) {
        tag.members.push_back({f->worker, core::NodeAddress(t, f->worker), f->aggregation_node});
      }
      add_switch_side(&tag);
      config.tags.push_back(std::move(tag));
    }
    ++ps_index;
  }
  return config;
}

}  // namespace inac::server
