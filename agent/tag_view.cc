#include "agent/tag_view.h"

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

}  // namespace inac::agent
