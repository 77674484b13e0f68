// The job configuration builder: what the hosts of a job need to run it (GET /jobs/{id}/config,
// the worker and PS agents' input). Built from the job, the plan that holds it, that plan's
// per-switch intents and the topology; pure (no I/O, no clock), so the REST layer, the agents'
// tests and the controller's tests all see the same answer for the same inputs.
//
// The data-plane contract behind the fields (tags, slots, multicast groups, input bits) is
// docs/ina-pipeline.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job.h"
#include "core/plan.h"
#include "core/ring_intents.h"
#include "core/topology.h"

namespace inac::server {

// What a worker of a job needs to run (GET /jobs/{id}/config).
struct JobConfig {
  core::Job job;
  int64_t plan_version = 0;
  uint32_t generation = 0;  // the job's aggregation generation (core::JobPlan::generation)
  std::string algorithm;
  int batch_size = 0;
  int priority = 0;  // as submitted (JobSpec::priority)
  // The integer the switches preempt by (core::JobPlan::priority): under ESA derived from
  // `priority` and the job's progress, so it changes while the job runs; 0 before it is planned.
  int dataplane_priority = 0;
  double rate_gbps = 0;
  double iteration_ms = 0;
  struct Shard {
    std::string ps;
    uint32_t ps_address = 0;
    double share = 0;
    uint32_t tag = 0;  // value for the INA header's job_id field
    uint32_t multicast_group = 0;
  };
  std::vector<Shard> shards;
  struct WorkerRoute {
    std::string worker;
    std::string ps;
    std::string aggregation_node;  // switch id, or the PS itself
    double fraction = 1;
  };
  std::vector<WorkerRoute> routes;
  struct Region {
    std::string switch_id;
    uint32_t tag = 0;
    uint32_t aggregator_base = 0;
    uint32_t aggregator_count = 0;
    // The slots the workers use: slot = (slot_offset + chunk mod window) mod aggregator_count.
    uint32_t slot_offset = 0;
    uint32_t window = 0;
  };
  std::vector<Region> regions;
  // What the host agents need per aggregation tag (one per PS and chunk range): the data-plane
  // contract of docs/ina-pipeline.md seen from the hosts.
  struct Tag {
    uint32_t tag = 0;
    std::string ps;
    uint32_t ps_address = 0;
    double share = 0;  // the PS's share of the model
    double begin = 0;  // the tag's part [begin, end) of that share's chunks
    double end = 1;
    uint32_t multicast_group = 0;
    struct Member {
      std::string worker;
      uint32_t address = 0;
      std::string aggregation_node;  // a switch id, or the PS itself
    };
    std::vector<Member> members;
    struct Aggregator {
      std::string switch_id;
      uint32_t address = 0;             // the source of what it sends to the PS
      std::vector<std::string> inputs;  // node ids in input-bit order (bit i = inputs[i])
      uint32_t aggregator_base = 0;
      uint32_t aggregator_count = 0;
      uint32_t slot_offset = 0;
      uint32_t window = 0;
    };
    std::vector<Aggregator> aggregators;
  };
  std::vector<Tag> tags;
  std::vector<std::string> ring;  // ring all-reduce order
  // Ring all-reduce (Rina, docs/rina.md): every worker's role, ring neighbours and rack tag.
  std::vector<core::RingRole> ring_roles;
};

// The configuration of `job`. `plan` is the latest plan (null when none was computed yet),
// `intents` its per-switch intents and `topology` the current topology (null when none is
// loaded): a job not in the plan gets only its own fields (batch size, priority), with no tags.
JobConfig BuildJobConfig(const core::Job& job, const core::Plan* plan,
                         const std::vector<core::SwitchIntent>& intents,
                         const core::Topology* topology);

}  // namespace inac::server
