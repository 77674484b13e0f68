#include "agent/ps_accounting.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/worker.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

// The members behind `node` (a member, an aggregator of the tag, or a member's address).
void Expand(const JobConfig::Tag& t, const std::string& node, std::set<std::string>* path,
            std::vector<int>* out, std::string* error) {
  if (int m = t.MemberIndex(node); m >= 0) {
    out->push_back(m);
    return;
  }
  if (const JobConfig::Aggregator* a = t.FindAggregator(node); a != nullptr) {
    if (!path->insert(node).second) {
      *error = absl::StrCat("input ", node, " is its own descendant");
      return;
    }
    for (const std::string& in : a->inputs) Expand(t, in, path, out, error);
    path->erase(node);
    return;
  }
  if (auto address = core::ParseIpv4(node); address.has_value()) {
    for (size_t m = 0; m < t.members.size(); ++m) {
      if (t.members[m].address == *address) {
        out->push_back(static_cast<int>(m));
        return;
      }
    }
  }
  *error = absl::StrCat("input ", node, " is neither a member nor an aggregator of the tag");
}

}  // namespace

absl::StatusOr<TagView> MakeTagView(const JobConfig::Tag& t, const TagSpan& span,
                                    const absl::flat_hash_map<std::string, int>& canonical_of,
                                    uint32_t min_window) {
  TagView v;
  v.tag = &t;
  v.span = span;
  std::vector<int> canonical(t.members.size(), -1);
  for (size_t m = 0; m < t.members.size(); ++m) {
    auto c = canonical_of.find(t.members[m].worker);
    if (c == canonical_of.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tag ", t.tag, ": member ", t.members[m].worker, " is new"));
    }
    canonical[m] = c->second;
    v.member_at[t.members[m].address] = canonical[m];
  }
  uint32_t window = std::max(min_window, kDefaultWindow);
  for (const JobConfig::Member& m : t.members) {
    if (t.FindAggregator(m.aggregation_node) == nullptr) window = std::max(window, kDirectWindow);
  }
  for (size_t a = 0; a < t.aggregators.size(); ++a) {
    const JobConfig::Aggregator& agg = t.aggregators[a];
    window = std::max(window, agg.window);
    if (v.member_at.count(agg.address)) {
      return absl::FailedPreconditionError(
          absl::StrCat("tag ", t.tag, ": aggregator ", agg.switch_id, " has a member's address"));
    }
    v.aggregator_at[agg.address] = a;
    AggregatorInputs in;
    for (const std::string& node : agg.inputs) {
      std::vector<int> members;
      std::string error;
      std::set<std::string> path{agg.switch_id};
      Expand(t, node, &path, &members, &error);
      for (int& m : members) m = canonical[static_cast<size_t>(m)];
      in.members.push_back(std::move(members));
      in.error.push_back(std::move(error));
    }
    v.inputs.push_back(std::move(in));
  }
  v.window = window;
  return v;
}

Contributors ReadContributors(const TagView& view, uint32_t source, const InaPacket& packet,
                              std::vector<int>* members, std::string* violation) {
  members->clear();
  if (auto m = view.member_at.find(source); m != view.member_at.end()) {
    members->push_back(m->second);
    return Contributors::kMember;
  }
  auto a = view.aggregator_at.find(source);
  if (a == view.aggregator_at.end()) return Contributors::kUnknownSource;
  const AggregatorInputs& in = view.inputs[a->second];
  const JobConfig::Aggregator& agg = view.tag->aggregators[a->second];
  if (packet.bitmap == 0) {
    *violation = absl::StrCat(" (", agg.switch_id, "): empty bitmap");
    return Contributors::kViolation;
  }
  for (int bit = 0; bit < 64; ++bit) {
    if (((packet.bitmap >> bit) & 1) == 0) continue;
    if (static_cast<size_t>(bit) >= in.members.size()) {
      *violation = absl::StrCat(" (", agg.switch_id, "): bit ", bit, " beyond its ",
                                in.members.size(), " inputs");
      return Contributors::kViolation;
    }
    if (!in.error[bit].empty()) {
      *violation = absl::StrCat(" (", agg.switch_id, "): bit ", bit, ": ", in.error[bit]);
      return Contributors::kViolation;
    }
    members->insert(members->end(), in.members[bit].begin(), in.members[bit].end());
  }
  std::sort(members->begin(), members->end());
  if (std::adjacent_find(members->begin(), members->end()) != members->end()) {
    *violation = absl::StrCat(" (", agg.switch_id, "): its inputs name a worker twice");
    return Contributors::kViolation;
  }
  return Contributors::kAggregator;
}

