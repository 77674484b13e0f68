// The worker agent (`inac worker`): all-reduces a gradient through the job's PSs and switches by
// the data-plane contract (docs/ina-pipeline.md, "Data plane (contract v2)"; docs/agents.md).
//
// Contract:
//  - For every tag the worker is a member of, each chunk k of the tag (agent/layout.h) goes as a
//    raw packet (flags 0, count 1, bitmap 0) to the tag's ps_address, destination port
//    socket.port (48864), from the socket bound to socket.bind_address:socket.port. Its number
//    on the wire is iteration * chunks + k.
//  - Slot: when the worker's aggregation node is one of the tag's aggregators with a region and a
//    grant (aggregator_count > 0, window > 0, or an explicit `window`), slot = (slot_offset +
//    chunk mod W) mod aggregator_count; with a region but no grant, slot = aggregator_count
//    (beyond the region: the switch falls back at once, never touching another tag's
//    aggregators); not aggregated: slot 0.
//  - Window W per tag: `window` when non-zero (a test forces contention by exceeding the grant),
//    else the grant, else kDefaultWindow (kDirectWindow when the member's aggregation node is
//    its PS). Chunk c + W is sent only once the result of chunk c has
//    arrived (a sliding window over the lowest chunk without result), so a slot is reused only
//    after the result of the chunk that used it. With congestion_control (the default) only
//    min(cwnd, W) chunks are out past the lowest without result, and first copies are paced.
//  - Retransmission: a chunk without result after the retransmission timeout is sent again with
//    RETRANSMIT, the timeout doubling per copy up to max_timeout_ms. The first copy's timeout is
//    RFC 6298's RTO: 1 s before the first sample (2.1), then SRTT + 4 RTTVAR from results of
//    chunks sent once (Karn's rule), always within [timeout_ms, max_timeout_ms]. The RTO itself
//    is not backed off on a timeout (5.5): a chunk that waits in an aggregator for a slower worker
//    times out without any loss, and a backed-off RTO made every later chunk wait a second. Results
//    (RESULT) are matched by (tag, chunk), i.e. to a gradient chunk through the tag's layout;
//    duplicates and results of other iterations are ignored.
//  - Re-plans: with `updates`, the worker takes each configuration published there between
//    packets and continues under it when every gradient chunk keeps its PS and members
//    (agent::CheckContinuation); the tags, their values, ranges (how each PS's shard is cut),
//    aggregation, slots and windows may all change, also in the middle of an iteration, because
//    the worker keeps its state per gradient chunk. Chunks with a result stay done; chunks in
//    flight under the same tag value stay in flight; chunks in flight under another value (the
//    switches hold entries for the new values only) are sent again at once under the new tag as
//    first copies (so they can aggregate; no RTT sample), those within the new window, the
//    others when the window reaches them; results of every tag value adopted are still accepted
//    (read with that value's lanes). Any other change fails the run with FailedPrecondition.
//  - Iterations run one after the other (all tags of iteration i finish before i + 1 starts).
//  - The gradient of iteration i is `input` when given, else SyntheticLane(seed, worker, i, lane).
//    `check` compares every result lane with the sum of the tag's members' synthetic gradients
//    and fails with DataLoss naming the first mismatch (iteration, tag, chunk, lane, got, want).
//  - Failures: InvalidArgument (not a member, bad options), FailedPrecondition (layout),
//    Unavailable (bind), DeadlineExceeded (no new result for give_up_ms), Cancelled (*stop).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "agent/config_feed.h"
#include "agent/job_config.h"
#include "agent/report.h"
#include "agent/udp_socket.h"

namespace inac::agent {

inline constexpr uint32_t kDefaultWindow = 64;
// The window of a member that sends straight to its PS (no aggregator, so no slots to share):
// the congestion window, not a slot count, limits what is out.
inline constexpr uint32_t kDirectWindow = 1024;
// The congestion window a tag starts with (WorkerOptions::congestion_control).
inline constexpr uint32_t kInitialCongestionWindow = 8;

struct WorkerOptions {
  std::string worker;      // this host's id (a member of the tags)
  int64_t lanes = 262144;  // gradient size in int32 lanes (1 MiB); ignored with `input`
  int64_t iterations = 1;
  uint64_t seed = 1;
  const std::vector<int32_t>* input = nullptr;  // every iteration's gradient, instead of synthetic
  uint32_t window = 0;                          // 0: the grant (or kDefaultWindow)
  int64_t timeout_ms = 20;
  int64_t max_timeout_ms = 1000;
  int64_t give_up_ms = 30000;
  bool check = false;
  SocketOptions socket;
  int netns_fd = -1;  // >= 0: the data-plane thread enters this network namespace
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const IterationStats&)> on_iteration;  // called after each iteration
  std::vector<int32_t>* result = nullptr;  // receives the last iteration's sums (0 elsewhere)
  const ConfigFeed* updates = nullptr;     // newer configurations of the job (re-plans)
  // Rina's rack workers (docs/rina.md "Host roles"): their agent sends each chunk's result only
  // after the ring, and acknowledges each chunk it has summed as soon as it has (a packet with
  // flags RESULT | AGGREGATE, multicast by the ToR like a result, no lanes). An acknowledged
  // chunk no longer holds the window (its aggregator is free: the ToR released it before the
  // agent could sum the chunk) and is not retransmitted until its result is max(max_timeout_ms,
  // give_up_ms / 4) overdue, or max(4 RTO, 100 ms) after the iteration's first result arrived
  // (the copy then asks the agent for the result again). The window defaults to
  // min(grant, kDefaultWindow).
  bool acknowledged_window = false;
  // `check` compares with the sum of these workers' synthetic gradients instead of the tag's
  // members' (Rina: the ring's sum over every worker of the job).
  std::vector<std::string> check_workers;
  // Congestion control: the grant W is an upper bound, not a burst. Per tag a congestion window
  // cwnd (kInitialCongestionWindow at first, at most W) limits the chunks out past the lowest one
  // without result; it grows by one per result of a chunk sent once below ssthresh (initially W),
  // by 1/cwnd above it, and halves on a retransmission timeout, once per round trip. First copies
  // are paced at twice cwnd / SRTT. Slots stay chunk mod W (the window's slot rule). Loss is told
  // from waiting (not with acknowledged_window): a first copy's timeout retransmits only when a
  // chunk sent after it already has its result or no result came for two RTOs (else the chunk
  // waits in an aggregator for a slower worker, and the timer is re-armed); three results of
  // chunks of its steering block (agent/layout.h kSteeringBlock) sent after the lowest chunk
  // without result retransmit it at once (fast retransmit). With chunks in flight, new chunks
  // leave only once a quarter of the window (at most a steering block) is free, in one batch.
  // false: the whole window W is sent at once, every timeout retransmits, as before.
  bool congestion_control = true;
};

