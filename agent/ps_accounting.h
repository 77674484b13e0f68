// What the PS of a fixed run (agent/ps.h) and the PS that serves client sessions
// (agent/ps_serve.h) share, by the accounting of docs/agents.md ("PS accounting"): how a packet of
// one tag value is read (whose data its source and bitmap carry), the partial sum of a chunk and
// the pool that holds them, and where a result goes.
//
// Contract:
//  - Members are numbered canonically by the PS (by worker id, over all its tags and every
//    configuration it adopts), so a sum counted under one plan stays counted under the next.
//  - A packet from a member's address carries that member (raw). A packet from an aggregator's
//    address carries the members behind the set bits of its bitmap over the aggregator's
//    `inputs`, an input that is itself an aggregator expanding to its own inputs, recursively.
//  - ReadContributors answers kUnknownSource for anyone else, and kViolation (with a message)
//    for an empty bitmap, a bit beyond the inputs, an input that names nobody or itself, or
//    inputs that name a worker twice. CountContributors does the same and counts the packet.
//  - AddToSum counts a packet's members into a chunk's sum exactly once: all of them counted
//    already is a duplicate, some of them a partial overlap (a re-plan overlap when the sum holds
//    packets of several tag values); nothing is added then.
//  - QueueResult: without unicast the result goes to the first canonical member (the switches
//    replicate it to every member); with unicast to `only_member`, or to every member of the tag.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "agent/job_config.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/ps.h"
#include "agent/udp_socket.h"

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

// ReadContributors, counted in `c`: raw (with *raw_member the member, else -1), aggregate or
// fallback (by the AGGREGATE flag; violations too), unknown_source, count_mismatch.
Contributors CountContributors(const TagView& view, uint32_t source, const InaPacket& packet,
                               std::vector<int>* members, int* raw_member, std::string* violation,
                               PsCounters* c);

// A chunk's sum while its members' data comes in.
struct PartialSum {
  absl::InlinedVector<uint8_t, 32> counted;  // per member (canonical index)
  size_t n = 0;                              // members counted
  std::array<uint32_t, kLanes> sum{};
  uint32_t slot = 0;       // of the chunk's first packet
  size_t view = 0;         // the tag value (the PS's view index) of the first packet counted
  bool mixed = false;      // packets of several tag values counted (a re-plan during the chunk)
  int64_t touched_us = 0;  // the last packet for the chunk (the serving PS's staleness)

  // Empty, for `members` canonical members, first touched by a packet in `slot` of `view`.
  void Start(size_t members, uint32_t slot, size_t view, int64_t now_us);
};

enum class SumOutcome { kAdded, kDuplicate, kReplanOverlap, kPartialOverlap };

// Counts `members` (canonical, distinct) of a packet of tag value `view` into `acc` with the
// lanes of its wire payload (a whole packet), unless any of them is counted already (then
// *seen says how many, and nothing changes but `mixed`).
SumOutcome AddToSum(PartialSum& acc, std::span<const int> members, size_t view,
                    std::span<const uint8_t> payload, size_t* seen);

// The open sums of a PS, by key; sums are reused, so an open chunk costs no allocation.
class SumPool {
 public:
  // The sum of `key`, and whether it was opened now (then Start it).
  std::pair<PartialSum*, bool> Open(int64_t key);
  PartialSum* Find(int64_t key);
  void Close(int64_t key);
  void Clear();
  // Closes every sum for which drop(sum) is true; how many.
  template <typename Drop>
  int64_t CloseIf(Drop drop) {
    std::vector<int64_t> keys;
    for (const auto& [key, index] : open_) {
      if (drop(pool_[index])) keys.push_back(key);
    }
    for (int64_t key : keys) Close(key);
    return static_cast<int64_t>(keys.size());
  }

 private:
  absl::flat_hash_map<int64_t, uint32_t> open_;  // key -> index into pool_
  std::vector<PartialSum> pool_;
  std::vector<uint32_t> free_;
};

// Queues result `r` of tag `t` on `socket` (port `port`) by the contract above; `members` are
// the PS's canonical members.
void QueueResult(UdpSocket& socket, uint16_t port, bool unicast,
                 const std::vector<JobConfig::Member>& members, const JobConfig::Tag& t,
                 const InaPacket& r, int only_member);

}  // namespace inac::agent
