#include "agent/layout.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/packet.h"
#include "core/topology.h"

namespace inac::agent {

int64_t TagSpan::ChunkEnd(int64_t k) const {
  return std::min(first_lane + lanes, first_lane + static_cast<int64_t>(kLanes) * (k + 1));
}

absl::StatusOr<Layout> ComputeLayout(const JobConfig& config, int64_t lanes) {
  if (lanes < 0) return absl::InvalidArgumentError("gradient: negative number of lanes");
  if (config.tags.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", config.job_id, " has no aggregation tags (not scheduled yet?)"));
  }
  Layout layout;
  layout.lanes = lanes;
  layout.chunks = (lanes + kLanes - 1) / kLanes;
  layout.tags.resize(config.tags.size());

  // PSs in order of first appearance, with their tags.
  std::vector<std::string> order;
  std::map<std::string, std::vector<size_t>> tags_of;
  for (size_t i = 0; i < config.tags.size(); ++i) {
    const JobConfig::Tag& t = config.tags[i];
    if (!tags_of.count(t.ps)) order.push_back(t.ps);
    std::vector<size_t>& list = tags_of[t.ps];
    if (!list.empty() && std::abs(config.tags[list.front()].share - t.share) > 1e-9) {
      return absl::FailedPreconditionError(absl::StrCat(
          "tags[", i, "]: share ", t.share, " differs from the other tags of PS ", t.ps));
    }
    list.push_back(i);
  }
  double total = 0;
  for (const std::string& ps : order) total += config.tags[tags_of[ps].front()].share;

  const double c = static_cast<double>(layout.chunks);
  double before = 0;
  for (size_t p = 0; p < order.size(); ++p) {
    std::vector<size_t>& list = tags_of[order[p]];
    const double share = config.tags[list.front()].share / total;
    const int64_t start = std::llround(before * c);
    before += share;
    const int64_t end = p + 1 == order.size() ? layout.chunks : std::llround(before * c);
    const int64_t k = std::max<int64_t>(0, end - start);
    std::sort(list.begin(), list.end(),
              [&](size_t a, size_t b) { return config.tags[a].begin < config.tags[b].begin; });
    double expect = 0;
    for (size_t i : list) {
      const JobConfig::Tag& t = config.tags[i];
      if (std::abs(t.begin - expect) > 1e-6) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the tags of PS ", order[p], " do not tile its shard: tag ", t.tag, " begins at ",
            t.begin, ", expected ", expect, " (lanes would be left out or sent twice)"));
      }
      expect = t.end;
    }
    if (std::abs(expect - 1) > 1e-6) {
      return absl::FailedPreconditionError(
          absl::StrCat("the tags of PS ", order[p], " do not tile its shard: they end at ", expect,
                       ", not 1 (lanes would be left out)"));
    }
    int64_t b = start;  // each tag begins where the previous one ended
    for (size_t n = 0; n < list.size(); ++n) {
      const JobConfig::Tag& t = config.tags[list[n]];
      const int64_t e =
          start + (n + 1 == list.size() ? k : std::llround(t.end * static_cast<double>(k)));
      TagSpan& span = layout.tags[list[n]];
      span.tag = t.tag;
      span.tag_index = list[n];
      span.first_chunk = b;
      span.chunks = std::max<int64_t>(0, e - b);
      span.first_lane = b * kLanes;
      span.lanes = std::max<int64_t>(0, std::min(lanes, e * kLanes) - span.first_lane);
      b = std::max(b, e);
    }
  }
  return layout;
}

std::vector<uint32_t> ChunkOwners(const Layout& layout) {
  std::vector<uint32_t> owners(static_cast<size_t>(layout.chunks), 0);
  for (size_t i = 0; i < layout.tags.size(); ++i) {
    const TagSpan& s = layout.tags[i];
    for (int64_t k = 0; k < s.chunks; ++k) {
      owners[static_cast<size_t>(s.first_chunk + k)] = static_cast<uint32_t>(i);
    }
  }
  return owners;
}

absl::Status CheckContinuation(const JobConfig& from, const Layout& from_layout,
                               const JobConfig& to, const Layout& to_layout) {
  if (from.job_id != to.job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("the new configuration is of job ", to.job_id, ", not ", from.job_id));
  }
  if (from_layout.chunks != to_layout.chunks || from_layout.lanes != to_layout.lanes) {
    return absl::FailedPreconditionError(absl::StrCat("plan ", to.plan_version, " lays out ",
                                                      to_layout.chunks, " chunks, not ",
                                                      from_layout.chunks));
  }
  // A tag value the two configurations share must carry the same lanes.
  std::map<uint32_t, const TagSpan*> spans;
  for (const TagSpan& s : from_layout.tags) spans[s.tag] = &s;
  for (const TagSpan& s : to_layout.tags) {
    auto old = spans.find(s.tag);
    if (old != spans.end() &&
        (old->second->first_chunk != s.first_chunk || old->second->chunks != s.chunks)) {
      return absl::FailedPreconditionError(
          absl::StrCat("plan ", to.plan_version, " gives tag ", s.tag,
                       " other lanes without a new generation (its old packets would be misread)"));
    }
  }
  auto members = [](const JobConfig::Tag& t) {
    std::map<std::string, uint32_t> out;
    for (const auto& m : t.members) out[m.worker] = m.address;
    return out;
  };
  // Walk the gradient's chunks once, a run of chunks with the same pair of owners at a time.
  auto by_chunk = [](const Layout& l) {
    std::vector<size_t> order;
    for (size_t i = 0; i < l.tags.size(); ++i) {
      if (l.tags[i].chunks > 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return l.tags[a].first_chunk < l.tags[b].first_chunk; });
    return order;
  };
  const std::vector<size_t> a = by_chunk(from_layout), b = by_chunk(to_layout);
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const TagSpan& sa = from_layout.tags[a[i]];
    const TagSpan& sb = to_layout.tags[b[j]];
    const JobConfig::Tag& ta = from.tags[a[i]];
    const JobConfig::Tag& tb = to.tags[b[j]];
    const int64_t lo = std::max(sa.first_chunk, sb.first_chunk);
    if (ta.ps != tb.ps || ta.ps_address != tb.ps_address) {
      return absl::FailedPreconditionError(
          absl::StrCat("plan ", to.plan_version, " sends gradient chunk ", lo, " to PS ", tb.ps,
                       " at ", core::FormatIpv4(tb.ps_address), ", not ", ta.ps, " at ",
                       core::FormatIpv4(ta.ps_address), " (other PSs or shares)"));
    }
    if (members(ta) != members(tb)) {
      return absl::FailedPreconditionError(absl::StrCat("plan ", to.plan_version,
                                                        " gives gradient chunk ", lo, " (PS ",
                                                        ta.ps, ") other members"));
    }
    const int64_t ea = sa.first_chunk + sa.chunks, eb = sb.first_chunk + sb.chunks;
    if (ea <= eb) ++i;
    if (eb <= ea) ++j;
  }
  return absl::OkStatus();
}

}  // namespace inac::agent
