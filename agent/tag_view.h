// How a PS reads the packets of one tag value: whose data each source address and bitmap carries
// (docs/agents.md, "PS accounting"). Shared by the PS of a fixed run (agent/ps.h) and the PS that
// serves client sessions (agent/ps_serve.h).
//
// Contract:
//  - Members are numbered canonically by the PS (by worker id, over all its tags and every
//    configuration it adopts), so a sum counted under one plan stays counted under the next.
//  - A packet from a member's address carries that member (raw). A packet from an aggregator's
//    address carries the members behind the set bits of its bitmap over the aggregator's
//    `inputs`, an input that is itself an aggregator expanding to its own inputs, recursively.
//  - ReadContributors answers kUnknownSource for anyone else, and kViolation (with a message)
//    for an empty bitmap, a bit beyond the inputs, an input that names nobody or itself, or
//    inputs that name a worker twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "agent/job_config.h"
#include "agent/layout.h"
#include "agent/packet.h"

namespace inac::agent {

// The members behind each input bit of one aggregator (empty + `error` when the input is unknown).
struct AggregatorInputs {
  std::vector<std::vector<int>> members;
  std::vector<std::string> error;
};

// One tag value as the PS reads it. A re-plan that aggregates the job elsewhere gives its tags
// new values (core::AggregationTag's generation); each value keeps the reading of the
// configuration it came with.
struct TagView {
  const JobConfig::Tag* tag = nullptr;
  TagSpan span;  // the PS of a fixed run: the value's lanes; unused by the serving PS
  absl::flat_hash_map<uint32_t, int> member_at;         // address -> member index (canonical)
  absl::flat_hash_map<uint32_t, size_t> aggregator_at;  // address -> aggregator index
  std::vector<AggregatorInputs> inputs;                 // per aggregator, canonical member indices
  uint32_t window = 0;  // the largest window a member of the tag may run (sizes kept results)
};

// The view of tag `t`, laid out as `span`; `canonical` maps every member's worker id to its
// canonical index (FailedPrecondition naming a member that is missing there). `min_window` is
// the workers' forced window, if any.
absl::StatusOr<TagView> MakeTagView(const JobConfig::Tag& t, const TagSpan& span,
                                    const absl::flat_hash_map<std::string, int>& canonical,
                                    uint32_t min_window);

enum class Contributors { kMember, kAggregator, kUnknownSource, kViolation };

// Whose data `packet` from `source` carries under `view`: their canonical indices in *members
// (sorted for an aggregator's packet). kViolation sets *violation to why.
Contributors ReadContributors(const TagView& view, uint32_t source, const InaPacket& packet,
                              std::vector<int>* members, std::string* violation);

}  // namespace inac::agent
