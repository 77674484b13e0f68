#include "agent/ps.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/clock.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/ps_accounting.h"
#include "agent/worker.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

constexpr size_t kMaxLoggedViolations = 100;

void SleepUs(int64_t us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}
constexpr int64_t kMaxLingerFactor = 10;

// The PS's shard of the gradient: the gradient chunks [first, first + chunks) of every
// configuration (agent::CheckContinuation). Everything is kept per (iteration, gradient chunk),
// key = iteration * chunks + (g - first), whatever tags carry the chunks.
struct Shard {
  int64_t first = 0;
  int64_t chunks = 0;
  std::vector<bool> complete;  // per key
  SumPool open;                // the chunks with data but no result yet, by key
  // Recent results, per tag value they were first sent under: a ring of that tag's last `keep`
  // results (the oldest overwritten first), and where each key's result is. Each tag keeps its
  // own, so a tag that runs ahead never pushes out the results of a slower one, whose workers may
  // still miss them (a worker's window stops at its oldest missing result).
  struct KeptRing {
    std::vector<int64_t> keys;  // -1: free
    std::vector<InaPacket> results;
    size_t next = 0;
  };
  std::vector<KeptRing> rings;
  absl::flat_hash_map<uint32_t, uint32_t> ring_of;                   // tag value -> ring
  absl::flat_hash_map<int64_t, std::pair<uint32_t, uint32_t>> kept;  // key -> (ring, slot)
  size_t keep = 256;
  std::vector<int64_t> done_in_iteration;
  int64_t iterations_done = 0;
};

struct IterationProgress {
  int64_t first_us = -1;
  int64_t tags_done = 0;
  int64_t done_us = -1;
  int64_t contributions = 0;
  int64_t in_network = 0;
  int64_t retransmissions = 0;
};

// Gradient chunk g belongs to thread (g / kSteeringBlock) mod threads of a PS.
int OwnerThread(int64_t g, int threads) { return static_cast<int>((g / kSteeringBlock) % threads); }

// What the threads of one PS share (PsOptions::threads > 1): datagrams one thread received for a
// gradient chunk another thread owns, and each iteration's progress, merged over the threads.
class PsGroup {
 public:
  PsGroup(int threads, const PsOptions& options)
      : options_(options), inbox_(static_cast<size_t>(threads)) {
    for (Inbox& in : inbox_) in.fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    merge_.resize(static_cast<size_t>(options.iterations));
  }
  ~PsGroup() {
    for (Inbox& in : inbox_) {
      if (in.fd >= 0) ::close(in.fd);
    }
  }
  int threads() const { return static_cast<int>(inbox_.size()); }
  int wake_fd(int thread) const { return inbox_[static_cast<size_t>(thread)].fd; }

  // A copy of `d` for `thread`, which wakes up for it.
  void HandOff(int thread, const DatagramView& d) {
    Inbox& in = inbox_[static_cast<size_t>(thread)];
    {
      absl::MutexLock lock(&mu_);
      Datagram& copy = in.datagrams.emplace_back();
      copy.source = d.source;
      copy.source_port = d.source_port;
      copy.length = std::min(d.payload.size(), copy.bytes.size());
      std::memcpy(copy.bytes.data(), d.payload.data(), copy.length);
    }
    const uint64_t one = 1;
    (void)!::write(in.fd, &one, sizeof(one));
  }

  // The datagrams handed to `thread` so far (`out` is replaced).
  void TakeHandedOff(int thread, std::vector<Datagram>* out) {
    Inbox& in = inbox_[static_cast<size_t>(thread)];
    uint64_t count = 0;
    (void)!::read(in.fd, &count, sizeof(count));
    out->clear();
    absl::MutexLock lock(&mu_);
    std::swap(*out, in.datagrams);
  }

  // One thread's share of iteration s.iteration, which it began at first_us (-1: no packet) and
  // completed at done_us. Once every thread has reported it (iterations in order), the iteration
  // over all of them (first packet to last completion, counts summed) is recorded and passed to
  // options.on_iteration, under the group's lock.
  void Report(const IterationStats& s, int64_t first_us, int64_t done_us) {
    absl::MutexLock lock(&mu_);
    Merge& m = merge_[static_cast<size_t>(s.iteration)];
    if (first_us >= 0) m.first_us = m.first_us < 0 ? first_us : std::min(m.first_us, first_us);
    m.done_us = std::max(m.done_us, done_us);
    m.stats.iteration = s.iteration;
    m.stats.size_bytes = s.size_bytes;
    m.stats.retransmissions += s.retransmissions;
    m.stats.contributions += s.contributions;
    m.stats.in_network += s.in_network;
    ++m.reported;
    while (next_ < static_cast<int64_t>(merge_.size()) &&
           merge_[static_cast<size_t>(next_)].reported == threads()) {
      Merge& done = merge_[static_cast<size_t>(next_)];
      done.stats.time_ms =
          done.first_us < 0 ? 0 : static_cast<double>(done.done_us - done.first_us) / 1000.0;
      iterations_.push_back(done.stats);
      if (options_.on_iteration) options_.on_iteration(done.stats);
      ++next_;
    }
  }

