#include "agent/ps_serve.h"

#include <algorithm>
#include <array>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/packet.h"
#include "agent/ps_accounting.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

constexpr size_t kMaxLoggedViolations = 100;

struct Kept {
  InaPacket result;
  int64_t completed_us = 0;
};

// The last results of one tag value, oldest overwritten first.
struct Ring {
  std::vector<int64_t> keys;  // -1: free
  std::vector<Kept> results;
  size_t next = 0;
};

class ServingPs {
 public:
  ServingPs(const JobConfig& config, const PsOptions& options, const ServeOptions& serve)
      : config_(std::make_shared<const JobConfig>(config)), options_(options), serve_(serve) {}

  absl::Status Prepare() {
    if (options_.ps.empty()) return absl::InvalidArgumentError("--ps: required");
    if (serve_.idle_ms < 1 || serve_.restart_after_ms < 1) {
      return absl::InvalidArgumentError("serve: idle_ms and restart_after_ms must be >= 1");
    }
    int tags = 0;
    for (const JobConfig::Tag& t : config_->tags) {
      if (t.ps != options_.ps) continue;
      if (t.members.empty()) {
        return absl::FailedPreconditionError(absl::StrCat("tag ", t.tag, " has no members"));
      }
      ++tags;
      for (const auto& m : t.members) {
        if (canonical_.emplace(m.worker, static_cast<int>(members_.size())).second) {
          members_.push_back(m);
        }
      }
    }
    if (tags == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(options_.ps, " is not the PS of any tag of job ", config_->job_id));
    }
    if (absl::Status s = AddViews(*config_); !s.ok()) return s;
    report_.ps.ps = options_.ps;
    report_.ps.job_id = config_->job_id;
    report_.ps.plans.push_back(config_->plan_version);
    report_.ps.workers = static_cast<int>(members_.size());
    report_.ps.tags = tags;
    return absl::OkStatus();
  }

  absl::Status Run() {
    SocketOptions so = options_.socket;
    const int64_t want = static_cast<int64_t>(members_.size()) * keep_window_ * 1024;
    so.buffer_bytes = static_cast<int>(std::clamp<int64_t>(want, so.buffer_bytes, 64 << 20));
    auto opened = UdpSocket::Open(so);
    if (!opened.ok()) return opened.status();
    socket_ = std::move(*opened);
    if (options_.on_ready) options_.on_ready();
    const int64_t start = NowUs();
    int64_t swept = start;
    while (status_.ok()) {
      if (options_.stop != nullptr && options_.stop->load()) break;
      int64_t now = NowUs();
      if (options_.duration_ms > 0 && now - start >= options_.duration_ms * 1000) break;
      if (now - swept >= 1000000) {
        DropIdle(now);
        swept = now;
      }
      const bool readable = socket_->Wait(50000);
      if (absl::Status s = TakeUpdate(); !s.ok()) return s;
      if (!readable) continue;
      DatagramView d;
      now = NowUs();
      for (int n = 1; socket_->Next(&d); ++n) {
        if (n % 16 == 0) now = NowUs();
        OnDatagram(d, now);
        if (options_.on_packet) options_.on_packet(report_.ps.counters);
      }
    }
    report_.ps.counters.send_errors = static_cast<int64_t>(socket_->send_errors());
    report_.ps.counters.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
    return status_;
  }

  const ServeReport& report() const { return report_; }

 private:
  absl::Status AddViews(const JobConfig& config) {
    for (const JobConfig::Tag& t : config.tags) {
      if (t.ps != options_.ps) continue;
      auto view = MakeTagView(t, TagSpan{}, canonical_, options_.window);
      if (!view.ok()) return view.status();
      keep_window_ = std::max(keep_window_, view->window);
      auto known = tag_index_.find(t.tag);
      if (known != tag_index_.end()) {
        views_[known->second] = std::move(*view);
      } else {
        tag_index_[t.tag] = views_.size();
        views_.push_back(std::move(*view));
      }
    }
    keep_ = std::max<size_t>(4096, 4 * static_cast<size_t>(keep_window_));
    return absl::OkStatus();
  }

  // A re-plan: the same workers over this PS's tags, possibly aggregated elsewhere.
  absl::Status TakeUpdate() {
    if (options_.updates == nullptr) return absl::OkStatus();
    auto next = options_.updates->TakeIfNewer(&seen_update_);
    if (next == nullptr) return absl::OkStatus();
    std::set<std::string> before, after;
    for (const auto& m : members_) before.insert(m.worker);
    for (const JobConfig::Tag& t : next->tags) {
      if (t.ps != options_.ps) continue;
      for (const auto& m : t.members) after.insert(m.worker);
    }
    if (before != after) {
      return absl::FailedPreconditionError(
          absl::StrCat("plan ", next->plan_version, " changes the members of PS ", options_.ps,
                       "'s tags; restart the sessions and the PS"));
    }
    if (absl::Status s = AddViews(*next); !s.ok()) return s;
    retired_.push_back(std::move(config_));  // its tags still read packets of their values
    config_ = std::move(next);
    report_.ps.plans.push_back(config_->plan_version);
    return absl::OkStatus();
  }

  void Violation(const std::string& line) {
    ++report_.ps.counters.violation;
    if (report_.ps.violations.size() < kMaxLoggedViolations) {
      report_.ps.violations.push_back(line);
      if (options_.log) options_.log(line);
    }
  }

  void OnDatagram(const DatagramView& d, int64_t now) {
    PsCounters& c = report_.ps.counters;
    ++c.received;
    InaPacket* packet = &header_;
    if (!DecodePacketHeader(d.payload, packet)) {
      ++c.malformed;
      return;
    }
    if (packet->flags & kFlagResult) {
      ++c.ignored;
      return;
    }
    auto found = tag_index_.find(packet->tag);
    if (found == tag_index_.end()) {
      ++c.unknown_tag;
      return;
    }
    const size_t view_index = found->second;
    const TagView& view = views_[view_index];
    const bool retransmit = (packet->flags & kFlagRetransmit) != 0;
    auto what = [&] {
      return absl::StrCat("tag ", packet->tag, " chunk ", packet->chunk, " from ",
                          core::FormatIpv4(d.source));
    };
    std::vector<int>& members = members_scratch_;
    int raw_member = -1;
    std::string violation;
    switch (CountContributors(view, d.source, *packet, &members, &raw_member, &violation, &c)) {
      case Contributors::kViolation:
        Violation(absl::StrCat(what(), violation));
        return;
      case Contributors::kUnknownSource:
        return;
      default:
        break;
    }
    if (retransmit) ++c.retransmit;
    const int64_t key = packet->chunk;
    if (auto kept = kept_.find(key); kept != kept_.end()) {
      if (!retransmit && now - kept->second->completed_us > serve_.restart_after_ms * 1000) {
        // A first copy of a chunk completed long ago: chunk numbers started again, the members
        // opened new sessions.
        Forget();
        ++report_.sessions;
      } else {
        ++c.duplicate;
        if (retransmit) Resend(&kept->second->result, *packet, raw_member);
        return;
      }
    }
    auto [acc, fresh] = open_.Open(key);
    if (fresh) {
      acc->Start(members_.size(), packet->slot, view_index, now);
    } else if (!retransmit && now - acc->touched_us > serve_.restart_after_ms * 1000) {
      // A first copy into a sum no packet touched for restart_after_ms: its members gave up on
      // it (an all-reduce of earlier sessions that failed; members still waiting for a sum
      // retransmit it at least every second). Whoever sends it now belongs to a new session:
      // start the chunk again. Wrongly taken for stale, a live sum only costs its members one
      // more retransmission.
      acc->Start(members_.size(), packet->slot, view_index, now);
      ++report_.stale_restarted;
    }
    acc->touched_us = now;
    size_t seen = 0;
    switch (AddToSum(*acc, members, view_index, d.payload, &seen)) {
      case SumOutcome::kDuplicate:
        ++c.duplicate;
        return;
      case SumOutcome::kReplanOverlap:
        ++c.replan_overlap;
        return;
      case SumOutcome::kPartialOverlap:
        Violation(absl::StrCat(what(), ": overlaps the chunk's counted workers partly (", seen,
                               " of its ", members.size(), " already counted)"));
        return;
      case SumOutcome::kAdded:
        break;
    }
    c.contributions += static_cast<int64_t>(members.size());
    if (members.size() >= 2) c.in_network += static_cast<int64_t>(members.size());
    if (acc->n >= view.tag->members.size()) Complete(key, *acc, *packet, now);
  }

  void Complete(int64_t key, const PartialSum& acc, const InaPacket& last, int64_t now) {
    Kept& kept = KeepSlot(key, last.tag);
    kept.completed_us = now;
    InaPacket& r = kept.result;
    r.tag = last.tag;
    r.chunk = static_cast<uint32_t>(key);
    r.slot = acc.slot;
    r.flags = kFlagResult;
    r.count = static_cast<uint8_t>(views_[tag_index_[last.tag]].tag->members.size());
    r.reserved = 0;
    r.bitmap = 0;
    for (int i = 0; i < kLanes; ++i) r.lanes[i] = static_cast<int32_t>(acc.sum[i]);
    open_.Close(key);  // `acc` is free from here
    ++report_.chunks_completed;
    SendResult(*views_[tag_index_[last.tag]].tag, r, -1);
    ++report_.ps.counters.results_sent;
  }

  Kept& KeepSlot(int64_t key, uint32_t tag) {
    auto [ring_at, new_ring] = ring_of_.try_emplace(tag, static_cast<uint32_t>(rings_.size()));
    if (new_ring) {
      Ring& made = rings_.emplace_back();
      made.keys.assign(keep_, -1);
      made.results.resize(keep_);
    }
    Ring& ring = rings_[ring_at->second];
    const size_t slot = ring.next;
    ring.next = (slot + 1) % ring.keys.size();
    const int64_t oldest = ring.keys[slot];
    if (oldest >= 0) kept_.erase(oldest);
    ring.keys[slot] = key;
    kept_[key] = &ring.results[slot];
    return ring.results[slot];
  }

  void Resend(InaPacket* kept, const InaPacket& asking, int raw_member) {
    kept->tag = asking.tag;  // the value the asker runs under: the one the switches route
    kept->slot = asking.slot;
    SendResult(*views_[tag_index_[asking.tag]].tag, *kept, raw_member);
    ++report_.ps.counters.results_resent;
  }

  void SendResult(const JobConfig::Tag& t, const InaPacket& r, int only_member) {
    QueueResult(*socket_, options_.socket.port, options_.unicast_results, members_, t, r,
                only_member);
  }

  void DropIdle(int64_t now) {
    report_.dropped_idle += open_.CloseIf(
        [&](const PartialSum& sum) { return now - sum.touched_us > serve_.idle_ms * 1000; });
  }

  void Forget() {
    open_.Clear();
    kept_.clear();
    for (Ring& ring : rings_) {
      std::fill(ring.keys.begin(), ring.keys.end(), -1);
      ring.next = 0;
    }
  }

  std::shared_ptr<const JobConfig> config_;
  std::vector<std::shared_ptr<const JobConfig>> retired_;
  const PsOptions& options_;
  const ServeOptions serve_;
  uint64_t seen_update_ = 0;
  std::vector<JobConfig::Member> members_;  // canonical order
  absl::flat_hash_map<std::string, int> canonical_;
  std::vector<TagView> views_;
  absl::flat_hash_map<uint32_t, size_t> tag_index_;  // tag value -> view
  uint32_t keep_window_ = 0;
  size_t keep_ = 4096;
  SumPool open_;  // the chunks with data but no result yet, by chunk number
  std::vector<Ring> rings_;
  absl::flat_hash_map<uint32_t, uint32_t> ring_of_;  // tag value -> ring
  absl::flat_hash_map<int64_t, Kept*> kept_;         // chunk number -> its kept result
  std::unique_ptr<UdpSocket> socket_;
  std::vector<int> members_scratch_;
  InaPacket header_;
  ServeReport report_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<ServeReport> ServePs(const JobConfig& config, const PsOptions& options,
                                    const ServeOptions& serve) {
  ServingPs ps(config, options, serve);
  if (absl::Status s = ps.Prepare(); !s.ok()) return s;
  int64_t cpu_us = 0;
  absl::Status s = RunDataPlane(
      options.netns_fd, [&] { return ps.Run(); }, &cpu_us);
  if (!s.ok()) return s;
  ServeReport report = ps.report();
  report.ps.cpu_us = cpu_us;
  report.ps.threads = 1;
  return report;
}

}  // namespace inac::agent
