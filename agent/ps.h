// The parameter-server agent (`inac ps`): completes the sums of the tags whose PS it is and sends
// the results back, by the data-plane contract (docs/ina-pipeline.md, "Data plane (contract
// v2)"; docs/agents.md, "PS accounting").
//
// Contract:
//  - Listens on socket.bind_address:socket.port (0.0.0.0:48864). Accumulates, per (iteration,
//    gradient chunk) of its shard (a tag's chunk k is gradient chunk span.first_chunk + k,
//    agent/layout.h), the data of every member exactly once. Whose data a packet carries:
//    source == a member's address: that member (raw, not aggregated in the network); source ==
//    an aggregator's address: the members behind the set bits of `bitmap` over that aggregator's
//    `inputs` (an input that is itself an aggregator expands to its own inputs, recursively).
//    Packets from anyone else, for other tags, beyond the run's chunks, of the wrong length, with
//    bits beyond the inputs or naming unknown inputs are counted and dropped.
//  - A packet whose members are all counted for the chunk already is a duplicate (dropped); one
//    that overlaps them partly is a contract violation (counted, reported through `log`,
//    dropped).
//  - When every member is counted: the RESULT (flags RESULT, the tag and chunk number that carry
//    the gradient chunk in the latest configuration, the slot of the chunk's first packet, count
//    = members, bitmap 0, lanes = the sum modulo 2^32) goes to the first member's address (the
//    switches replicate it to every member and readdress it) or, with unicast_results (no
//    switch on the path), to every member. The last results are kept (at least 4 windows) and a
//    RETRANSMIT for a complete chunk is answered with its RESULT again.
//  - Re-plans: with `updates`, the PS takes each configuration published there between packets
//    and continues under it when every gradient chunk keeps its PS and members
//    (agent::CheckContinuation: tag values, aggregation and the cut of the shard into ranges may
//    change, also within an iteration); otherwise the run fails with FailedPrecondition. A packet
//    is read with the configuration of its tag value (its lanes and inputs; a re-plan that
//    aggregates the job elsewhere changes the values: core::AggregationTag's generation), so a
//    sum made under the old plan is never counted with the new plan's inputs; what was counted
//    for a chunk stays counted. A packet that overlaps a chunk's counted workers partly when the
//    chunk has packets of several tag values is a re-plan overlap (counted, dropped), not a
//    violation. Results, and results sent again, carry the latest configuration's tag and chunk
//    number.
//  - Runs until every tag has completed `iterations` iterations (chunk numbers iteration *
//    chunks + k, agent/layout.h), then keeps answering retransmissions until no packet of its
//    tags arrived for linger_ms (at most 10 x linger_ms); or until duration_ms (if > 0) or
//    *stop. OK in all these cases; the report says how many iterations every tag completed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "agent/config_feed.h"
#include "agent/job_config.h"
#include "agent/report.h"
#include "agent/udp_socket.h"