  std::vector<IterationStats> iterations() {
    absl::MutexLock lock(&mu_);
    return iterations_;
  }

 private:
  struct Inbox {
    std::vector<Datagram> datagrams;  // guarded by mu_
    int fd = -1;
  };
  struct Merge {
    int reported = 0;
    int64_t first_us = -1;
    int64_t done_us = -1;
    IterationStats stats{.contributions = 0, .in_network = 0};
  };
  const PsOptions& options_;
  absl::Mutex mu_;
  std::vector<Inbox> inbox_;
  std::vector<Merge> merge_ ABSL_GUARDED_BY(mu_);
  std::vector<IterationStats> iterations_ ABSL_GUARDED_BY(mu_);
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

class Ps {
 public:
  Ps(const JobConfig& config, const PsOptions& options)
      : config_(std::make_shared<const JobConfig>(config)), options_(options) {}

  // This PS runs as thread `thread` of `group`: it completes the gradient chunks OwnerThread
  // gives it and hands every other datagram of its shard to its owner. Before Prepare.
  void SetThread(int thread, PsGroup* group) {
    thread_ = thread;
    threads_ = group->threads();
    group_ = group;
  }

  absl::Status Prepare() {
    if (options_.ps.empty()) return absl::InvalidArgumentError("--ps: required");
    if (options_.iterations < 1) return absl::InvalidArgumentError("--iterations: must be >= 1");
    if (options_.lanes < 1) return absl::InvalidArgumentError("gradient: needs at least one lane");
    auto layout = ComputeLayout(*config_, options_.lanes);
    if (!layout.ok()) return layout.status();
    layout_ = std::move(*layout);
    if (static_cast<double>(options_.iterations) * static_cast<double>(layout_.chunks) >=
        4294967296.0) {
      return absl::InvalidArgumentError(
          "--iterations x chunks: chunk numbers would not fit the header's 32 bits");
    }
    std::set<std::string> everyone;
    int tags = 0;
    int64_t end = 0;
    shard_.first = -1;
    for (size_t i = 0; i < config_->tags.size(); ++i) {
      const JobConfig::Tag& t = config_->tags[i];
      if (t.ps != options_.ps) continue;
      if (t.members.empty()) {
        return absl::FailedPreconditionError(absl::StrCat("tag ", t.tag, " has no members"));
      }
      ++tags;
      for (const auto& m : t.members) {
        everyone.insert(m.worker);
        if (canonical_.emplace(m.worker, static_cast<int>(members_.size())).second) {
          members_.push_back(m);
        }
      }
      const TagSpan& span = layout_.tags[i];
      report_.size_bytes += span.lanes * 4;
      if (span.chunks == 0) continue;
      if (shard_.first < 0 || span.first_chunk < shard_.first) shard_.first = span.first_chunk;
      end = std::max(end, span.first_chunk + span.chunks);
    }
    if (tags == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(options_.ps, " is not the PS of any tag of job ", config_->job_id));
    }
    if (shard_.first < 0) shard_.first = 0;
    shard_.chunks = std::max<int64_t>(0, end - shard_.first);
    if (absl::Status s = AddViews(*config_); !s.ok()) return s;
    owner_ = ChunkOwners(layout_);
    shard_.complete.assign(static_cast<size_t>(shard_.chunks * options_.iterations), false);
    shard_.done_in_iteration.assign(static_cast<size_t>(options_.iterations), 0);
    owned_ = 0;
    for (int64_t off = 0; off < shard_.chunks; ++off) owned_ += Mine(shard_.first + off) ? 1 : 0;
    if (owned_ == 0) shard_.iterations_done = options_.iterations;
    shard_.keep = std::max<size_t>(256, 4 * static_cast<size_t>(keep_window_));
    // Deferred results go out a whole iteration at a time: keep two iterations.
    if (options_.reduce) {
      shard_.keep = std::max(shard_.keep, 2 * static_cast<size_t>(shard_.chunks));
    }
    report_.ps = options_.ps;
    report_.job_id = config_->job_id;
    report_.plans.push_back(config_->plan_version);
    report_.workers = static_cast<int>(everyone.size());
    report_.tags = tags;
    progress_.assign(static_cast<size_t>(options_.iterations), IterationProgress{});
    return absl::OkStatus();
  }