struct WorkerReport {
  std::string worker;
  int64_t job_id = 0;
  int workers = 0;  // distinct members of the job's tags (n of busbw)
  int tags = 0;     // tags this worker is a member of
  int64_t size_bytes = 0;
  std::vector<IterationStats> iterations;
  int64_t packets_sent = 0;  // chunks and their copies
  int64_t retransmissions = 0;
  int64_t results = 0;
  int64_t duplicate_results = 0;  // results already received, or of another iteration
  int64_t ignored = 0;            // datagrams that are not results of this worker's tags
  int64_t send_errors = 0;
  int64_t dropped_by_hook = 0;
  std::vector<int64_t> plans;        // plan versions run under: the first, then each one adopted
  int64_t resent_on_new_tag = 0;     // chunks sent again because a re-plan changed their tag
  int64_t acknowledgements = 0;      // WorkerOptions::acknowledged_window: chunks acknowledged
  int64_t window_cuts = 0;           // congestion control: times a congestion window was halved
  int64_t fast_retransmissions = 0;  // of them, sent on three later results (no timeout)
  int64_t timeouts_deferred = 0;     // first-copy timeouts without loss evidence: re-armed
  bool checked = false;
  int64_t cpu_us = 0;  // CPU time of the agent's data-plane threads (user + system)
};

absl::StatusOr<WorkerReport> RunWorker(const JobConfig& config, const WorkerOptions& options);

// A persistent worker: the data path of a client session (agent/inac_client.h). One socket for
// its whole life, opened by OpenWorkerSession on the calling thread (call it inside the data
// plane's network namespace); then any number of all-reduces of any sizes, each on the calling
// thread, by the contract above with these differences:
//  - AllReduce(buf, lanes) sends buf's chunks and writes each result into buf where the chunk
//    was (in place: a chunk is never sent again once its result is in). Chunk g of all-reduce r
//    (a gradient chunk of ComputeLayout(config, lanes)) is number B_r + g on the wire, B_0 = 0,
//    B_{r+1} = B_r + ceil(lanes_r / 62), whatever the outcome of r: unique over the session's
//    tags, continuous over its all-reduces (docs/agents.md, "Sessions").
//  - give_up_ms bounds each all-reduce (DeadlineExceeded with the first chunk still missing);
//    the RTT estimate and congestion windows carry over from one all-reduce to the next.
//  - FailedPrecondition when the worker's tags do not carry every value of the buffer;
//    ResourceExhausted once the chunk numbers would pass 2^32.
//  - `iterations`, `input`, `check`, `result`, `netns_fd`, `on_iteration` are not used.
// Not thread-safe: the caller serialises the calls.
class WorkerSession {
 public:
  virtual ~WorkerSession() = default;
  // On success *stats (may be null) describes the all-reduce (its time and retransmissions).
  virtual absl::Status AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats) = 0;
  // Advances the numbering as an all-reduce of `lanes` values would, sending nothing (the
  // caller's other members run that all-reduce; this one could not).
  virtual void Skip(int64_t lanes) = 0;
  virtual const WorkerReport& report() const = 0;  // totals over the session
  virtual int64_t next_chunk() const = 0;          // B of the next all-reduce
  virtual int64_t plan_version() const = 0;        // the plan the session runs under
  // True when one of the worker's tags (as of the last all-reduce) aggregates in a switch.
  virtual bool InNetwork() const = 0;
  virtual const UdpSocket& socket() const = 0;
};

absl::StatusOr<std::unique_ptr<WorkerSession>> OpenWorkerSession(const JobConfig& config,
                                                                 const WorkerOptions& options);

nlohmann::json WorkerReportJson(const WorkerReport& report);

}  // namespace inac::agent
