// The PS of a fixed run (agent/ps.h's contract), internal to inac_agent: its shard of the
// gradient and the Ps that completes it, declared here once and implemented by the files that own
// each of its responsibilities:
//   agent/ps.cc          options and the shard (Prepare), the receive loop (Run), re-plans, and
//                        the accounting of one datagram into its chunk's sum
//   agent/ps_results.cc  what a complete chunk becomes: its result (sent, kept for
//                        retransmissions, sent again), the iterations emitted in order, and
//                        Rina's deferred reduction (PsOptions::reduce)
//   agent/ps_threads.cc  the threads of one PS (agent/ps_threads.h) and the kernel's steering of
//                        each datagram to its chunk's thread (SteerToOwners)
//
// Contract:
//  - A Ps is prepared once (Prepare), then runs once (Run). With several threads each has its
//    own Ps, told its index and group by SetThread before Prepare; it completes only the
//    gradient chunks OwnerThread gives it (agent/ps_threads.h) and hands the others to their
//    owner. Not thread-safe otherwise: one thread drives a Ps.
//  - It keeps a reference to its PsOptions, which must outlive it.
//  - Everything is kept per (iteration, gradient chunk) of the shard, key = iteration * chunks +
//    (g - first), whatever tags carry the chunks, so that re-plans may cut the shard into other
//    tags at any point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/job_config.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/ps.h"
#include "agent/ps_accounting.h"
#include "agent/ps_threads.h"
#include "agent/udp_socket.h"

namespace inac::agent {

// Contract violations a report lists (and `log` is called for); the rest are only counted.
inline constexpr size_t kMaxLoggedViolations = 100;

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

  absl::Status Prepare();

  // Serves on `socket` (nullptr: opens options.socket).
  absl::Status Run(std::unique_ptr<UdpSocket> socket = nullptr);

  const PsReport& report() const { return report_; }

  // Receive buffer: every member's window of datagrams at ~1 KiB of kernel memory each (a
  // 272-byte datagram's skb), at least the socket's default, at most 64 MiB.
  int BufferBytes() const;

 private:
  // --- Threads (agent/ps_threads.cc).
  // Thread 0 of a group: the kernel steers each datagram of a known tag value to the socket of
  // the thread that owns its gradient chunk (a classic BPF program over the INA header: tag ->
  // the value's span, chunk -> gradient chunk g -> OwnerThread(g)); anything else to thread 0.
  // Without the program (refused) every datagram still reaches its owner, handed off.
  void SteerToOwners();

  // --- Configurations (agent/ps.cc).
  // Views for the tags of `config` whose PS this is (their member indices are canonical: matched
  // by worker id, so accumulators survive re-plans).
  absl::Status AddViews(const JobConfig& config);
  absl::StatusOr<TagView> MakeView(const JobConfig::Tag& t, const TagSpan& span);
  absl::Status TakeUpdate();
  // Continues under `next` (a re-plan): the same PS and members for every gradient chunk
  // (agent::CheckContinuation), possibly cut into other tags. Each tag value is read by the
  // configuration it came with; results go out under the latest configuration's tags.
  absl::Status Adopt(std::shared_ptr<const JobConfig> next);

  bool AllDone() const { return next_emit_ >= options_.iterations; }

  // Counts and reports a contract violation; true (the packet was one of this PS's).
  bool Violation(const std::string& line);

  // The latest configuration's tag carrying gradient chunk g, and g's number on the wire in
  // iteration `it` under it.
  const JobConfig::Tag& OwnerTag(int64_t g) const {
    return config_->tags[owner_[static_cast<size_t>(g)]];
  }
  uint32_t WireChunk(int64_t it, int64_t g) const {
    const TagSpan& s = layout_.tags[owner_[static_cast<size_t>(g)]];
    return static_cast<uint32_t>(it * s.chunks + (g - s.first_chunk));
  }

  // --- One datagram (agent/ps.cc).
  // True when the packet belongs to one of this PS's tags and chunks.
  bool OnDatagram(const Datagram& d, int64_t now) {
    return OnDatagram(DatagramView{d.source, d.source_port, d.payload()}, now);
  }
  bool OnDatagram(const DatagramView& d, int64_t now);
  // The index into views_ of tag value `tag`, or SIZE_MAX for a value no configuration gave.
  size_t ViewOf(uint32_t tag);
  // The members of packet header_ (members_scratch_, from datagram `d`, read with views_[view])
  // counted into key's sum for gradient chunk g (progress `prog`); the chunk completes when every
  // member is. True (the packet was one of this PS's).
  bool Accumulate(const DatagramView& d, size_t view, int64_t key, int64_t g, int raw_member,
                  IterationProgress& prog, int64_t now);

  // --- Results (agent/ps_results.cc).
  void Complete(int64_t key, int64_t now);
  void Keep(int64_t key, const InaPacket& r);
  // The place of key's result among the kept ones of tag value `tag` (first sent under it): a
  // new slot of that tag's ring (its oldest result forgotten), or the one the key has.
  InaPacket& KeepSlot(int64_t key, uint32_t tag);
  void CountDone(int64_t it, int64_t now);
  // With `reduce`: runs the reduction of every iteration the shard has completed, in order, and
  // sends its results. Not re-entered (a reduction's datagrams only complete later iterations).
  void ReduceReady();
  // Emits the iterations the shard has completed, in order.
  void EmitDone(int64_t now);
  void EmitIteration(int64_t now);
  // Rina's agent: the chunk of `key` is summed (flags RESULT | AGGREGATE, no lanes), sent like a
  // result.
  void SendAck(int64_t key, uint32_t slot, int only_member);
  // To the members of `t` (r's tag in the latest configuration); `only_member` >= 0 (a canonical
  // index, unicast mode): that member alone.
  void SendResult(const JobConfig::Tag& t, const InaPacket& r, int only_member);
  void Resend(int64_t key, int raw_member);

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

}  // namespace inac::agent
