// What a complete chunk of the PS's shard becomes (agent/ps_state.h): its result, sent to the
// tag's members and kept per tag value for retransmissions (sent again on a RETRANSMIT), the
// iterations emitted in order, and Rina's deferred reduction (agent/ps.h PsOptions::reduce).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "agent/clock.h"
#include "agent/packet.h"
#include "agent/ps_accounting.h"
#include "agent/ps_state.h"

namespace inac::agent {
namespace {

void SleepUs(int64_t us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

}  // namespace

void Ps::Complete(int64_t key, int64_t now) {
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

void Ps::Keep(int64_t key, const InaPacket& r) { KeepSlot(key, r.tag) = r; }

InaPacket& Ps::KeepSlot(int64_t key, uint32_t tag) {
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

void Ps::CountDone(int64_t it, int64_t now) {
  if (++shard_.done_in_iteration[static_cast<size_t>(it)] == owned_) {
    while (shard_.iterations_done < options_.iterations &&
           shard_.done_in_iteration[static_cast<size_t>(shard_.iterations_done)] == owned_) {
      ++shard_.iterations_done;
    }
    EmitDone(now);
  }
}

void Ps::ReduceReady() {
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

void Ps::EmitDone(int64_t now) {
  if (options_.reduce) {
    ReduceReady();
    return;
  }
  while (next_emit_ < options_.iterations && shard_.iterations_done > next_emit_) {
    EmitIteration(now);
  }
}

void Ps::EmitIteration(int64_t now) {
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

void Ps::SendAck(int64_t key, uint32_t slot, int only_member) {
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

void Ps::SendResult(const JobConfig::Tag& t, const InaPacket& r, int only_member) {
  QueueResult(*socket_, options_.socket.port, options_.unicast_results, members_, t, r,
              only_member);
}

void Ps::Resend(int64_t key, int raw_member) {
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

}  // namespace inac::agent
