// The worker agent's state machine (agent/worker.h's contract), internal to inac_agent: declared
// here once and implemented by the files that own each of its responsibilities:
//   agent/worker.cc          a fixed run (`inac worker`): options, Run, one iteration's loop
//   agent/worker_plan.cc     the job's configuration as this worker's runs (slots, windows), and
//                            re-plans adopted in the middle of an iteration
//   agent/worker_window.cc   the send path: the window, pacing, retransmission timers, the RTT
//                            estimate and congestion control
//   agent/worker_results.cc  what comes back: results and acknowledgements, and `check`
//   agent/worker_session.cc  the persistent worker of a client session (WorkerSession)
//
// Contract:
//  - A Worker is either a fixed run (Prepare, then Run once) or a session (OpenSession, then any
//    number of AllReduce / Skip); never both. Not thread-safe: one thread drives it.
//  - It keeps a reference to its WorkerOptions, which must outlive it.
//  - Its state is kept per gradient chunk (ChunkState, for the iteration at hand) and per tag it
//    is a member of (TagRun, rebuilt on a re-plan; congestion state carried over by tag value),
//    so that a re-plan may cut the gradient into other tags at any point of an iteration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "agent/job_config.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/report.h"
#include "agent/udp_socket.h"
#include "agent/worker.h"

namespace inac::agent {

// One tag this worker is a member of.
struct TagRun {
  const JobConfig::Tag* tag = nullptr;
  TagSpan span;
  uint32_t window = kDefaultWindow;
  enum class SlotMode { kZero, kWindow, kBeyond } slot_mode = SlotMode::kZero;
  uint32_t slot_offset = 0;
  uint32_t slot_count = 0;
  // Per iteration, over the tag's chunks k (gradient chunk span.first_chunk + k).
  int64_t base = 0;           // lowest chunk without result (or acknowledgement)
  int64_t next = 0;           // next chunk to consider for sending
  bool results_seen = false;  // a result of this iteration arrived
  // Congestion control (WorkerOptions::congestion_control): chunks allowed ahead of `base`,
  // within [1, window]; grows by one per result (slow start, below ssthresh) or by 1/cwnd, halves
  // on a retransmission timeout, at most once per round trip (a chunk first sent after the last
  // cut). Kept across iterations.
  double cwnd = 0;
  double ssthresh = 0;
  int64_t cut_us = 0;  // when cwnd was last cut
  // Loss evidence (congestion control): the latest first transmission among the chunks with a
  // result, when the last result came, and the results of chunks sent after `base`'s first copy
  // (three of them: fast retransmission of `base`).
  uint64_t completed_sent_seq = 0;  // in first-copy order (ChunkState::sent_seq)
  int64_t last_result_us = 0;
  int64_t dup_base = -1;
  int dups = 0;

  // How far past `base` chunks may be out.
  int64_t Limit(bool congestion_control) const {
    if (!congestion_control) return window;
    return std::clamp<int64_t>(static_cast<int64_t>(cwnd), 1, window);
  }

  uint32_t Slot(uint32_t chunk) const {
    switch (slot_mode) {
      case SlotMode::kWindow:
        return static_cast<uint32_t>((static_cast<uint64_t>(slot_offset) + chunk % window) %
                                     slot_count);
      case SlotMode::kBeyond:
        return slot_count;
      case SlotMode::kZero:
        break;
    }
    return 0;
  }
};

// One gradient chunk in the current iteration. Keyed by gradient chunk, not by (tag, chunk), so
// that a re-plan may cut the gradient into other tags in the middle of an iteration.
struct ChunkState {
  bool done = false;
  bool sent = false;      // a copy is out (under sent_tag)
  bool resent = false;    // sent again: its result is no RTT sample (Karn)
  bool acked = false;     // WorkerOptions::acknowledged_window: acknowledged, no result yet
  uint32_t sent_tag = 0;  // the tag value of its last copy
  int64_t deadline_us = 0;
  int64_t timeout_us = 0;
  int64_t sent_us = 0;    // first transmission
  uint64_t sent_seq = 0;  // ... its rank among this worker's first copies (their order)
};

// RFC 6298 (2.1): the retransmission timeout before any RTT sample, within [timeout_ms,
// max_timeout_ms].
constexpr int64_t kInitialRtoMs = 1000;

constexpr uint32_t kNotMine = UINT32_MAX;  // ChunkOwner of a chunk of a tag we are no member of

struct Timer {
  int64_t at_us;
  int64_t g;  // gradient chunk
  bool operator>(const Timer& o) const { return at_us > o.at_us; }
};

// The retransmission timers, earliest first. Most deadlines arrive in order (first copies: now +
// RTO), and those wait in a FIFO at O(1) each; any other (re-armed, doubled, an RTO that shrank)
// goes to a heap. The earliest is the earlier of the FIFO's front and the heap's top.
class TimerQueue {
 public:
  bool empty() const { return fifo_.empty() && heap_.empty(); }
  void clear() {
    fifo_.clear();
    heap_ = {};
  }
  void push(const Timer& t) {
    if (fifo_.empty() || t.at_us >= fifo_.back().at_us) {
      fifo_.push_back(t);
    } else {
      heap_.push(t);
    }
  }
  const Timer& top() const {
    if (heap_.empty()) return fifo_.front();
    if (fifo_.empty()) return heap_.top();
    return fifo_.front().at_us <= heap_.top().at_us ? fifo_.front() : heap_.top();
  }
  void pop() {
    if (!heap_.empty() && (fifo_.empty() || heap_.top().at_us < fifo_.front().at_us)) {
      heap_.pop();
    } else {
      fifo_.pop_front();
    }
  }

