// What comes back to the worker (agent/worker_state.h): results, matched to gradient chunks by
// the lanes of their tag value, Rina's acknowledgements (agent/worker.h
// WorkerOptions::acknowledged_window), and `check` of the sums against the synthetic gradients.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/gradient.h"
#include "agent/packet.h"
#include "agent/worker_state.h"

namespace inac::agent {

bool Worker::OnDatagram(std::span<const uint8_t> payload, int64_t it) {
  const int64_t g = MatchResult(payload, it);
  if (g < 0) return false;
  const uint32_t run = owner_[static_cast<size_t>(g)];
  TagRun& r = runs_[run];
  const int64_t k = g - r.span.first_chunk;
  ChunkState& st = chunks_[static_cast<size_t>(g)];
  if (options_.acknowledged_window && (header_.flags & kFlagAggregate) != 0) {
    OnAcknowledgement(r, st, g);
    return false;
  }
  if (st.done) {
    ++report_.duplicate_results;
    return false;
  }
  if (options_.acknowledged_window && !r.results_seen) ExpediteAcknowledged(r);
  st.done = true;
  if (!st.resent && !st.acked) {
    SampleRtt(now_us_ - st.sent_us);
    if (options_.congestion_control) OnNewResult(r);
  }
  r.completed_sent_seq = std::max(r.completed_sent_seq, st.sent_seq);
  r.last_result_us = now_us_;
  --remaining_;
  ++report_.results;
  const int64_t b = r.span.ChunkBegin(k), e = r.span.ChunkEnd(k);
  LoadWireLanes(payload.data() + kHeaderBytes, static_cast<int>(e - b), result_data_ + b);
  AdvanceBase(r);
  if (LossEvidenceMode()) FastRetransmit(run, it, k, st.sent_seq);
  return true;
}

int64_t Worker::MatchResult(std::span<const uint8_t> payload, int64_t it) {
  InaPacket* packet = &header_;  // the header; the lanes go straight into the result
  if (!DecodePacketHeader(payload, packet) || (packet->flags & kFlagResult) == 0) {
    ++report_.ignored;
    return -1;
  }
  auto found = spans_.find(packet->tag);
  if (found == spans_.end()) {
    ++report_.ignored;
    return -1;
  }
  int64_t g;
  if (session_) {
    g = static_cast<int64_t>(packet->chunk) - wire_base_;  // unique over the session's tags
    if (g < 0 || g >= layout_.chunks) {
      ++report_.duplicate_results;  // another all-reduce's
      return -1;
    }
  } else {
    const TagSpan& span = found->second;
    const int64_t wire_k = static_cast<int64_t>(packet->chunk) - it * span.chunks;
    if (wire_k < 0 || wire_k >= span.chunks) {
      ++report_.duplicate_results;  // another iteration's
      return -1;
    }
    g = span.first_chunk + wire_k;
  }
  if (owner_[static_cast<size_t>(g)] == kNotMine) {
    ++report_.ignored;
    return -1;
  }
  return g;
}

void Worker::OnAcknowledgement(TagRun& r, ChunkState& st, int64_t g) {
  // Rina: the agent holds the chunk's sum; the result comes after the ring.
  if (st.done || st.acked) return;
  st.acked = true;
  ++report_.acknowledgements;
  if (!st.resent) SampleRtt(now_us_ - st.sent_us);
  // No retransmission until the result is overdue (the ring takes its time): then a copy
  // asks the agent again.
  st.timeout_us = std::max(options_.max_timeout_ms, options_.give_up_ms / 4) * 1000;
  st.deadline_us = now_us_ + st.timeout_us;
  timers_.push(Timer{st.deadline_us, g});
  AdvanceBase(r);
}

void Worker::ExpediteAcknowledged(TagRun& r) {
  // Rina: the agent sends the iteration's results together; once the first one is here, an
  // acknowledged chunk whose result does not follow soon was lost: ask again then.
  r.results_seen = true;
  const int64_t at = now_us_ + std::max<int64_t>(4 * rto_us_, 100000);
  for (int64_t j = 0; j < r.span.chunks; ++j) {
    ChunkState& other = State(r, j);
    if (!other.acked || other.done || other.deadline_us <= at) continue;
    other.deadline_us = at;
    timers_.push(Timer{at, r.span.first_chunk + j});
  }
}

absl::Status Worker::Check(int64_t it) {
  std::vector<int32_t> want, part;
  for (const TagRun& r : runs_) {
    if (r.span.lanes == 0) continue;
    want.assign(static_cast<size_t>(r.span.lanes), 0);
    part.resize(want.size());
    std::vector<std::string> summed = options_.check_workers;
    if (summed.empty()) {
      for (const auto& m : r.tag->members) summed.push_back(m.worker);
    }
    for (const std::string& w : summed) {
      FillSynthetic(options_.seed, w, it, r.span.first_lane, part);
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] =
            static_cast<int32_t>(static_cast<uint32_t>(want[i]) + static_cast<uint32_t>(part[i]));
      }
    }
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t got = result_[static_cast<size_t>(r.span.first_lane) + i];
      if (got != want[i]) {
        const int64_t k = static_cast<int64_t>(i) / kLanes;
        return absl::DataLossError(absl::StrCat(
            "check failed: iteration ", it, ", tag ", r.span.tag, ", chunk ",
            it * r.span.chunks + k, ", lane ", static_cast<int64_t>(i) % kLanes, " (gradient lane ",
            r.span.first_lane + static_cast<int64_t>(i), "): got ", got, ", want ", want[i]));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace inac::agent
