// The PS of a fixed run (`inac ps`, agent/ps.h): its options and shard, the receive loop, re-plans
// and the accounting of one datagram into its chunk's sum. Results are agent/ps_results.cc's, the
// threads of one PS agent/ps_threads.cc's (agent/ps_state.h).
#include "agent/ps.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/layout.h"
#include "agent/packet.h"
#include "agent/ps_accounting.h"
#include "agent/ps_state.h"
#include "agent/ps_threads.h"
#include "core/topology.h"

namespace inac::agent {
namespace {

constexpr int64_t kMaxLingerFactor = 10;

// A packet as a violation names it: its tag, chunk and source.
std::string PacketLabel(const InaPacket& packet, const DatagramView& d) {
  return absl::StrCat("tag ", packet.tag, " chunk ", packet.chunk, " from ",
                      core::FormatIpv4(d.source));
}

}  // namespace

absl::Status Ps::Prepare() {
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

absl::Status Ps::Run(std::unique_ptr<UdpSocket> socket) {
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

int Ps::BufferBytes() const {
  const int64_t want = static_cast<int64_t>(members_.size()) * keep_window_ * 1024;
  return static_cast<int>(std::clamp<int64_t>(want, options_.socket.buffer_bytes, 64 << 20));
}

absl::Status Ps::AddViews(const JobConfig& config) {
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

absl::StatusOr<TagView> Ps::MakeView(const JobConfig::Tag& t, const TagSpan& span) {
  auto v = MakeTagView(t, span, canonical_, options_.window);
  if (v.ok()) keep_window_ = std::max(keep_window_, v->window);
  return v;
}

absl::Status Ps::TakeUpdate() {
  if (options_.updates == nullptr) return absl::OkStatus();
  auto next = options_.updates->TakeIfNewer(&seen_update_);
  return next != nullptr ? Adopt(std::move(next)) : absl::OkStatus();
}

absl::Status Ps::Adopt(std::shared_ptr<const JobConfig> next) {
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

bool Ps::Violation(const std::string& line) {
  ++report_.counters.violation;
  if (report_.violations.size() < kMaxLoggedViolations) {
    report_.violations.push_back(line);
    if (options_.log) options_.log(line);
  }
  return true;
}

bool Ps::OnDatagram(const DatagramView& d, int64_t now) {
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
  const size_t view_index = ViewOf(packet->tag);
  if (view_index == SIZE_MAX) {
    ++c.unknown_tag;
    return false;
  }
  const TagView& view = views_[view_index];
  if (view.span.chunks == 0 ||
      static_cast<int64_t>(packet->chunk) >= view.span.chunks * options_.iterations) {
    ++c.out_of_range;
    return false;
  }
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
  if ((packet->flags & kFlagRetransmit) != 0) {
    ++c.retransmit;
    ++prog.retransmissions;
  }
  // Whose data the packet carries.
  int raw_member = -1;
  std::string violation;
  switch (
      CountContributors(view, d.source, *packet, &members_scratch_, &raw_member, &violation, &c)) {
    case Contributors::kViolation:
      return Violation(absl::StrCat(PacketLabel(*packet, d), violation));
    case Contributors::kUnknownSource:
      return false;
    default:
      break;
  }
  return Accumulate(d, view_index, key, g, raw_member, prog, now);
}

size_t Ps::ViewOf(uint32_t tag) {
  if (tag != last_tag_ || last_view_ == SIZE_MAX) {
    // Packets come in runs of one tag: the last value's view is kept (views are only added).
    auto found = tag_index_.find(tag);
    if (found == tag_index_.end()) return SIZE_MAX;
    last_tag_ = tag;
    last_view_ = found->second;
  }
  return last_view_;
}

bool Ps::Accumulate(const DatagramView& d, size_t view, int64_t key, int64_t g, int raw_member,
                    IterationProgress& prog, int64_t now) {
  PsCounters& c = report_.counters;
  const InaPacket& packet = header_;
  const std::vector<int>& members = members_scratch_;
  if (shard_.complete[static_cast<size_t>(key)]) {
    ++c.duplicate;
    if ((packet.flags & kFlagRetransmit) != 0) Resend(key, raw_member);
    return true;
  }
  auto [acc, fresh] = shard_.open.Open(key);
  if (fresh) acc->Start(members_.size(), packet.slot, view, now);
  size_t seen = 0;
  switch (AddToSum(*acc, members, view, d.payload, &seen)) {
    case SumOutcome::kDuplicate:
      ++c.duplicate;
      return true;
    case SumOutcome::kReplanOverlap:
      ++c.replan_overlap;
      return true;
    case SumOutcome::kPartialOverlap:
      return Violation(absl::StrCat(PacketLabel(packet, d),
                                    ": overlaps the chunk's counted workers partly (", seen,
                                    " of its ", members.size(), " already counted)"));
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