 private:
  std::deque<Timer> fifo_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> heap_;
};

class Worker {
 public:
  Worker(const JobConfig& config, const WorkerOptions& options);

  // A fixed run (agent/worker.cc): checks the options and lays the gradient out, then runs every
  // iteration on a socket of its own.
  absl::Status Prepare();
  absl::Status Run();

  const WorkerReport& report() const { return report_; }

  // Session mode (agent/worker_session.cc): the socket is opened once, by the caller's thread
  // (inside the data plane's network namespace), and each AllReduce sums a buffer of any size in
  // place.
  absl::Status OpenSession();
  // Sums buf[0, lanes) over the job's members in place: all-reduce number `allreduces_` of the
  // session, on chunk numbers next_chunk() + g. The numbering advances by the call's chunks
  // whatever the outcome, so that the members stay in step.
  absl::Status AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats);
  void Skip(int64_t lanes);
  int64_t next_chunk() const { return wire_base_; }
  const UdpSocket& socket() const { return *socket_; }
  int64_t plan_version() const { return config_->plan_version; }
  // True when at least one of the worker's tags aggregates in a switch with a grant.
  bool InNetwork() const;

 private:
  // --- One iteration's loop (agent/worker.cc).
  absl::Status RunIteration(int64_t it);
  // Before iteration `it`: the gradient made (synthetic), the result cleared where no tag of ours
  // writes it, every chunk and run reset, no timer armed.
  void StartIteration(int64_t it);
  // Waits up to `wait_us` for datagrams and reads them all; *last_progress is when the last new
  // result came.
  void ReceiveResults(int64_t it, int64_t wait_us, int64_t* last_progress);
  // No new result for give_up_ms: the error, naming the first tag still waiting and its chunk.
  absl::Status GiveUpError(int64_t it);
  // Iteration `it` (begun at start_us) is complete: its stats recorded (after `check`).
  absl::Status FinishIteration(int64_t it, int64_t start_us, int64_t retransmissions_before);

  // --- The configuration as this worker's runs (agent/worker_plan.cc).
  // runs_ and owner_ for config_ laid out as layout_; remembers every tag value's lanes.
  void BuildRuns();
  // `run` carries tag `t` (laid out as `span`) with this worker's slots and window.
  void Configure(const JobConfig::Tag& t, const TagSpan& span, TagRun* run) const;
  // Before the runs are rebuilt (a re-plan): each tag's congestion state, which Configure takes
  // over for a tag value that stays.
  void SaveCongestion();
  // Continues iteration `it` under `next` (a re-plan): see the contract in worker.h.
  absl::Status Adopt(std::shared_ptr<const JobConfig> next, int64_t it);

  // --- The send path (agent/worker_window.cc).
  // Sends the first copies of every run's chunks the window (and pacing) lets out; returns the
  // earliest a paced run may send again (0: none waits).
  int64_t SendNewChunks(int64_t it);
  // Chunk k of run `run` in iteration `it`, its timer armed; `retransmit`: a copy (RETRANSMIT).
  void Send(size_t run, int64_t it, int64_t k, bool retransmit);
  // Every retransmission timer due at `now`: the chunk sent again, or (no loss evidence) re-armed.
  void FireTimers(int64_t it, int64_t now);
  // RFC 6298: SRTT, RTTVAR and RTO = SRTT + 4 RTTVAR, within [timeout_ms, max_timeout_ms].
  void SampleRtt(int64_t rtt_us);
  // A result of a chunk of run `r` sent once: the window grows (slow start below ssthresh, one
  // chunk per round trip above it).
  void OnNewResult(TagRun& r);
  // A retransmission timeout of a chunk of `r` first sent at `sent_us`: the window halves, once
  // per round trip (losses of one burst count once).
  void OnTimeout(TagRun& r, int64_t sent_us);
  // Loss detection from later results applies to plain workers with congestion control (a Rina
  // rack worker's results come after the ring, all at once).
  bool LossEvidenceMode() const;
  // True when chunk state `st` of run `r`, whose first copy timed out, is probably lost: a chunk
  // first sent after it already has its result (every worker sends in order, so its copies of
  // this chunk left before), or no result of the run came for two RTOs since it was sent.
  bool LikelyLost(const TagRun& r, const ChunkState& st, int64_t now) const;
  // After a result of a chunk first sent at `sent_us` in run `r` (index `run`): three results of
  // chunks sent after the lowest chunk without result retransmit it at once (TCP's fast
  // retransmit), halving the window.
  void FastRetransmit(size_t run, int64_t it, int64_t k, uint64_t sent_seq);
  // Pacing: first copies leave at most at twice the rate cwnd / SRTT (no pacing before an RTT
  // sample), so that a window does not enter a slow switch as one burst.
  int64_t PacingGapUs(const TagRun& r) const;