namespace inac::agent {

struct PsCounters {
  int64_t received = 0;
  int64_t raw = 0;         // from a member directly
  int64_t aggregate = 0;   // AGGREGATE from an aggregator
  int64_t fallback = 0;    // FALLBACK (unaggregated, partial, evicted) from an aggregator
  int64_t retransmit = 0;  // packets carrying RETRANSMIT (any kind)
  int64_t duplicate = 0;
  int64_t violation = 0;       // partial overlaps, bad bitmaps
  int64_t replan_overlap = 0;  // partial overlaps across a re-plan (expected; dropped)
  int64_t count_mismatch = 0;  // `count` differs from the members the bitmap names (accepted)
  int64_t unknown_source = 0;
  int64_t unknown_tag = 0;
  int64_t out_of_range = 0;  // chunk beyond iterations x chunks of the tag
  int64_t malformed = 0;
  int64_t ignored = 0;  // RESULT packets
  int64_t results_sent = 0;
  int64_t results_resent = 0;
  int64_t results_forgotten = 0;  // RETRANSMIT of a complete chunk whose result is no longer kept
  int64_t acks_sent = 0;          // with `reduce`: chunk acknowledgements (RESULT | AGGREGATE)
  int64_t contributions = 0;      // (member, chunk) pairs counted
  int64_t in_network = 0;         // ... that arrived in a packet carrying >= 2 members
  int64_t send_errors = 0;
  int64_t dropped_by_hook = 0;
  int64_t handed_off = 0;  // threads > 1: received by one thread, counted by the chunk's owner
};

inline constexpr int kMaxPsThreads = 64;

struct PsOptions {
  std::string ps;          // this host's id (the `ps` of its tags)
  int64_t lanes = 262144;  // gradient size in int32 lanes (the workers' --size / 4)
  int64_t iterations = 1;
  int64_t duration_ms = 0;  // 0: no limit
  int64_t linger_ms = 1000;
  bool unicast_results = false;
  uint32_t window = 0;  // the workers' --window, if any (sizes the kept results)
  SocketOptions socket;
  int netns_fd = -1;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const IterationStats&)> on_iteration;
  std::function<void(const std::string&)> log;  // one line per contract violation (first 100)
  // Observers called on the data-plane thread: once the socket is bound, and after each datagram
  // is handled (tests use them to pace hand-made packets).
  std::function<void()> on_ready;
  std::function<void(const PsCounters&)> on_packet;
  const ConfigFeed* updates = nullptr;  // newer configurations of the job (re-plans)
  // Threads serving the socket's address and port (clamped to [1, kMaxPsThreads]; 1 with
  // `reduce`). Thread t completes the gradient chunks g with (g / kSteeringBlock) mod threads =
  // t, on its own socket of one SO_REUSEPORT group; a classic BPF program makes the kernel
  // deliver each datagram to the socket of its chunk's thread, and a thread hands a datagram it
  // got for another thread's chunk to that thread (counted in handed_off), so sums stay exact
  // whatever arrives where. The callbacks (on_iteration, log, on_packet) may then run on any of
  // the threads, one at a time for on_iteration (iterations merged over the threads, in order).
  // Note SO_REUSEPORT: another process of the same user binding the same address and port with
  // SO_REUSEPORT joins the group (a second PS on one address is refused only with threads = 1).
  int threads = 1;
  // Rina's agent (docs/rina.md "Host roles"): when set, a completed chunk's result is not sent at
  // once; an acknowledgement is (flags RESULT | AGGREGATE, the chunk's tag, chunk and slot, no
  // lanes, to the same address as a result; again for a RETRANSMIT of the chunk until its result
  // is out). When every chunk of iteration i of every tag is complete (iterations in order), the
  // sums of the whole gradient (`lanes` int32 lanes, zero where no tag of this PS lies) are
  // passed to reduce(i, sums, socket, send_results) on the data-plane thread, which may change
  // them (the agent adds its own gradient and runs the ring on `socket`, the PS's socket) and
  // calls send_results() once they are final: every chunk's RESULT then goes out from the sums
  // (and is kept for retransmissions). If reduce returns without calling it, the results go out
  // on return. While reduce runs, datagrams it hands to on_datagram(d) are read as the PS reads
  // its own (a later iteration's chunks); an error from reduce ends the run with that status.
  std::function<absl::Status(int64_t iteration, std::span<int32_t> sums, UdpSocket& socket,
                             const std::function<void()>& send_results,
                             const std::function<void(const Datagram&)>& on_datagram)>
      reduce;
  // With `reduce`: the results of an iteration leave in bursts of result_burst packets,
  // result_gap_us apart (0: all at once), so a software switch's queues keep them.
  int result_burst = 16;
  int64_t result_gap_us = 4000;
};

struct PsReport {
  std::string ps;
  int64_t job_id = 0;
  int workers = 0;  // distinct members of its tags
  int tags = 0;
  int64_t size_bytes = 0;  // bytes of the gradient its tags cover
  int64_t iterations_done = 0;
  bool complete = false;  // all iterations done
  std::vector<IterationStats> iterations;
  PsCounters counters;
  std::vector<std::string> violations;  // the first 100, as logged
  std::vector<int64_t> plans;           // plan versions run under: the first, then each one adopted
  int64_t cpu_us = 0;  // CPU time of the agent's data-plane threads (user + system)
  int threads = 1;
  bool steered = false;  // threads > 1: the kernel took the steering program
};

absl::StatusOr<PsReport> RunPs(const JobConfig& config, const PsOptions& options);

nlohmann::json PsReportJson(const PsReport& report);

}  // namespace inac::agent