  // Serves on `socket` (nullptr: opens options.socket).
  absl::Status Run(std::unique_ptr<UdpSocket> socket = nullptr) {
    if (socket == nullptr) {
      SocketOptions so = options_.socket;
      so.buffer_bytes = BufferBytes();
      auto opened = UdpSocket::Open(so);
      if (!opened.ok()) return opened.status();
      socket = std::move(*opened);
    }
    socket_ = std::move(socket);
    if (group_ != nullptr) {
      socket_->set_wake_fd(group_->wake_fd(thread_));
      if (thread_ == 0) SteerToOwners();
    }
    if (options_.on_ready && thread_ == 0) options_.on_ready();
    const int64_t start = NowUs();
    int64_t last_packet = start;  // the last packet of this PS's tags
    int64_t done_at = -1;
    EmitDone(start);
    while (status_.ok()) {
      if (options_.stop != nullptr && options_.stop->load()) break;
      const int64_t now = NowUs();
      if (options_.duration_ms > 0 && now - start >= options_.duration_ms * 1000) break;
      int64_t wait = 50000;
      if (AllDone()) {
        // Linger until quiet, but not for ever (a stream of retransmissions of forgotten results
        // would keep it alive).
        if (done_at < 0) done_at = now;
        const int64_t quiet = now - std::max(last_packet, done_at);
        if (quiet >= options_.linger_ms * 1000 ||
            now - done_at >= kMaxLingerFactor * options_.linger_ms * 1000) {
          break;
        }
        wait = std::min(wait, options_.linger_ms * 1000 - quiet);
      }
      const bool readable = socket_->Wait(wait);
      if (absl::Status s = TakeUpdate(); !s.ok()) return s;
      if (!readable) continue;
      if (group_ != nullptr) {
        group_->TakeHandedOff(thread_, &handed_);
        for (const Datagram& h : handed_) {
          if (absl::Status s = TakeUpdate(); !s.ok()) return s;
          const int64_t at = NowUs();
          if (OnDatagram(h, at)) last_packet = at;
        }
      }
      DatagramView d;
      // A configuration published before a packet arrived reads it.
      int64_t at = NowUs();
      for (int n = 1; socket_->Next(&d); ++n) {
        if (absl::Status s = TakeUpdate(); !s.ok()) return s;
        if (n % 16 == 0) at = NowUs();  // the clock per few datagrams, not per packet
        if (OnDatagram(d, at)) last_packet = at;
        if (options_.on_packet) options_.on_packet(report_.counters);
      }
    }
    report_.iterations_done = next_emit_;
    report_.complete = AllDone();
    report_.counters.send_errors = static_cast<int64_t>(socket_->send_errors());
    report_.counters.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
    return status_;
  }

  const PsReport& report() const { return report_; }

  // Receive buffer: every member's window of datagrams at ~1 KiB of kernel memory each (a
  // 272-byte datagram's skb), at least the socket's default, at most 64 MiB.
  int BufferBytes() const {
    const int64_t want = static_cast<int64_t>(members_.size()) * keep_window_ * 1024;
    return static_cast<int>(std::clamp<int64_t>(want, options_.socket.buffer_bytes, 64 << 20));
  }

