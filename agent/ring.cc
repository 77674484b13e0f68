#include "agent/ring.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/job_config.h"
#include "agent/packet.h"
#include "agent/udp_socket.h"
#include "core/ring_intents.h"

namespace inac::agent {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

absl::StatusOr<RingReport> RingAllReduce(const RingMemberOptions& o, std::span<int32_t> data) {
  const int n = o.members;
  if (n < 1) return absl::InvalidArgumentError("ring: members must be >= 1");
  if (o.rank < 0 || o.rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat("ring: rank ", o.rank, " not in [0, ", n, ")"));
  }
  if (o.window < 1) return absl::InvalidArgumentError("ring: window must be >= 1");
  if (n > 1 && (o.next_address == 0 || o.prev_address == 0)) {
    return absl::InvalidArgumentError("ring: a ring of 2 or more needs both neighbour addresses");
  }
  RingReport report;
  const int64_t lanes = static_cast<int64_t>(data.size());
  report.lanes = lanes;
  report.steps = 2 * (n - 1);
  if (n == 1) {
    if (o.on_finished) o.on_finished();
    return report;
  }
  auto seg_begin = [&](int s) { return static_cast<int64_t>(s) * lanes / n; };
  const int64_t max_seg = (lanes + n - 1) / n;
  const int64_t per_segment = std::max<int64_t>(1, (max_seg + kLanes - 1) / kLanes);
  const int steps = report.steps;
  if (o.first_chunk + per_segment * steps >= (int64_t{1} << 32)) {
    return absl::InvalidArgumentError("ring: gradient too large for the chunk space");
  }
  std::unique_ptr<UdpSocket> own;
  if (o.socket == nullptr) {
    SocketOptions so;
    so.bind_address = o.bind_address;
    so.port = o.port;
    so.drop_percent = o.drop_percent;
    so.drop_seed = o.drop_seed;
    auto socket = UdpSocket::Open(so);
    if (!socket.ok()) return socket.status();
    own = std::move(*socket);
  }
  UdpSocket& sock = o.socket != nullptr ? *o.socket : *own;

  // Segment sent / received at global step t.
  auto sent_segment = [&](int t) {
    return t < n - 1 ? Mod(o.rank - t, n) : Mod(o.rank + 1 - (t - (n - 1)), n);
  };
  auto received_segment = [&](int t) {
    return t < n - 1 ? Mod(o.rank - t - 1, n) : Mod(o.rank - (t - (n - 1)), n);
  };
  auto packets_of = [&](int segment) {
    const int64_t len = seg_begin(segment + 1) - seg_begin(segment);
    return static_cast<int>((len + kLanes - 1) / kLanes);
  };
  std::vector<int> received_count(steps, 0);
  std::vector<bool> received(static_cast<size_t>(per_segment * steps), false);
  auto step_received = [&](int t) { return received_count[t] == packets_of(received_segment(t)); };

  struct InFlight {
    InaPacket packet;
    int64_t sent_us = 0;
    int64_t timeout_us = 0;  // doubled per copy, up to max_timeout_us
  };
  std::map<uint32_t, InFlight> unacked;
  int send_step = 0;    // the step whose packets are being sent
  int send_packet = 0;  // next packet of send_step
  int done_steps = 0;   // steps fully received, in order
  const int64_t start_us = NowUs();
  int64_t finish_us = 0;
  int64_t last_rx_us = start_us;
  Datagram dg;

  auto send = [&](InaPacket& p) {
    PacketBytes bytes = EncodePacket(p);
    absl::Status s = sock.Send(o.next_address, o.port, bytes);
    (void)s;  // counted by the socket; a lost send is retransmitted
  };
  auto ack = [&](uint32_t chunk) {
    InaPacket a;
    a.tag = o.tag;
    a.chunk = chunk;
    a.flags = kFlagAggregate;
    PacketBytes bytes = EncodePacket(a);
    absl::Status s = sock.Send(o.prev_address, o.port, bytes);
    (void)s;
  };

