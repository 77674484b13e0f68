// Ring all-reduce between ring members over UDP INA packets (docs/rina.md, "Host ring mode"):
// reduce-scatter then all-gather, 2 (n - 1) steps, each member sending one segment per step to its
// next neighbour and receiving one from its previous, with a window of packets in flight,
// acknowledgements and retransmission, so that loss never breaks exactness.
//
// Wire form (on the ring's hop tag, core::RingHopTag; the switches only route it):
//   data  flags 0 (RETRANSMIT 8 when resent), chunk = step * P + packet (P packets per segment,
//         ceil(ceil(L / n) / 62)), lanes = the segment's lanes [packet * 62, ...) (zero past the
//         segment's end), count = 1, from a member to its next neighbour;
//   ack   flags AGGREGATE 4, the data packet's chunk echoed, no lanes, from the receiver back.
// Segments: segment s holds lanes [s L / n, (s + 1) L / n) (integer division) of L lanes. At
// reduce-scatter step k member r sends segment (r - k) mod n and adds the one it receives,
// (r - k - 1) mod n; at all-gather step k it sends (r + 1 - k) mod n and overwrites (r - k) mod n.
// A member sends step t only after it received all of step t - 1; a received packet is applied
// once (duplicates are acknowledged again, not applied twice). After the last step it lingers,
// acknowledging retransmissions, until nothing arrived for linger_ms. A packet is resent after
// timeout_us, each further copy waiting twice as long (up to max_timeout_us).
// Sums wrap as int32 (two's complement), as the switches' lanes do.
//
// Not thread-safe: one call per thread, each with its own socket.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "agent/udp_socket.h"

namespace inac::agent {

struct RingMemberOptions {
  int rank = 0;     // position on the ring, 0 <= rank < members
  int members = 0;  // n' >= 1
  uint32_t tag = 0;
  uint32_t bind_address = 0;  // host byte order
  uint16_t port = 0;          // every member listens on this port (kInaUdpPort through switches)
  uint32_t next_address = 0;
  uint32_t prev_address = 0;
  // Chunk numbers of this all-reduce start here (iteration i of a run: i * 2 (n - 1) * P): a
  // packet below it is an old duplicate (acknowledged again), one past this all-reduce's chunks
  // belongs to the next (ignored, so its sender retransmits it later).
  uint32_t first_chunk = 0;
  int window = 64;                   // data packets in flight toward the next member, >= 1
  int64_t timeout_us = 20000;        // a packet's first retransmission timeout
  int64_t max_timeout_us = 1000000;  // each copy doubles it up to this (no congestion collapse)
  int64_t linger_ms = 200;           // > 0: at least 2 max_timeout_us (0: no lingering)
  int64_t deadline_ms = 60000;       // DeadlineExceeded when the all-reduce takes longer
  double drop_percent = 0;           // test hook of the socket (agent/udp_socket.h)
  uint64_t drop_seed = 0;
  // Not owned: when set, the all-reduce runs on this socket (bound by the caller; bind_address,
  // port and the drop fields are then ignored) instead of opening its own. Rina's agent shares
  // its PS socket this way.
  UdpSocket* socket = nullptr;
  // Datagrams that are not of `tag` (another tag, or not INA) are handed here instead of being
  // dropped (Rina's agent: the rack's chunks of the next iteration).
  std::function<void(const Datagram&)> on_other;
  // Called once when this member holds the final sums (before lingering).
  std::function<void()> on_finished;
};

struct RingReport {
  int64_t lanes = 0;
  int steps = 0;  // 2 (n - 1)
  int64_t data_packets = 0;
  int64_t retransmissions = 0;
  int64_t duplicates = 0;  // data packets received more than once
  double elapsed_ms = 0;   // first send to the last step's completion (without lingering)
  double algbw_gbps = 0;   // nccl-tests: lanes * 4 bytes / elapsed
  double busbw_gbps = 0;   // algbw * 2 (n - 1) / n
};

// All-reduces `data` (in: this member's gradient; out: the sum over all members) with the other
// members. InvalidArgument for bad options (rank out of range, no members, window < 1, n > 1
// without neighbour addresses, a segment longer than the chunk space), Unavailable when the
// socket cannot be bound, DeadlineExceeded when the ring does not finish within deadline_ms.
absl::StatusOr<RingReport> RingAllReduce(const RingMemberOptions& options, std::span<int32_t> data);

// Chunk numbers one all-reduce of `lanes` lanes over `members` uses (2 (n - 1) · P).
uint32_t RingChunksPerAllReduce(int64_t lanes, int members);

// The ring member options of `worker` from its job's configuration (GET /jobs/{id}/config:
// `ring`, `ring_roles`, `generation`): rank, members, neighbours, tag core::RingHopTag, for the
// roles on the ring (member, agent). NotFound when the worker has no role, FailedPrecondition for
// a rack-worker (not on the ring: it runs agent::RunWorker on RackConfigFor), InvalidArgument when
// the job is not a ring job. Socket fields (bind address, port, drop) are left to the caller.
struct JobConfig;
absl::StatusOr<RingMemberOptions> RingMemberFor(const JobConfig& config, const std::string& worker);

}  // namespace inac::agent