 private:
  // Thread 0 of a group: the kernel steers each datagram of a known tag value to the socket of
  // the thread that owns its gradient chunk (a classic BPF program over the INA header: tag ->
  // the value's span, chunk -> gradient chunk g -> OwnerThread(g)); anything else to thread 0.
  // Without the program (refused) every datagram still reaches its owner, handed off.
  void SteerToOwners() {
    std::vector<sock_filter> program;
    program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0));  // A = tag
    // The newest values first; at most 500 of them (a cBPF program holds 4096 instructions).
    for (size_t n = 0, i = views_.size(); i-- > 0 && n < 500;) {
      const TagView& v = views_[i];
      if (v.span.chunks == 0) continue;
      ++n;
      program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v.tag->tag, 0, 6));
      program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4));  // A = chunk
      program.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, static_cast<uint32_t>(v.span.chunks)));
      program.push_back(
          BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, static_cast<uint32_t>(v.span.first_chunk)));
      program.push_back(BPF_STMT(BPF_ALU | BPF_DIV | BPF_K, kSteeringBlock));
      program.push_back(BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, static_cast<uint32_t>(threads_)));
      program.push_back(BPF_STMT(BPF_RET | BPF_A, 0));
    }
    program.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
    report_.steered = socket_->AttachReusePortProgram(program).ok();
  }

  // Views for the tags of `config` whose PS this is (their member indices are canonical: matched
  // by worker id, so accumulators survive re-plans).
  absl::Status AddViews(const JobConfig& config) {
    auto layout = ComputeLayout(config, options_.lanes);
    if (!layout.ok()) return layout.status();
    for (size_t i = 0; i < config.tags.size(); ++i) {
      const JobConfig::Tag& t = config.tags[i];
      if (t.ps != options_.ps) continue;
      auto view = MakeView(t, layout->tags[i]);
      if (!view.ok()) return view.status();
      auto known = tag_index_.find(t.tag);
      if (known != tag_index_.end()) {
        views_[known->second] = std::move(*view);  // same value: the newer reading
      } else {
        tag_index_[t.tag] = views_.size();
        views_.push_back(std::move(*view));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<TagView> MakeView(const JobConfig::Tag& t, const TagSpan& span) {
    auto v = MakeTagView(t, span, canonical_, options_.window);
    if (v.ok()) keep_window_ = std::max(keep_window_, v->window);
    return v;
  }

  absl::Status TakeUpdate() {
    if (options_.updates == nullptr) return absl::OkStatus();
    auto next = options_.updates->TakeIfNewer(&seen_update_);
    return next != nullptr ? Adopt(std::move(next)) : absl::OkStatus();
  }

  // Continues under `next` (a re-plan): the same PS and members for every gradient chunk
  // (agent::CheckContinuation), possibly cut into other tags. Each tag value is read by the
  // configuration it came with; results go out under the latest configuration's tags.
  absl::Status Adopt(std::shared_ptr<const JobConfig> next) {
    auto layout = ComputeLayout(*next, options_.lanes);
    if (!layout.ok()) return layout.status();
    if (absl::Status s = CheckContinuation(*config_, layout_, *next, *layout); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(s.message(), "; restart the agents"));
    }
    if (absl::Status s = AddViews(*next); !s.ok()) return s;
    shard_.keep = std::max(shard_.keep, 4 * static_cast<size_t>(keep_window_));
    retired_.push_back(std::move(config_));  // its tags still read packets of their values
    config_ = std::move(next);
    layout_ = std::move(*layout);
    owner_ = ChunkOwners(layout_);
    report_.plans.push_back(config_->plan_version);
    if (group_ != nullptr && thread_ == 0 && socket_ != nullptr) SteerToOwners();
    return absl::OkStatus();
  }

  bool AllDone() const { return next_emit_ >= options_.iterations; }

  // Counts and reports a contract violation; true (the packet was one of this PS's).
  bool Violation(const std::string& line) {
    ++report_.counters.violation;
    if (report_.violations.size() < kMaxLoggedViolations) {
      report_.violations.push_back(line);
      if (options_.log) options_.log(line);
    }
    return true;
  }

  // The latest configuration's tag carrying gradient chunk g, and g's number on the wire in
  // iteration `it` under it.
  const JobConfig::Tag& OwnerTag(int64_t g) const {
    return config_->tags[owner_[static_cast<size_t>(g)]];
  }
  uint32_t WireChunk(int64_t it, int64_t g) const {
    const TagSpan& s = layout_.tags[owner_[static_cast<size_t>(g)]];
    return static_cast<uint32_t>(it * s.chunks + (g - s.first_chunk));
  }

  // True when the packet belongs to one of this PS's tags and chunks.
  bool OnDatagram(const Datagram& d, int64_t now) {
    return OnDatagram(DatagramView{d.source, d.source_port, d.payload()}, now);
  }
  bool OnDatagram(const DatagramView& d, int64_t now) {
    PsCounters& c = report_.counters;
    ++c.received;
    InaPacket* packet = &header_;  // the header; the lanes are summed from the wire
    if (!DecodePacketHeader(d.payload, packet)) {
      ++c.malformed;
      return false;
    }
    if (packet->flags & kFlagResult) {
      ++c.ignored;
      return false;
    }
    if (packet->tag != last_tag_ || last_view_ == SIZE_MAX) {
      // Packets come in runs of one tag: the last value's view is kept (views are only added).
      auto found = tag_index_.find(packet->tag);
      if (found == tag_index_.end()) {
        ++c.unknown_tag;
        return false;
      }
      last_tag_ = packet->tag;
      last_view_ = found->second;
    }
    const size_t view_index = last_view_;
    const TagView& view = views_[view_index];
    if (view.span.chunks == 0 ||
        static_cast<int64_t>(packet->chunk) >= view.span.chunks * options_.iterations) {
      ++c.out_of_range;
      return false;
    }
    const bool retransmit = (packet->flags & kFlagRetransmit) != 0;
    const int64_t it = static_cast<int64_t>(packet->chunk) / view.span.chunks;
    const int64_t g =
        view.span.first_chunk + static_cast<int64_t>(packet->chunk) - it * view.span.chunks;
    const int64_t key = it * shard_.chunks + (g - shard_.first);
    if (!Mine(g)) {
      // Another thread's chunk (a datagram the kernel did not steer to it: a coalesced one, a
      // re-plan's new tag before the steering program knew it): counted there.
      --c.received;
      ++c.handed_off;
      group_->HandOff(OwnerThread(g, threads_), d);
      return true;
    }
    IterationProgress& prog = progress_[static_cast<size_t>(it)];
    if (prog.first_us < 0) prog.first_us = now;
    if (retransmit) {
      ++c.retransmit;
      ++prog.retransmissions;
    }
    auto what = [&] {
      return absl::StrCat("tag ", packet->tag, " chunk ", packet->chunk, " from ",
                          core::FormatIpv4(d.source));
    };
    // Whose data the packet carries.
    std::vector<int>& members = members_scratch_;
    int raw_member = -1;
    std::string violation;
    switch (CountContributors(view, d.source, *packet, &members, &raw_member, &violation, &c)) {
      case Contributors::kViolation:
        return Violation(absl::StrCat(what(), violation));
      case Contributors::kUnknownSource:
        return false;
      default:
        break;
    }

    if (shard_.complete[static_cast<size_t>(key)]) {
      ++c.duplicate;
      if (retransmit) Resend(key, raw_member);
      return true;
    }
    auto [acc, fresh] = shard_.open.Open(key);
    if (fresh) acc->Start(members_.size(), packet->slot, view_index, now);
    size_t seen = 0;
    switch (AddToSum(*acc, members, view_index, d.payload, &seen)) {
      case SumOutcome::kDuplicate:
        ++c.duplicate;
        return true;
      case SumOutcome::kReplanOverlap:
        ++c.replan_overlap;
        return true;
      case SumOutcome::kPartialOverlap:
        return Violation(absl::StrCat(what(), ": overlaps the chunk's counted workers partly (",
                                      seen, " of its ", members.size(), " already counted)"));
      case SumOutcome::kAdded:
        break;
    }
    const int64_t contributed = static_cast<int64_t>(members.size());
    c.contributions += contributed;
    prog.contributions += contributed;
    if (members.size() >= 2) {
      c.in_network += contributed;
      prog.in_network += contributed;
    }
    // Every member of the chunk's tag counted (the same members in every configuration).
    if (acc->n == OwnerTag(g).members.size()) Complete(key, now);
    return true;
  }

  void Complete(int64_t key, int64_t now) {
    const PartialSum& acc = *shard_.open.Find(key);
    const int64_t it = key / shard_.chunks;
    const int64_t g = shard_.first + key % shard_.chunks;
    const JobConfig::Tag& owner = OwnerTag(g);
    const uint32_t slot = acc.slot;
    // The result is made where it is kept (for retransmissions), and encoded from there.
    InaPacket scratch;
    InaPacket& r = options_.reduce ? scratch : KeepSlot(key, owner.tag);
    r.tag = owner.tag;
    r.chunk = WireChunk(it, g);
    r.slot = slot;
    r.flags = kFlagResult;
    r.count = static_cast<uint8_t>(owner.members.size());
    r.reserved = 0;
    r.bitmap = 0;
    for (int i = 0; i < kLanes; ++i) r.lanes[i] = static_cast<int32_t>(acc.sum[i]);
    shard_.open.Close(key);
    shard_.complete[static_cast<size_t>(key)] = true;
    if (options_.reduce) {
      // Rina's agent: the result waits for the iteration's reduction (ReduceReady).
      std::vector<int32_t>& sums = pending_[it];
      if (sums.empty()) sums.assign(static_cast<size_t>(options_.lanes), 0);
      const int64_t b = g * kLanes, e = std::min(options_.lanes, b + kLanes);
      std::copy(r.lanes.begin(), r.lanes.begin() + (e - b), sums.begin() + b);
      slot_of_[key] = r.slot;
      SendAck(key, r.slot, -1);
      CountDone(it, now);
      return;
    }
    SendResult(owner, r, -1);
    ++report_.counters.results_sent;
    CountDone(it, now);
  }

  void Keep(int64_t key, const InaPacket& r) { KeepSlot(key, r.tag) = r; }

  // The place of key's result among the kept ones of tag value `tag` (first sent under it): a
  // new slot of that tag's ring (its oldest result forgotten), or the one the key has.
  InaPacket& KeepSlot(int64_t key, uint32_t tag) {
    if (tag != last_ring_tag_ || last_ring_ == UINT32_MAX) {
      auto [ring_at, new_ring] =
          shard_.ring_of.try_emplace(tag, static_cast<uint32_t>(shard_.rings.size()));
      if (new_ring) {
        Shard::KeptRing& made = shard_.rings.emplace_back();
        made.keys.assign(shard_.keep, -1);
        made.results.resize(shard_.keep);
      }
      last_ring_tag_ = tag;
      last_ring_ = ring_at->second;
    }
    const uint32_t ring_index = last_ring_;
    Shard::KeptRing& ring = shard_.rings[ring_index];
    auto [where, fresh] = shard_.kept.try_emplace(key, ring_index, 0);
    if (!fresh) return shard_.rings[where->second.first].results[where->second.second];
    const size_t slot = ring.next;
    where->second.second = static_cast<uint32_t>(slot);
    ring.next = (slot + 1) % ring.keys.size();
    const int64_t oldest = ring.keys[slot];
    ring.keys[slot] = key;
    if (oldest >= 0) shard_.kept.erase(oldest);  // last: `where` is not used after it
    return ring.results[slot];
  }

  void CountDone(int64_t it, int64_t now) {
    if (++shard_.done_in_iteration[static_cast<size_t>(it)] == owned_) {
      while (shard_.iterations_done < options_.iterations &&
             shard_.done_in_iteration[static_cast<size_t>(shard_.iterations_done)] == owned_) {
        ++shard_.iterations_done;
      }
      EmitDone(now);
    }
  }

  // With `reduce`: runs the reduction of every iteration the shard has completed, in order, and
  // sends its results. Not re-entered (a reduction's datagrams only complete later iterations).
  void ReduceReady() {
    if (!options_.reduce || reducing_ || !status_.ok()) return;
    reducing_ = true;
    while (next_emit_ < options_.iterations && status_.ok()) {
      if (shard_.iterations_done <= next_emit_) break;
      const int64_t it = next_emit_;
      std::vector<int32_t>& sums = pending_[it];
      if (sums.empty()) sums.assign(static_cast<size_t>(options_.lanes), 0);
      bool sent = false;
      auto send_results = [&] {
        if (sent) return;
        sent = true;
        int sent_in_burst = 0;
        for (int64_t off = 0; off < shard_.chunks; ++off) {
          const int64_t g = shard_.first + off, key = it * shard_.chunks + off;
          const JobConfig::Tag& owner = OwnerTag(g);
          InaPacket r;
          r.tag = owner.tag;
          r.chunk = WireChunk(it, g);
          r.slot = slot_of_[key];
          slot_of_.erase(key);
          r.flags = kFlagResult;
          r.count = static_cast<uint8_t>(owner.members.size());
          const int64_t b = g * kLanes, e = std::min(options_.lanes, b + kLanes);
          std::copy(sums.begin() + b, sums.begin() + e, r.lanes.begin());
          if (options_.result_burst > 0 && sent_in_burst++ == options_.result_burst) {
            // A software switch's egress queues hold a few dozen packets.
            sent_in_burst = 1;
            SleepUs(options_.result_gap_us);
          }
          SendResult(owner, r, -1);
          ++report_.counters.results_sent;
          Keep(key, r);
        }
      };
      auto on_datagram = [&](const Datagram& d) { (void)OnDatagram(d, NowUs()); };
      status_ = options_.reduce(it, std::span<int32_t>(sums), *socket_, send_results, on_datagram);
      if (!status_.ok()) break;
      send_results();
      pending_.erase(it);
      EmitIteration(NowUs());
    }
    reducing_ = false;
  }

  // Emits the iterations the shard has completed, in order.
  void EmitDone(int64_t now) {
    if (options_.reduce) {
      ReduceReady();
      return;
    }
    while (next_emit_ < options_.iterations && shard_.iterations_done > next_emit_) {
      EmitIteration(now);
    }
  }

  void EmitIteration(int64_t now) {
    IterationProgress& p = progress_[static_cast<size_t>(next_emit_)];
    IterationStats s;
    s.iteration = next_emit_;
    s.size_bytes = report_.size_bytes;
    s.time_ms = p.first_us < 0 ? 0 : static_cast<double>(now - p.first_us) / 1000.0;
    s.retransmissions = p.retransmissions;
    s.contributions = p.contributions;
    s.in_network = p.in_network;
    if (group_ != nullptr) {
      group_->Report(s, p.first_us, now);
    } else {
      report_.iterations.push_back(s);
      if (options_.on_iteration) options_.on_iteration(s);
    }
    ++next_emit_;
  }

  // Rina's agent: the chunk of `key` is summed (flags RESULT | AGGREGATE, no lanes), sent like a
  // result.
  void SendAck(int64_t key, uint32_t slot, int only_member) {
    const int64_t it = key / shard_.chunks;
    const int64_t g = shard_.first + key % shard_.chunks;
    const JobConfig::Tag& owner = OwnerTag(g);
    InaPacket a;
    a.tag = owner.tag;
    a.chunk = WireChunk(it, g);
    a.slot = slot;
    a.flags = kFlagResult | kFlagAggregate;
    a.count = static_cast<uint8_t>(owner.members.size());
    SendResult(owner, a, only_member);
    ++report_.counters.acks_sent;
  }

  // To the members of `t` (r's tag in the latest configuration); `only_member` >= 0 (a canonical
  // index, unicast mode): that member alone.
  void SendResult(const JobConfig::Tag& t, const InaPacket& r, int only_member) {
    QueueResult(*socket_, options_.socket.port, options_.unicast_results, members_, t, r,
                only_member);
  }

  void Resend(int64_t key, int raw_member) {
    auto found = shard_.kept.find(key);
    const int64_t it = key / shard_.chunks;
    const int64_t g = shard_.first + key % shard_.chunks;
    if (found == shard_.kept.end()) {
      // Rina's agent: the result is not out yet (the iteration's reduction runs or waits): the
      // acknowledgement again.
      if (options_.reduce && it >= next_emit_) {
        auto slot = slot_of_.find(key);
        SendAck(key, slot != slot_of_.end() ? slot->second : 0, raw_member);
        return;
      }
      ++report_.counters.results_forgotten;
      return;
    }
    // Under the latest configuration's tag: the switches route that one.
    const JobConfig::Tag& owner = OwnerTag(g);
    InaPacket& kept = shard_.rings[found->second.first].results[found->second.second];
    kept.tag = owner.tag;
    kept.chunk = WireChunk(it, g);
    SendResult(owner, kept, raw_member);
    ++report_.counters.results_resent;
  }

  std::shared_ptr<const JobConfig> config_;                // the latest adopted
  std::vector<std::shared_ptr<const JobConfig>> retired_;  // earlier ones, read by older views
  uint64_t seen_update_ = 0;
  Layout layout_;                // config_'s
  std::vector<uint32_t> owner_;  // gradient chunk -> index of config_'s tag carrying it
  uint32_t keep_window_ = 0;
  const PsOptions& options_;
  Shard shard_;
  std::vector<JobConfig::Member> members_;  // canonical order: first seen in the first config
  absl::flat_hash_map<std::string, int> canonical_;  // worker id -> index into members_
  std::vector<TagView> views_;
  absl::flat_hash_map<uint32_t, size_t> tag_index_;  // value -> view
  std::vector<IterationProgress> progress_;
  // Threads (PsOptions::threads): this one's index, how many, what they share.
  bool Mine(int64_t g) const { return threads_ == 1 || OwnerThread(g, threads_) == thread_; }
  int thread_ = 0;
  int threads_ = 1;
  PsGroup* group_ = nullptr;
  int64_t owned_ = 0;  // gradient chunks of the shard this thread completes
  std::vector<Datagram> handed_;
  uint32_t last_ring_tag_ = 0;        // KeepSlot's: the last tag value ...
  uint32_t last_ring_ = UINT32_MAX;   // ... and its ring
  uint32_t last_tag_ = 0;             // OnDatagram's: the last tag value seen ...
  size_t last_view_ = SIZE_MAX;       // ... and its view
  InaPacket header_;                  // OnDatagram's: the packet at hand
  std::vector<int> members_scratch_;  // OnDatagram's: whose data it carries
  int64_t next_emit_ = 0;
  std::unique_ptr<UdpSocket> socket_;
  PsReport report_;
  // With `reduce`: each iteration's sums until its reduction, and each chunk's slot (by key) for
  // its result.
  std::map<int64_t, std::vector<int32_t>> pending_;
  std::map<int64_t, uint32_t> slot_of_;
  bool reducing_ = false;
  absl::Status status_;  // the first error of `reduce`
};

}  // namespace