  for (;;) {
    const int64_t now = NowUs();
    const bool finished = send_step >= steps && unacked.empty() && done_steps >= steps;
    if (finished && finish_us == 0) {
      finish_us = now;
      if (o.on_finished) o.on_finished();
    }
    // Lingering outlasts the previous member's longest retransmission timeout.
    const int64_t linger_us =
        o.linger_ms > 0 ? std::max(o.linger_ms * 1000, 2 * o.max_timeout_us) : 0;
    if (finished && now - last_rx_us > linger_us) break;
    if (!finished && now - start_us > o.deadline_ms * 1000) {
      return absl::DeadlineExceededError(absl::StrCat("ring: rank ", o.rank, " stuck at step ",
                                                      send_step, " of ", steps, " (received ",
                                                      done_steps, ")"));
    }
    // Send what the window allows.
    while (send_step < steps && static_cast<int>(unacked.size()) < o.window &&
           (send_step == 0 || done_steps >= send_step)) {
      const int segment = sent_segment(send_step);
      const int count = packets_of(segment);
      if (send_packet >= count) {
        ++send_step;
        send_packet = 0;
        continue;
      }
      InaPacket p;
      p.tag = o.tag;
      p.chunk = static_cast<uint32_t>(o.first_chunk + send_step * per_segment + send_packet);
      p.count = 1;
      const int64_t begin = seg_begin(segment) + int64_t{send_packet} * kLanes;
      const int64_t end = std::min(seg_begin(segment + 1), begin + kLanes);
      for (int64_t i = begin; i < end; ++i) p.lanes[i - begin] = data[i];
      send(p);
      ++report.data_packets;
      unacked[p.chunk] = InFlight{p, now, o.timeout_us};
      ++send_packet;
    }
    // Retransmit what timed out.
    for (auto& [chunk, f] : unacked) {
      if (now - f.sent_us < f.timeout_us) continue;
      f.packet.flags = kFlagRetransmit;
      send(f.packet);
      f.sent_us = now;
      f.timeout_us = std::min(2 * f.timeout_us, std::max(o.timeout_us, o.max_timeout_us));
      ++report.retransmissions;
    }
    if (!sock.Wait(1000)) continue;
    while (sock.TryReceive(&dg)) {
      auto p = DecodePacket(dg.payload());
      if (!p.ok() || p->tag != o.tag) {
        if (o.on_other) o.on_other(dg);
        continue;
      }
      if (p->flags & kFlagAggregate) {
        if (dg.source == o.next_address) unacked.erase(p->chunk);
        continue;
      }
      if (dg.source != o.prev_address) continue;
      if (p->chunk < o.first_chunk) {  // an earlier all-reduce's: its ack was lost
        ack(p->chunk);
        last_rx_us = NowUs();
        continue;
      }
      const uint32_t local = p->chunk - o.first_chunk;
      const int t = static_cast<int>(local / per_segment);
      const int k = static_cast<int>(local % per_segment);
      if (t >= steps) continue;  // the next all-reduce's: not acknowledged yet
      last_rx_us = NowUs();
      ack(p->chunk);
      const int segment = received_segment(t);
      if (k >= packets_of(segment)) continue;
      if (received[local]) {
        ++report.duplicates;
        continue;
      }
      received[local] = true;
      ++received_count[t];
      const int64_t begin = seg_begin(segment) + int64_t{k} * kLanes;
      const int64_t end = std::min(seg_begin(segment + 1), begin + kLanes);
      for (int64_t i = begin; i < end; ++i) {
        if (t < n - 1) {
          data[i] = static_cast<int32_t>(static_cast<uint32_t>(data[i]) +
                                         static_cast<uint32_t>(p->lanes[i - begin]));
        } else {
          data[i] = p->lanes[i - begin];
        }
      }
      while (done_steps < steps && step_received(done_steps)) ++done_steps;
    }
  }
  report.elapsed_ms = static_cast<double>(finish_us - start_us) / 1e3;
  if (report.elapsed_ms > 0) {
    report.algbw_gbps = static_cast<double>(lanes) * 4 * 8 / (report.elapsed_ms * 1e6);
    report.busbw_gbps = report.algbw_gbps * 2.0 * (n - 1) / n;
  }
  return report;
}

uint32_t RingChunksPerAllReduce(int64_t lanes, int members) {
  if (members < 2) return 0;
  const int64_t max_seg = (lanes + members - 1) / members;
  const int64_t per_segment = std::max<int64_t>(1, (max_seg + kLanes - 1) / kLanes);
  return static_cast<uint32_t>(per_segment * 2 * (members - 1));
}

absl::StatusOr<RingMemberOptions> RingMemberFor(const JobConfig& config,
                                                const std::string& worker) {
  if (config.ring.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", config.job_id, " is not a ring all-reduce job (no ring)"));
  }
  const JobConfig::RingRole* role = nullptr;
  for (const JobConfig::RingRole& r : config.ring_roles) {
    if (r.worker == worker) role = &r;
  }
  if (role == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker \"", worker, "\" has no ring role in job ", config.job_id));
  }
  if (role->role != "member" && role->role != "agent") {
    return absl::FailedPreconditionError(absl::StrCat("worker \"", worker, "\" is a ", role->role,
                                                      " of the INA rack behind ", role->tor,
                                                      ", not a ring member"));
  }
  RingMemberOptions o;
  o.members = static_cast<int>(config.ring.size());
  o.rank = static_cast<int>(std::find(config.ring.begin(), config.ring.end(), worker) -
                            config.ring.begin());
  if (o.rank >= o.members) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker \"", worker, "\" is a member but not on the ring"));
  }
  o.tag = core::RingHopTag(config.job_id, config.generation);
  o.next_address = role->next_address;
  o.prev_address = role->prev_address;
  return o;
}

}  // namespace inac::agent
