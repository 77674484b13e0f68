// A job's configuration as the host agents need it: the JSON of GET /api/v1/jobs/{id}/config
// (northbound/http_api.cc ConfigJson), of which the agents read `job_id`, `plan_version`,
// `batch_size`, `tags`, `generation` and, for ring all-reduce jobs, `ring` and `ring_roles`
// (docs/rina.md; a role must be agent, member or rack-worker, neighbour addresses IPv4), ignoring
// every other field.
//
// Contract: ParseJobConfig accepts exactly that JSON (or a file holding it) and returns a
// JobConfig whose every tag is well formed: a unique tag value, a PS id and IPv4 address, a share
// in (0, 1], a range 0 <= begin < end <= 1, unique members each with an IPv4 address, aggregators
// each with an IPv4 address, at most 64 inputs and 32-bit aggregator fields. Anything else is
// InvalidArgument naming the offending field (e.g. "tags[1].members[0].address: not an IPv4
// address"). Addresses are host byte order (core::ParseIpv4). Whether the ranges of a PS tile its
// shard is checked by the layout (agent/layout.h), not here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace inac::agent {

struct JobConfig {
  int64_t job_id = 0;
  int64_t plan_version = 0;
  int64_t batch_size = 0;
  int64_t gradient_bytes = 0;  // the job's gradient per worker and iteration; 0: not given
  struct Member {
    std::string worker;
    uint32_t address = 0;
    std::string aggregation_node;  // a switch id, or the PS itself
  };
  struct Aggregator {
    std::string switch_id;
    uint32_t address = 0;             // the source address of what it sends to the PS
    std::vector<std::string> inputs;  // node ids in input-bit order (bit i = inputs[i])
    uint32_t aggregator_base = 0;
    uint32_t aggregator_count = 0;
    uint32_t slot_offset = 0;
    uint32_t window = 0;
  };
  struct Tag {
    uint32_t tag = 0;
    std::string ps;
    uint32_t ps_address = 0;
    double share = 0;
    double begin = 0;
    double end = 1;
    uint32_t multicast_group = 0;
    std::vector<Member> members;
    std::vector<Aggregator> aggregators;

    // The aggregator entry of `switch_id`, or nullptr.
    const Aggregator* FindAggregator(const std::string& switch_id) const;
    // The index of `worker` among members, or -1.
    int MemberIndex(const std::string& worker) const;
  };
  std::vector<Tag> tags;
  uint32_t generation = 0;  // the job's aggregation generation (in every tag's bits 30-31)
  // Ring all-reduce jobs (docs/rina.md): `ring` (members in order) and `ring_roles`; both empty
  // for PS jobs. Each role: worker, role (agent | member | rack-worker), neighbour addresses (0
  // when absent), the rack's agent, ToR and tag.
  struct RingRole {
    std::string worker;
    std::string role;
    std::string prev;
    std::string next;
    uint32_t prev_address = 0;
    uint32_t next_address = 0;
    std::string agent;
    std::string tor;
    uint32_t rack_tag = 0;
  };
  std::vector<std::string> ring;
  std::vector<RingRole> ring_roles;
};

absl::StatusOr<JobConfig> ParseJobConfig(std::string_view json_text);
absl::StatusOr<JobConfig> JobConfigFromJson(const nlohmann::json& json);

}  // namespace inac::agent