namespace {

void AddCounters(const PsCounters& a, PsCounters* sum) {
  sum->received += a.received;
  sum->raw += a.raw;
  sum->aggregate += a.aggregate;
  sum->fallback += a.fallback;
  sum->retransmit += a.retransmit;
  sum->duplicate += a.duplicate;
  sum->violation += a.violation;
  sum->replan_overlap += a.replan_overlap;
  sum->count_mismatch += a.count_mismatch;
  sum->unknown_source += a.unknown_source;
  sum->unknown_tag += a.unknown_tag;
  sum->out_of_range += a.out_of_range;
  sum->malformed += a.malformed;
  sum->ignored += a.ignored;
  sum->results_sent += a.results_sent;
  sum->results_resent += a.results_resent;
  sum->results_forgotten += a.results_forgotten;
  sum->acks_sent += a.acks_sent;
  sum->contributions += a.contributions;
  sum->in_network += a.in_network;
  sum->send_errors += a.send_errors;
  sum->dropped_by_hook += a.dropped_by_hook;
  sum->handed_off += a.handed_off;
}

// PsOptions::threads > 1: one Ps per thread, each owning the gradient chunks OwnerThread gives it,
// on sockets of one SO_REUSEPORT group bound in thread order (the steering program's indices).
absl::StatusOr<PsReport> RunThreads(const JobConfig& config, const PsOptions& options,
                                    int threads) {
  PsGroup group(threads, options);
  std::vector<std::unique_ptr<Ps>> parts;
  for (int t = 0; t < threads; ++t) {
    parts.push_back(std::make_unique<Ps>(config, options));
    parts.back()->SetThread(t, &group);
    if (absl::Status s = parts.back()->Prepare(); !s.ok()) return s;
  }
  std::vector<absl::Status> status(static_cast<size_t>(threads));
  std::vector<int64_t> cpu_us(static_cast<size_t>(threads), 0);
  absl::Status s = RunDataPlane(options.netns_fd, [&]() -> absl::Status {
    SocketOptions so = options.socket;
    so.reuse_port = true;
    so.buffer_bytes = parts[0]->BufferBytes();
    std::vector<std::unique_ptr<UdpSocket>> sockets;
    for (int t = 0; t < threads; ++t) {
      auto socket = UdpSocket::Open(so);
      if (!socket.ok()) return socket.status();
      sockets.push_back(std::move(*socket));
    }
    // Sockets are bound to the namespace they were made in; the threads may run anywhere.
    std::vector<std::thread> running;
    for (int t = 1; t < threads; ++t) {
      running.emplace_back([&, t] {
        const int64_t start = ThreadCpuUs();
        status[t] = parts[t]->Run(std::move(sockets[t]));
        cpu_us[t] = ThreadCpuUs() - start;
      });
    }
    const int64_t start = ThreadCpuUs();
    status[0] = parts[0]->Run(std::move(sockets[0]));
    cpu_us[0] = ThreadCpuUs() - start;
    for (std::thread& r : running) r.join();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  PsReport report = parts[0]->report();
  report.counters = {};
  report.violations.clear();
  report.threads = threads;
  for (int t = 0; t < threads; ++t) {
    const PsReport& r = parts[t]->report();
    AddCounters(r.counters, &report.counters);
    for (const std::string& v : r.violations) {
      if (report.violations.size() < kMaxLoggedViolations) report.violations.push_back(v);
    }
    report.iterations_done = std::min(report.iterations_done, r.iterations_done);
    report.complete = report.complete && r.complete;
    report.cpu_us += cpu_us[t];
  }
  report.iterations = group.iterations();
  return report;
}

}  // namespace

absl::StatusOr<PsReport> RunPs(const JobConfig& config, const PsOptions& options) {
  // Rina's reduction needs every chunk of an iteration in one place: one thread.
  const int threads = options.reduce ? 1 : std::clamp(options.threads, 1, kMaxPsThreads);
  if (threads > 1) return RunThreads(config, options, threads);
  Ps ps(config, options);
  if (absl::Status s = ps.Prepare(); !s.ok()) return s;
  int64_t cpu_us = 0;
  absl::Status s = RunDataPlane(
      options.netns_fd, [&] { return ps.Run(); }, &cpu_us);
  if (!s.ok()) return s;
  PsReport report = ps.report();
  report.cpu_us = cpu_us;
  return report;
}

nlohmann::json PsReportJson(const PsReport& r) {
  nlohmann::json j = {
      {"role", "ps"}, {"job_id", r.job_id}, {"ps", r.ps}, {"workers", r.workers}, {"tags", r.tags}};
  AddSummaryJson(r.iterations, r.workers, &j);
  j["size_bytes"] = r.size_bytes;
  j["iterations_done"] = r.iterations_done;
  j["complete"] = r.complete;
  const PsCounters& c = r.counters;
  j["packets"] = {{"received", c.received},
                  {"raw", c.raw},
                  {"aggregate", c.aggregate},
                  {"fallback", c.fallback},
                  {"retransmit", c.retransmit},
                  {"duplicate", c.duplicate},
                  {"violation", c.violation},
                  {"replan_overlap", c.replan_overlap},
                  {"count_mismatch", c.count_mismatch},
                  {"unknown_source", c.unknown_source},
                  {"unknown_tag", c.unknown_tag},
                  {"out_of_range", c.out_of_range},
                  {"malformed", c.malformed},
                  {"ignored", c.ignored},
                  {"results_sent", c.results_sent},
                  {"results_resent", c.results_resent},
                  {"results_forgotten", c.results_forgotten},
                  {"acks_sent", c.acks_sent},
                  {"send_errors", c.send_errors},
                  {"dropped_by_test_hook", c.dropped_by_hook},
                  {"handed_off", c.handed_off}};
  j["threads"] = r.threads;
  if (r.threads > 1) j["steered"] = r.steered;
  j["contributions"] = {{"total", c.contributions}, {"in_network", c.in_network}};
  j["violations"] = r.violations;
  j["plans"] = r.plans;
  j["cpu_ms"] = static_cast<double>(r.cpu_us) / 1000.0;
  return j;
}

}  // namespace inac::agent
