// The worker's runs (agent/worker_state.h): which tags of the job's configuration this worker
// is a member of, with its slots and windows, and re-plans adopted in the middle of an iteration
// (agent/worker.h, "Re-plans").
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/layout.h"
#include "agent/worker_state.h"

namespace inac::agent {

void Worker::BuildRuns() {
  runs_.clear();
  owner_.assign(static_cast<size_t>(layout_.chunks), kNotMine);
  for (size_t i = 0; i < config_->tags.size(); ++i) {
    const JobConfig::Tag& t = config_->tags[i];
    const TagSpan& span = layout_.tags[i];
    spans_[span.tag] = span;
    if (t.MemberIndex(options_.worker) < 0) continue;
    TagRun run;
    Configure(t, span, &run);
    for (int64_t k = 0; k < span.chunks; ++k) {
      owner_[static_cast<size_t>(span.first_chunk + k)] = static_cast<uint32_t>(runs_.size());
    }
    runs_.push_back(std::move(run));
  }
}

void Worker::Configure(const JobConfig::Tag& t, const TagSpan& span, TagRun* run) const {
  run->tag = &t;
  run->span = span;
  const int me = t.MemberIndex(options_.worker);
  const JobConfig::Aggregator* agg = t.FindAggregator(t.members[me].aggregation_node);
  uint32_t grant = 0;
  run->slot_mode = TagRun::SlotMode::kZero;
  run->slot_offset = 0;
  run->slot_count = 0;
  if (agg != nullptr) {
    grant = agg->window;
    run->slot_offset = agg->slot_offset;
    run->slot_count = agg->aggregator_count;
    run->slot_mode = (agg->aggregator_count > 0 && (agg->window > 0 || options_.window > 0))
                         ? TagRun::SlotMode::kWindow
                         : TagRun::SlotMode::kBeyond;
  }
  const uint32_t fallback = agg == nullptr ? kDirectWindow : kDefaultWindow;
  run->window = options_.window > 0 ? options_.window : (grant > 0 ? grant : fallback);
  if (options_.acknowledged_window && options_.window == 0) {
    run->window = std::min(run->window, kDefaultWindow);
  }
  // A re-plan keeps the run's congestion state (the path is mostly the same); a fresh run
  // starts small.
  auto before = cwnd_of_.find(span.tag);
  if (before != cwnd_of_.end()) {
    run->cwnd = before->second.first;
    run->ssthresh = before->second.second;
  } else {
    run->cwnd = std::min<double>(kInitialCongestionWindow, run->window);
    run->ssthresh = run->window;
  }
}

void Worker::SaveCongestion() {
  for (const TagRun& r : runs_) cwnd_of_[r.span.tag] = {r.cwnd, r.ssthresh};
}

absl::Status Worker::Adopt(std::shared_ptr<const JobConfig> next, int64_t it) {
  if (next->plan_version == config_->plan_version && next->tags.size() == config_->tags.size()) {
    bool same = true;
    for (size_t i = 0; i < next->tags.size() && same; ++i) {
      same = next->tags[i].tag == config_->tags[i].tag;
    }
    if (same) return absl::OkStatus();  // the plan we run
  }
  auto layout = ComputeLayout(*next, lanes_);
  if (!layout.ok()) return layout.status();
  if (absl::Status s = CheckContinuation(*config_, layout_, *next, *layout); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("iteration ", it, ": ", s.message(), "; restart the agents"));
  }
  config_ = std::move(next);
  layout_ = std::move(*layout);
  SaveCongestion();
  BuildRuns();  // the same chunks are ours (CheckContinuation: the same members)
  for (size_t i = 0; i < runs_.size(); ++i) {
    TagRun& r = runs_[i];
    AdvanceBase(r);
    r.next = r.base;  // the send loop skips the chunks in flight under this tag value
    // The switches hold entries for the new tag values only: what is in flight under another
    // value is dropped there. Send it again now, as first copies, so that it can still
    // aggregate; what lies beyond the window waits for its turn (two chunks in flight on one
    // slot would discard each other's partial sums).
    for (int64_t k = r.base; k < r.span.chunks; ++k) {
      ChunkState& st = State(r, k);
      if (st.done || st.acked || !st.sent || st.sent_tag == r.span.tag) continue;
      if (k >= r.base + r.window) {
        st.sent = false;
        st.deadline_us = 0;  // its timer is void
        continue;
      }
      Send(i, it, k, /*retransmit=*/false);
      st.resent = true;  // no RTT sample (Karn)
      ++report_.resent_on_new_tag;
    }
  }
  report_.plans.push_back(config_->plan_version);
  return absl::OkStatus();
}

}  // namespace inac::agent
