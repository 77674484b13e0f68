#include "agent/worker.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/gradient.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

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
  Worker(const JobConfig& config, const WorkerOptions& options)
      : config_(std::make_shared<const JobConfig>(config)),
        options_(options),
        rto_us_(std::clamp<int64_t>(kInitialRtoMs, options.timeout_ms, options.max_timeout_ms) *
                1000) {}

  absl::Status Prepare() {
    if (options_.worker.empty()) return absl::InvalidArgumentError("--worker: required");
    if (options_.iterations < 1) return absl::InvalidArgumentError("--iterations: must be >= 1");
    if (options_.timeout_ms < 1 || options_.max_timeout_ms < options_.timeout_ms) {
      return absl::InvalidArgumentError(
          "--timeout-ms: must be >= 1 and at most the maximum timeout");
    }
    auto lanes = GradientLanes(options_.input, options_.lanes, options_.check);
    if (!lanes.ok()) return lanes.status();
    lanes_ = *lanes;
    auto layout = ComputeLayout(*config_, lanes_);
    if (!layout.ok()) return layout.status();
    layout_ = std::move(*layout);
    if (static_cast<double>(options_.iterations) * static_cast<double>(layout_.chunks) >=
        4294967296.0) {
      return absl::InvalidArgumentError(
          "--iterations x chunks: chunk numbers would not fit the header's 32 bits");
    }
    std::set<std::string> everyone;
    for (const JobConfig::Tag& t : config_->tags) {
      for (const auto& m : t.members) everyone.insert(m.worker);
    }
    BuildRuns();
    if (runs_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", options_.worker, " is not a member of any tag of job ", config_->job_id));
    }
    report_.worker = options_.worker;
    report_.job_id = config_->job_id;
    report_.plans.push_back(config_->plan_version);
    report_.workers = static_cast<int>(everyone.size());
    report_.tags = static_cast<int>(runs_.size());
    report_.size_bytes = lanes_ * 4;
    return absl::OkStatus();
  }

  absl::Status Run() {
    auto socket = UdpSocket::Open(options_.socket);
    if (!socket.ok()) return socket.status();
    socket_ = std::move(*socket);
    if (options_.input == nullptr) gradient_.assign(static_cast<size_t>(lanes_), 0);
    source_ = options_.input != nullptr ? options_.input->data() : gradient_.data();
    result_.assign(static_cast<size_t>(lanes_), 0);
    result_data_ = result_.data();
    absl::Status status;
    for (int64_t it = 0; it < options_.iterations && status.ok(); ++it) {
      status = RunIteration(it);
    }
    report_.packets_sent = static_cast<int64_t>(socket_->sent());
    report_.send_errors = static_cast<int64_t>(socket_->send_errors());
    report_.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
    if (options_.result != nullptr) *options_.result = result_;
    return status;
  }

  const WorkerReport& report() const { return report_; }

  // Session mode (agent/session.h): the socket is opened once, by the caller's thread (inside
  // the data plane's network namespace), and each AllReduce sums a buffer of any size in place.
  absl::Status OpenSession() {
    if (options_.worker.empty()) return absl::InvalidArgumentError("worker: required");
    if (options_.timeout_ms < 1 || options_.max_timeout_ms < options_.timeout_ms ||
        options_.give_up_ms < 1) {
      return absl::InvalidArgumentError("timeouts: must be >= 1 ms, the first at most the maximum");
    }
    bool member = false;
    std::set<std::string> everyone;
    for (const JobConfig::Tag& t : config_->tags) {
      member |= t.MemberIndex(options_.worker) >= 0;
      for (const auto& m : t.members) everyone.insert(m.worker);
    }
    if (!member) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", options_.worker, " is not a member of any tag of job ", config_->job_id));
    }
    session_ = true;
    report_.worker = options_.worker;
    report_.job_id = config_->job_id;
    report_.plans.push_back(config_->plan_version);
    report_.workers = static_cast<int>(everyone.size());
    auto socket = UdpSocket::Open(options_.socket);
    if (!socket.ok()) return socket.status();
    socket_ = std::move(*socket);
    return absl::OkStatus();
  }

  // Sums buf[0, lanes) over the job's members in place: all-reduce number `allreduces_` of the
  // session, on chunk numbers next_chunk() + g. The numbering advances by the call's chunks
  // whatever the outcome, so that the members stay in step.
  absl::Status AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats) {
    if (lanes < 1) return absl::InvalidArgumentError("all-reduce: needs at least one value");
    if (lanes != lanes_ || runs_.empty()) {
      auto layout = ComputeLayout(*config_, lanes);
      if (!layout.ok()) return layout.status();
      lanes_ = lanes;
      layout_ = std::move(*layout);
      SaveCongestion();
      BuildRuns();
      report_.tags = static_cast<int>(runs_.size());
    }
    if (static_cast<double>(wire_base_) + static_cast<double>(layout_.chunks) > 4294967296.0) {
      return absl::ResourceExhaustedError(
          "the session's chunk numbers (32 bits on the wire) are used up: open a new session");
    }
    int64_t covered = 0;
    for (const TagRun& r : runs_) covered += r.span.lanes;
    absl::Status status;
    if (covered < lanes_) {
      status = absl::FailedPreconditionError(
          absl::StrCat("worker ", options_.worker, " is a member of tags that carry ", covered,
                       " of the ", lanes_, " values: it cannot all-reduce all of them"));
    } else {
      source_ = buf;
      result_data_ = buf;
      report_.size_bytes = lanes_ * 4;
      const size_t before = report_.iterations.size();
      status = RunIteration(allreduces_);
      if (status.ok() && stats != nullptr && report_.iterations.size() > before) {
        *stats = report_.iterations.back();
      }
    }
    wire_base_ += layout_.chunks;
    ++allreduces_;
    report_.packets_sent = static_cast<int64_t>(socket_->sent());
    report_.send_errors = static_cast<int64_t>(socket_->send_errors());
    report_.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
    return status;
  }

  void Skip(int64_t lanes) {
    wire_base_ += (std::max<int64_t>(lanes, 0) + kLanes - 1) / kLanes;  // ComputeLayout's chunks
    ++allreduces_;
  }
  int64_t next_chunk() const { return wire_base_; }
  const UdpSocket& socket() const { return *socket_; }
  int64_t plan_version() const { return config_->plan_version; }
  // True when at least one of the worker's tags aggregates in a switch with a grant.
  bool InNetwork() const {
    for (const TagRun& r : runs_) {
      if (r.slot_mode == TagRun::SlotMode::kWindow) return true;
    }
    return false;
  }

 private:
  // runs_ and owner_ for config_ laid out as layout_; remembers every tag value's lanes.
  void BuildRuns() {
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

  // `run` carries tag `t` (laid out as `span`) with this worker's slots and window.
  void Configure(const JobConfig::Tag& t, const TagSpan& span, TagRun* run) const {
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

  // Before the runs are rebuilt (a re-plan): each tag's congestion state, which Configure takes
  // over for a tag value that stays.
  void SaveCongestion() {
    for (const TagRun& r : runs_) cwnd_of_[r.span.tag] = {r.cwnd, r.ssthresh};
  }

  // A result of a chunk of run `r` sent once: the window grows (slow start below ssthresh, one
  // chunk per round trip above it).
  void OnNewResult(TagRun& r) {
    if (r.cwnd < r.ssthresh) {
      r.cwnd += 1;
    } else {
      r.cwnd += 1.0 / std::max(1.0, r.cwnd);
    }
    r.cwnd = std::min<double>(r.cwnd, r.window);
  }

  // A retransmission timeout of a chunk of `r` first sent at `sent_us`: the window halves, once
  // per round trip (losses of one burst count once).
  void OnTimeout(TagRun& r, int64_t sent_us) {
    if (sent_us < r.cut_us) return;
    r.ssthresh = std::max(r.cwnd / 2, 2.0);
    r.cwnd = r.ssthresh;
    r.cut_us = now_us_;
    ++report_.window_cuts;
  }

  // Loss detection from later results applies to plain workers with congestion control (a Rina
  // rack worker's results come after the ring, all at once).
  bool LossEvidenceMode() const {
    return options_.congestion_control && !options_.acknowledged_window;
  }

  // True when chunk state `st` of run `r`, whose first copy timed out, is probably lost: a chunk
  // first sent after it already has its result (every worker sends in order, so its copies of
  // this chunk left before), or no result of the run came for two RTOs since it was sent.
  bool LikelyLost(const TagRun& r, const ChunkState& st, int64_t now) const {
    if (r.completed_sent_seq > st.sent_seq) return true;
    return now - std::max(r.last_result_us, st.sent_us) >= 2 * rto_us_;
  }

  // After a result of a chunk first sent at `sent_us` in run `r` (index `run`): three results of
  // chunks sent after the lowest chunk without result retransmit it at once (TCP's fast
  // retransmit), halving the window.
  void FastRetransmit(size_t run, int64_t it, int64_t k, uint64_t sent_seq) {
    TagRun& r = runs_[run];
    if (r.base >= r.span.chunks) return;
    // Only results of base's own steering block count: a PS with several threads answers each
    // block from its own thread, so blocks may overtake each other without any loss.
    if ((r.span.first_chunk + k) / kSteeringBlock !=
        (r.span.first_chunk + r.base) / kSteeringBlock) {
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

  // Pacing: first copies leave at most at twice the rate cwnd / SRTT (no pacing before an RTT
  // sample), so that a window does not enter a slow switch as one burst.
  int64_t PacingGapUs(const TagRun& r) const {
    if (!options_.congestion_control || srtt_us_ <= 0) return 0;
    return static_cast<int64_t>(static_cast<double>(srtt_us_) / (2.0 * std::max(1.0, r.cwnd)));
  }

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

  // Continues iteration `it` under `next` (a re-plan): see the contract in worker.h.
  absl::Status Adopt(std::shared_ptr<const JobConfig> next, int64_t it) {
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

  absl::Status RunIteration(int64_t it) {
    // A given gradient is read where it is (no copy per iteration); the synthetic one is made.
    if (!session_ && options_.input == nullptr) {
      FillSynthetic(options_.seed, options_.worker, it, 0, gradient_);
    }
    // Lanes of tags this worker is no member of stay 0; when it is a member of every lane, each
    // lane is written by its result and nothing needs clearing.
    int64_t covered = 0;
    for (const TagRun& r : runs_) covered += r.span.lanes;
    if (covered < lanes_) std::fill(result_data_, result_data_ + lanes_, 0);
    ChunkState fresh;
    fresh.timeout_us = options_.timeout_ms * 1000;
    chunks_.assign(static_cast<size_t>(layout_.chunks), fresh);
    remaining_ = 0;
    for (TagRun& r : runs_) {
      r.base = 0;
      r.next = 0;
      r.results_seen = false;
      r.dup_base = -1;  // chunk numbers start again
      r.dups = 0;
      remaining_ += r.span.chunks;
    }
    timers_.clear();
    const int64_t retrans_before = report_.retransmissions;
    const int64_t start = NowUs();
    int64_t last_progress = start;
    while (remaining_ > 0) {
      if (options_.stop != nullptr && options_.stop->load()) {
        return absl::CancelledError("stopped");
      }
      now_us_ = NowUs();
      if (options_.updates != nullptr) {
        if (auto next = options_.updates->TakeIfNewer(&seen_update_); next != nullptr) {
          if (absl::Status s = Adopt(std::move(next), it); !s.ok()) return s;
        }
      }
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
                paced_until =
                    paced_until == 0 ? next_send_us_ : std::min(paced_until, next_send_us_);
                break;
              }
              next_send_us_ = std::max(next_send_us_, at - gap) + gap;
            }
            Send(i, it, r.next, /*retransmit=*/false);
          }
          ++r.next;
        }
      }
      int64_t now = NowUs();
      int64_t wait = 100000;
      if (!timers_.empty()) wait = std::clamp<int64_t>(timers_.top().at_us - now, 0, wait);
      if (paced_until > 0) wait = std::clamp<int64_t>(paced_until - now, 0, wait);
      if (socket_->Wait(wait)) {
        DatagramView d;
        now_us_ = NowUs();
        for (int n = 1; socket_->Next(&d); ++n) {
          if (n % 16 == 0) now_us_ = NowUs();
          if (OnDatagram(d.payload, it)) last_progress = now_us_;
        }
      }
      now = now_us_ = NowUs();
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
      if (now - last_progress > options_.give_up_ms * 1000) {
        std::string where;
        for (TagRun& r : runs_) {
          int64_t missing = 0;
          for (int64_t k = 0; k < r.span.chunks; ++k) missing += State(r, k).done ? 0 : 1;
          if (missing > 0) {
            where = absl::StrCat("tag ", r.span.tag, " waits for chunk ", Wire(r.span, it, r.base),
                                 " (", missing, " of ", r.span.chunks, " missing) from PS ",
                                 r.tag->ps, " at ", core::FormatIpv4(r.tag->ps_address));
            break;
          }
        }
        return absl::DeadlineExceededError(absl::StrCat(session_ ? "all-reduce " : "iteration ", it,
                                                        ": no result for ", options_.give_up_ms,
                                                        " ms; ", where));
      }
    }
    IterationStats s;
    s.iteration = it;
    s.size_bytes = report_.size_bytes;
    s.time_ms = static_cast<double>(NowUs() - start) / 1000.0;
    s.retransmissions = report_.retransmissions - retrans_before;
    if (options_.check) {
      if (absl::Status c = Check(it); !c.ok()) return c;
      report_.checked = true;
    }
    report_.iterations.push_back(s);
    if (options_.on_iteration) options_.on_iteration(s);
    return absl::OkStatus();
  }

  void Send(size_t run, int64_t it, int64_t k, bool retransmit) {
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

  // True when `d` is a new result of iteration `it`. A result is read with the lanes of its tag
  // value (of any configuration adopted in this run), so results of a re-plan's old tags count.
  bool OnDatagram(std::span<const uint8_t> payload, int64_t it) {
    InaPacket* packet = &header_;  // the header; the lanes go straight into the result
    if (!DecodePacketHeader(payload, packet) || (packet->flags & kFlagResult) == 0) {
      ++report_.ignored;
      return false;
    }
    auto found = spans_.find(packet->tag);
    if (found == spans_.end()) {
      ++report_.ignored;
      return false;
    }
    int64_t g;
    if (session_) {
      g = static_cast<int64_t>(packet->chunk) - wire_base_;  // unique over the session's tags
      if (g < 0 || g >= layout_.chunks) {
        ++report_.duplicate_results;  // another all-reduce's
        return false;
      }
    } else {
      const TagSpan& span = found->second;
      const int64_t wire_k = static_cast<int64_t>(packet->chunk) - it * span.chunks;
      if (wire_k < 0 || wire_k >= span.chunks) {
        ++report_.duplicate_results;  // another iteration's
        return false;
      }
      g = span.first_chunk + wire_k;
    }
    const uint32_t run = owner_[static_cast<size_t>(g)];
    if (run == kNotMine) {
      ++report_.ignored;
      return false;
    }
    TagRun& r = runs_[run];
    const int64_t k = g - r.span.first_chunk;
    ChunkState& st = chunks_[static_cast<size_t>(g)];
    if (options_.acknowledged_window && (packet->flags & kFlagAggregate) != 0) {
      // Rina: the agent holds the chunk's sum; the result comes after the ring.
      if (st.done || st.acked) return false;
      st.acked = true;
      ++report_.acknowledgements;
      if (!st.resent) SampleRtt(now_us_ - st.sent_us);
      // No retransmission until the result is overdue (the ring takes its time): then a copy
      // asks the agent again.
      st.timeout_us = std::max(options_.max_timeout_ms, options_.give_up_ms / 4) * 1000;
      st.deadline_us = now_us_ + st.timeout_us;
      timers_.push(Timer{st.deadline_us, g});
      AdvanceBase(r);
      return false;
    }
    if (st.done) {
      ++report_.duplicate_results;
      return false;
    }
    if (options_.acknowledged_window && !r.results_seen) {
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

  // RFC 6298: SRTT, RTTVAR and RTO = SRTT + 4 RTTVAR, within [timeout_ms, max_timeout_ms].
  void SampleRtt(int64_t rtt_us) {
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

  absl::Status Check(int64_t it) {
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
          return absl::DataLossError(
              absl::StrCat("check failed: iteration ", it, ", tag ", r.span.tag, ", chunk ",
                           it * r.span.chunks + k, ", lane ", static_cast<int64_t>(i) % kLanes,
                           " (gradient lane ", r.span.first_lane + static_cast<int64_t>(i),
                           "): got ", got, ", want ", want[i]));
        }
      }
    }
    return absl::OkStatus();
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

class Session : public WorkerSession {
 public:
  Session(const JobConfig& config, const WorkerOptions& options)
      : options_(options), worker_(config, options_) {}
  absl::Status Open() { return worker_.OpenSession(); }
  absl::Status AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats) override {
    return worker_.AllReduce(buf, lanes, stats);
  }
  void Skip(int64_t lanes) override { worker_.Skip(lanes); }
  const WorkerReport& report() const override { return worker_.report(); }
  int64_t next_chunk() const override { return worker_.next_chunk(); }
  int64_t plan_version() const override { return worker_.plan_version(); }
  bool InNetwork() const override { return worker_.InNetwork(); }
  const UdpSocket& socket() const override { return worker_.socket(); }

 private:
  const WorkerOptions options_;  // before worker_, which keeps a reference
  Worker worker_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerSession>> OpenWorkerSession(const JobConfig& config,
                                                                 const WorkerOptions& options) {
  auto session = std::make_unique<Session>(config, options);
  if (absl::Status s = session->Open(); !s.ok()) return s;
  return session;
}

absl::StatusOr<WorkerReport> RunWorker(const JobConfig& config, const WorkerOptions& options) {
  Worker worker(config, options);
  if (absl::Status s = worker.Prepare(); !s.ok()) return s;
  int64_t cpu_us = 0;
  absl::Status s = RunDataPlane(
      options.netns_fd, [&] { return worker.Run(); }, &cpu_us);
  if (!s.ok()) return s;
  WorkerReport report = worker.report();
  report.cpu_us = cpu_us;
  return report;
}

nlohmann::json WorkerReportJson(const WorkerReport& r) {
  nlohmann::json j = {{"role", "worker"},
                      {"job_id", r.job_id},
                      {"worker", r.worker},
                      {"workers", r.workers},
                      {"tags", r.tags}};
  AddSummaryJson(r.iterations, r.workers, &j);
  j["size_bytes"] = r.size_bytes;
  j["packets"] = {{"sent", r.packets_sent},
                  {"retransmitted", r.retransmissions},
                  {"results", r.results},
                  {"duplicate_results", r.duplicate_results},
                  {"ignored", r.ignored},
                  {"send_errors", r.send_errors},
                  {"dropped_by_test_hook", r.dropped_by_hook},
                  {"resent_on_new_tag", r.resent_on_new_tag},
                  {"acknowledgements", r.acknowledgements},
                  {"window_cuts", r.window_cuts},
                  {"fast_retransmissions", r.fast_retransmissions},
                  {"timeouts_deferred", r.timeouts_deferred}};
  j["plans"] = r.plans;
  j["check"] = r.checked ? "ok" : "skipped";
  j["cpu_ms"] = static_cast<double>(r.cpu_us) / 1000.0;
  return j;
}

}  // namespace inac::agent
