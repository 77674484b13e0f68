// The worker's send path (agent/worker_state.h): which chunks the window lets out, pacing, the
// retransmission timers and what a timeout means, the RTT estimate (RFC 6298) and congestion
// control (agent/worker.h WorkerOptions::congestion_control).
#include <algorithm>
#include <cstdlib>

#include "agent/clock.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/worker_state.h"

namespace inac::agent {

int64_t Worker::SendNewChunks(int64_t it) {
  int64_t paced_until = 0;  // the earliest a paced run may send again (0: none waits)
  for (size_t i = 0; i < runs_.size(); ++i) {
    TagRun& r = runs_[i];
    const int64_t limit = r.Limit(options_.congestion_control);
    // New chunks leave in batches: with chunks in flight, wait until a batch's worth of the
    // window is free (a quarter of it, at most a steering block), so that results arriving
    // one by one do not turn into sends one by one (a system call and a wake-up each).
    const int64_t batch = std::clamp<int64_t>(limit / 4, 1, kSteeringBlock);
    if (r.next > r.base && r.base + limit - r.next < batch && r.base + limit < r.span.chunks) {
      continue;
    }
    while (r.next < r.span.chunks && r.next < r.base + limit) {
      const ChunkState& st = State(r, r.next);
      if (!st.done && !st.acked && !(st.sent && st.sent_tag == r.span.tag)) {
        const int64_t gap = PacingGapUs(r);
        if (gap > 0) {
          const int64_t at = now_us_ = NowUs();
          if (at < next_send_us_) {
            paced_until = paced_until == 0 ? next_send_us_ : std::min(paced_until, next_send_us_);
            break;
          }
          next_send_us_ = std::max(next_send_us_, at - gap) + gap;
        }
        Send(i, it, r.next, /*retransmit=*/false);
      }
      ++r.next;
    }
  }
  return paced_until;
}

void Worker::Send(size_t run, int64_t it, int64_t k, bool retransmit) {
  TagRun& r = runs_[run];
  ChunkState& st = State(r, k);
  InaPacket p;  // the header; the lanes go from the gradient straight into the socket's batch
  p.tag = r.span.tag;
  p.chunk = Wire(r.span, it, k);
  p.slot = r.Slot(p.chunk);
  p.flags = retransmit ? kFlagRetransmit : 0;
  p.count = 1;
  p.bitmap = 0;
  const int64_t b = r.span.ChunkBegin(k), e = r.span.ChunkEnd(k);
  // One GSO send never spans two steering blocks (a threaded PS steers each send whole).
  const auto block = static_cast<uint32_t>(
      (session_ ? static_cast<int64_t>(p.chunk) : r.span.first_chunk + k) / kSteeringBlock);
  std::span<uint8_t> out =
      socket_->QueueInPlace(r.tag->ps_address, options_.socket.port, kPacketBytes, block);
  EncodePacketHeader(p, out.data());
  StoreWireLanes(source_ + b, static_cast<int>(e - b), out.data() + kHeaderBytes);
  std::fill(out.begin() + kHeaderBytes + 4 * (e - b), out.end(), 0);  // a short last chunk
  st.sent = true;
  st.sent_tag = r.span.tag;
  if (retransmit) {
    ++report_.retransmissions;
    st.resent = true;
  } else {
    // The first copy waits the current retransmission timeout (RFC 6298), at least
    // timeout_ms: a slow fabric (BMv2 processes a few thousand packets a second) is not
    // flooded with spurious retransmissions.
    st.sent_us = now_us_;
    st.sent_seq = ++send_seq_;
    st.timeout_us = rto_us_;
  }
  st.deadline_us = now_us_ + st.timeout_us;
  timers_.push(Timer{st.deadline_us, r.span.first_chunk + k});
}

void Worker::FireTimers(int64_t it, int64_t now) {
  while (!timers_.empty() && timers_.top().at_us <= now) {
    Timer t = timers_.top();
    timers_.pop();
    ChunkState& st = chunks_[static_cast<size_t>(t.g)];
    const uint32_t i = owner_[static_cast<size_t>(t.g)];
    if (st.done || st.deadline_us != t.at_us || i == kNotMine) continue;  // answered, re-armed
    if (LossEvidenceMode() && !st.acked && !st.resent && !LikelyLost(runs_[i], st, now)) {
      // Nothing sent after it has completed and results still flow: the chunk most likely
      // waits in its aggregator for a slower worker. A retransmission would flush the partial
      // sum to the PS; wait one more timeout instead.
      st.deadline_us = now + st.timeout_us;
      timers_.push(Timer{st.deadline_us, t.g});
      ++report_.timeouts_deferred;
      continue;
    }
    if (options_.congestion_control && !st.acked) OnTimeout(runs_[i], st.sent_us);
    st.timeout_us = std::min(st.timeout_us * 2, options_.max_timeout_ms * 1000);
    Send(i, it, t.g - runs_[i].span.first_chunk, /*retransmit=*/true);
  }
}

void Worker::SampleRtt(int64_t rtt_us) {
  if (srtt_us_ < 0) {
    srtt_us_ = rtt_us;
    rttvar_us_ = rtt_us / 2;
  } else {
    rttvar_us_ = (3 * rttvar_us_ + std::abs(srtt_us_ - rtt_us)) / 4;
    srtt_us_ = (7 * srtt_us_ + rtt_us) / 8;
  }
  rto_us_ = std::clamp<int64_t>(srtt_us_ + 4 * rttvar_us_, options_.timeout_ms * 1000,
                                options_.max_timeout_ms * 1000);
}

void Worker::OnNewResult(TagRun& r) {
  if (r.cwnd < r.ssthresh) {
    r.cwnd += 1;
  } else {
    r.cwnd += 1.0 / std::max(1.0, r.cwnd);
  }
  r.cwnd = std::min<double>(r.cwnd, r.window);
}

void Worker::OnTimeout(TagRun& r, int64_t sent_us) {
  if (sent_us < r.cut_us) return;
  r.ssthresh = std::max(r.cwnd / 2, 2.0);
  r.cwnd = r.ssthresh;
  r.cut_us = now_us_;
  ++report_.window_cuts;
}

bool Worker::LossEvidenceMode() const {
  return options_.congestion_control && !options_.acknowledged_window;
}

bool Worker::LikelyLost(const TagRun& r, const ChunkState& st, int64_t now) const {
  if (r.completed_sent_seq > st.sent_seq) return true;
  return now - std::max(r.last_result_us, st.sent_us) >= 2 * rto_us_;
}

void Worker::FastRetransmit(size_t run, int64_t it, int64_t k, uint64_t sent_seq) {
  TagRun& r = runs_[run];
  if (r.base >= r.span.chunks) return;
  // Only results of base's own steering block count: a PS with several threads answers each
  // block from its own thread, so blocks may overtake each other without any loss.
  if ((r.span.first_chunk + k) / kSteeringBlock != (r.span.first_chunk + r.base) / kSteeringBlock) {
    return;
  }
  ChunkState& b = State(r, r.base);
  if (!b.sent || b.done || b.acked || b.resent || b.sent_seq >= sent_seq) return;
  if (r.dup_base != r.base) {
    r.dup_base = r.base;
    r.dups = 0;
  }
  if (++r.dups != 3) return;
  OnTimeout(r, b.sent_us);
  b.timeout_us = std::min(b.timeout_us * 2, options_.max_timeout_ms * 1000);
  Send(run, it, r.base, /*retransmit=*/true);
  ++report_.fast_retransmissions;
}

int64_t Worker::PacingGapUs(const TagRun& r) const {
  if (!options_.congestion_control || srtt_us_ <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(srtt_us_) / (2.0 * std::max(1.0, r.cwnd)));
}

}  // namespace inac::agent