  // --- What comes back (agent/worker_results.cc).
  // True when `d` is a new result of iteration `it`. A result is read with the lanes of its tag
  // value (of any configuration adopted in this run), so results of a re-plan's old tags count.
  bool OnDatagram(std::span<const uint8_t> payload, int64_t it);
  // The gradient chunk of ours that `payload` is a result (or acknowledgement) of in iteration
  // `it`, its header in header_; or -1 for anything else (counted as ignored, or as a duplicate
  // result when it belongs to another iteration or all-reduce).
  int64_t MatchResult(std::span<const uint8_t> payload, int64_t it);
  // Rina: chunk g (state `st`, of run `r`) is acknowledged: it leaves the window, and asks again
  // only when its result is overdue.
  void OnAcknowledgement(TagRun& r, ChunkState& st, int64_t g);
  // Rina: the first result of run `r` in this iteration: every acknowledged chunk whose result
  // does not follow soon asks again then.
  void ExpediteAcknowledged(TagRun& r);
  // `check`: every lane of iteration `it`'s result against the sum of the synthetic gradients.
  absl::Status Check(int64_t it);

  // Chunk k of the tag laid out as `s`, on the wire: iteration * chunks + k (a fixed run), or
  // the session's next chunk number + its gradient chunk (a session: unique over its tags).
  uint32_t Wire(const TagSpan& s, int64_t it, int64_t k) const {
    return static_cast<uint32_t>(session_ ? wire_base_ + s.first_chunk + k : it * s.chunks + k);
  }

  ChunkState& State(const TagRun& r, int64_t k) {
    return chunks_[static_cast<size_t>(r.span.first_chunk + k)];
  }

  // Moves r.base past the chunks with a result (or an acknowledgement).
  void AdvanceBase(TagRun& r) {
    while (r.base < r.span.chunks && (State(r, r.base).done || State(r, r.base).acked)) ++r.base;
  }

  std::shared_ptr<const JobConfig> config_;  // the configuration run under (the latest adopted)
  uint64_t seen_update_ = 0;
  const WorkerOptions& options_;
  int64_t lanes_ = 0;
  Layout layout_;
  std::vector<TagRun> runs_;                      // the tags of config_ we are a member of
  std::vector<uint32_t> owner_;                   // gradient chunk -> index into runs_
  absl::flat_hash_map<uint32_t, TagSpan> spans_;  // every tag value adopted -> its lanes
  std::vector<ChunkState> chunks_;                // per gradient chunk, this iteration
  int64_t remaining_ = 0;                         // our chunks without result, this iteration
  std::unique_ptr<UdpSocket> socket_;
  std::vector<int32_t> gradient_;    // the synthetic gradient (without options.input)
  const int32_t* source_ = nullptr;  // the gradient the chunks are sent from
  std::vector<int32_t> result_;      // a fixed run's sums
  int32_t* result_data_ = nullptr;   // where the sums go: result_, or a session's buffer
  bool session_ = false;             // OpenSession: all-reduces of any size, numbered on
  int64_t wire_base_ = 0;            // ... from this chunk number
  int64_t allreduces_ = 0;           // ... this many done (or failed) so far
  TimerQueue timers_;
  WorkerReport report_;
  int64_t srtt_us_ = -1;
  int64_t rttvar_us_ = 0;
  int64_t rto_us_;  // current retransmission timeout (RFC 6298), kInitialRtoMs before a sample
  int64_t next_send_us_ = 0;  // pacing: the earliest the next first copy leaves
  InaPacket header_;          // OnDatagram's: the result at hand
  // The clock as of the loop's current step (NowUs() once per step and per few datagrams, not
  // per packet): sends of one step leave together at the socket's flush anyway.
  int64_t now_us_ = 0;
  uint64_t send_seq_ = 0;                                            // first copies sent
  std::unordered_map<uint32_t, std::pair<double, double>> cwnd_of_;  // tag -> (cwnd, ssthresh)
};

}  // namespace inac::agent