Contributors CountContributors(const TagView& view, uint32_t source, const InaPacket& packet,
                               std::vector<int>* members, int* raw_member, std::string* violation,
                               PsCounters* c) {
  *raw_member = -1;
  const Contributors kind = ReadContributors(view, source, packet, members, violation);
  switch (kind) {
    case Contributors::kMember:
      ++c->raw;
      *raw_member = (*members)[0];
      break;
    case Contributors::kAggregator:
    case Contributors::kViolation:
      if (packet.flags & kFlagAggregate) {
        ++c->aggregate;
      } else {
        ++c->fallback;
      }
      break;
    case Contributors::kUnknownSource:
      ++c->unknown_source;
      return kind;
  }
  if (kind != Contributors::kViolation && static_cast<size_t>(packet.count) != members->size()) {
    ++c->count_mismatch;
  }
  return kind;
}

void PartialSum::Start(size_t members, uint32_t first_slot, size_t first_view, int64_t now_us) {
  counted.assign(members, 0);
  n = 0;
  slot = first_slot;
  view = first_view;
  mixed = false;
  touched_us = now_us;
}

SumOutcome AddToSum(PartialSum& acc, std::span<const int> members, size_t view,
                    std::span<const uint8_t> payload, size_t* seen) {
  acc.mixed |= acc.view != view;
  *seen = 0;
  for (int m : members) *seen += acc.counted[static_cast<size_t>(m)];
  if (*seen == members.size()) return SumOutcome::kDuplicate;
  // Members already counted from packets of an old plan's tag value: expected once per chunk in
  // flight across a re-plan; the workers' retransmissions bring the rest one by one.
  if (*seen > 0) return acc.mixed ? SumOutcome::kReplanOverlap : SumOutcome::kPartialOverlap;
  for (int m : members) acc.counted[static_cast<size_t>(m)] = 1;
  if (acc.n == 0) {
    // The first data of the chunk: stored, not added (a reused sum holds old lanes).
    LoadWireLanes(payload.data() + kHeaderBytes, kLanes,
                  reinterpret_cast<int32_t*>(acc.sum.data()));
  } else {
    AddWireLanes(payload.data() + kHeaderBytes, kLanes, acc.sum.data());
  }
  acc.n += members.size();
  return SumOutcome::kAdded;
}

std::pair<PartialSum*, bool> SumPool::Open(int64_t key) {
  auto [at, fresh] = open_.try_emplace(key, 0);
  if (fresh) {
    if (free_.empty()) {
      free_.push_back(static_cast<uint32_t>(pool_.size()));
      pool_.emplace_back();
    }
    at->second = free_.back();
    free_.pop_back();
  }
  return {&pool_[at->second], fresh};
}

PartialSum* SumPool::Find(int64_t key) {
  auto at = open_.find(key);
  return at == open_.end() ? nullptr : &pool_[at->second];
}

void SumPool::Close(int64_t key) {
  auto at = open_.find(key);
  if (at == open_.end()) return;
  free_.push_back(at->second);
  open_.erase(at);
}

void SumPool::Clear() {
  for (const auto& [key, index] : open_) free_.push_back(index);
  open_.clear();
}

void QueueResult(UdpSocket& socket, uint16_t port, bool unicast,
                 const std::vector<JobConfig::Member>& members, const JobConfig::Tag& t,
                 const InaPacket& r, int only_member) {
  // Encoded straight into the socket's batch.
  auto queue_to = [&](uint32_t address) {
    (void)EncodePacketInto(r, socket.QueueInPlace(address, port, kPacketBytes));
  };
  if (!unicast) {
    // The switches replicate it to every member (any member's address routes it there): the
    // first member of the first configuration, whatever the plan.
    queue_to(members.front().address);
    return;
  }
  if (only_member >= 0) {
    queue_to(members[static_cast<size_t>(only_member)].address);
    return;
  }
  bool first = true;
  for (const auto& m : t.members) {
    // One copy of the bytes for every member: each further member's datagram points at it.
    if (first) {
      queue_to(m.address);
    } else {
      (void)socket.QueueCopy(m.address, port);
    }
    first = false;
  }
}

}  // namespace inac::agent
