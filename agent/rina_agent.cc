#include "agent/rina_agent.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/gradient.h"

namespace inac::agent {
namespace {

const JobConfig::RingRole* RoleOf(const JobConfig& config, const std::string& worker) {
  for (const JobConfig::RingRole& r : config.ring_roles) {
    if (r.worker == worker) return &r;
  }
  return nullptr;
}

void AddWrapping(std::span<const int32_t> part, std::span<int32_t> into) {
  for (size_t i = 0; i < into.size(); ++i) {
    into[i] = static_cast<int32_t>(static_cast<uint32_t>(into[i]) + static_cast<uint32_t>(part[i]));
  }
}

class RingMember {
 public:
  RingMember(const JobConfig& config, const RinaOptions& options)
      : config_(config), options_(options) {}

  absl::Status Prepare() {
    if (options_.iterations < 1) return absl::InvalidArgumentError("--iterations: must be >= 1");
    auto lanes = GradientLanes(options_.input, options_.lanes, options_.check);
    if (!lanes.ok()) return lanes.status();
    lanes_ = *lanes;
    auto ring = RingMemberFor(config_, options_.worker);
    if (!ring.ok()) return ring.status();
    ring_ = *ring;
    ring_.window = options_.window;
    ring_.port = options_.socket.port;  // every member listens on the same port
    ring_.bind_address = options_.socket.bind_address;
    ring_.timeout_us = options_.timeout_us;
    ring_.max_timeout_us = std::max(options_.timeout_us, options_.max_timeout_us);
    ring_.deadline_ms = options_.give_up_ms;
    const JobConfig::RingRole* role = RoleOf(config_, options_.worker);
    report_.worker = options_.worker;
    report_.job_id = config_.job_id;
    report_.role = role->role;
    report_.members = ring_.members;
    report_.workers = static_cast<int>(RingJobWorkers(config_).size());
    report_.size_bytes = lanes_ * 4;
    if (role->role == "agent") {
      auto rack = RackConfigFor(config_, options_.worker);
      if (rack.ok()) {
        rack_ = std::move(*rack);
        report_.has_rack = true;
        report_.rack_workers = static_cast<int>(rack_.tags.front().members.size());
      } else if (rack.status().code() != absl::StatusCode::kNotFound) {
        return rack.status();
      }
      // NotFound: a rack whose only worker is the agent; it runs as a plain member.
    }
    return absl::OkStatus();
  }

  absl::Status Run() {
    if (report_.has_rack) return RunAgent();
    return RunDataPlane(options_.netns_fd, [&]() -> absl::Status {
      auto socket = UdpSocket::Open(options_.socket);
      if (!socket.ok()) return socket.status();
      std::vector<int32_t> data(static_cast<size_t>(lanes_));
      for (int64_t it = 0; it < options_.iterations; ++it) {
        if (options_.stop != nullptr && options_.stop->load()) {
          return absl::CancelledError("stopped");
        }
        Gradient(it, data);
        const int64_t start = NowUs();
        auto ring = Ring(it, data, **socket, nullptr, nullptr);
        if (!ring.ok()) return ring.status();
        IterationStats s;
        s.iteration = it;
        s.size_bytes = report_.size_bytes;
        s.time_ms =
            ring->elapsed_ms > 0 ? ring->elapsed_ms : static_cast<double>(NowUs() - start) / 1000.0;
        s.retransmissions = ring->retransmissions;
        if (absl::Status c = Finish(it, data, s, *ring); !c.ok()) return c;
      }
      return absl::OkStatus();
    });
  }

  const RinaReport& report() const { return report_; }

 private:
  void Gradient(int64_t it, std::span<int32_t> out) const {
    if (options_.input != nullptr) {
      std::copy(options_.input->begin(), options_.input->end(), out.begin());
    } else {
      FillSynthetic(options_.seed, options_.worker, it, 0, out);
    }
  }

  // One all-reduce of the ring on `socket`; the last iteration lingers.
  absl::StatusOr<RingReport> Ring(int64_t it, std::span<int32_t> data, UdpSocket& socket,
                                  const std::function<void()>* on_finished,
                                  const std::function<void(const Datagram&)>* on_other) {
    RingMemberOptions o = ring_;
    o.socket = &socket;
    o.first_chunk = static_cast<uint32_t>(
        it * RingChunksPerAllReduce(static_cast<int64_t>(data.size()), o.members));
    // Between iterations the next all-reduce acknowledges the previous one's late copies, so only
    // the last one needs to linger long.
    o.linger_ms = it + 1 == options_.iterations ? options_.linger_ms : 0;
    if (on_finished != nullptr) o.on_finished = *on_finished;
    if (on_other != nullptr) o.on_other = *on_other;
    return RingAllReduce(o, data);
  }

  absl::Status Finish(int64_t it, std::span<const int32_t> sums, const IterationStats& s,
                      const RingReport& ring) {
    if (options_.check) {
      std::vector<int32_t> want(sums.size(), 0), part(sums.size());
      for (const std::string& w : RingJobWorkers(config_)) {
        FillSynthetic(options_.seed, w, it, 0, part);
        AddWrapping(part, want);
      }
      for (size_t i = 0; i < want.size(); ++i) {
        if (sums[i] != want[i]) {
          return absl::DataLossError(absl::StrCat("check failed: iteration ", it, ", lane ", i,
                                                  ": got ", sums[i], ", want ", want[i]));
        }
      }
      report_.checked = true;
    }
    if (options_.result != nullptr) options_.result->assign(sums.begin(), sums.end());
    report_.iterations.push_back(s);
    report_.rings.push_back(ring);
    if (options_.on_iteration) options_.on_iteration(s, ring);
    return absl::OkStatus();
  }

  // The agent: the rack's PS with the ring as its reduction.
  absl::Status RunAgent() {
    PsOptions ps;
    ps.ps = options_.worker;
    ps.lanes = lanes_;
    ps.iterations = options_.iterations;
    ps.linger_ms = options_.ps_linger_ms;
    ps.unicast_results = options_.unicast_results;
    ps.socket = options_.socket;
    ps.netns_fd = options_.netns_fd;
    ps.stop = options_.stop;
    std::vector<int32_t> mine(static_cast<size_t>(lanes_));
    ps.on_iteration = [&](const IterationStats& s) {
      if (!finish_status_.ok()) return;
      IterationStats with = s;
      finish_status_ = Finish(s.iteration, last_sums_, with, last_ring_);
    };
    ps.reduce = [&](int64_t it, std::span<int32_t> sums, UdpSocket& socket,
                    const std::function<void()>& send_results,
                    const std::function<void(const Datagram&)>& on_datagram) -> absl::Status {
      Gradient(it, mine);
      AddWrapping(mine, sums);
      auto ring = Ring(it, sums, socket, &send_results, &on_datagram);
      if (!ring.ok()) return ring.status();
      last_ring_ = *ring;
      last_sums_.assign(sums.begin(), sums.end());
      return absl::OkStatus();
    };
    auto report = RunPs(rack_, ps);
    if (!report.ok()) return report.status();
    report_.rack = *report;
    if (!finish_status_.ok()) return finish_status_;
    if (!report->complete) {
      const PsCounters& c = report->counters;
      return absl::CancelledError(absl::StrCat(
          "stopped after ", report->iterations_done, " of ", options_.iterations,
          " iterations; the rack's packets: ", c.received, " received, ", c.raw, " raw, ",
          c.aggregate, " aggregated, ", c.fallback, " fallback, ", c.duplicate, " duplicate, ",
          c.unknown_source, " from unknown sources, ", c.unknown_tag, " of other tags, ",
          c.contributions, " contributions counted"));
    }
    return absl::OkStatus();
  }

  const JobConfig& config_;
  const RinaOptions& options_;
  int64_t lanes_ = 0;
  RingMemberOptions ring_;
  JobConfig rack_;
  RinaReport report_;
  RingReport last_ring_;
  std::vector<int32_t> last_sums_;
  absl::Status finish_status_;
};

}  // namespace

std::vector<std::string> RingJobWorkers(const JobConfig& config) {
  std::vector<std::string> out;
  for (const JobConfig::RingRole& r : config.ring_roles) out.push_back(r.worker);
  return out;
}

absl::StatusOr<JobConfig> RackConfigFor(const JobConfig& config, const std::string& worker) {
  const JobConfig::RingRole* role = RoleOf(config, worker);
  if (role == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("worker \"", worker, "\" has no ring role in job ", config.job_id));
  }
  if (role->role != "agent" && role->role != "rack-worker") {
    return absl::FailedPreconditionError(
        absl::StrCat("worker \"", worker, "\" is a plain ring member: it has no rack"));
  }
  JobConfig out = config;
  out.tags.clear();
  for (const JobConfig::Tag& t : config.tags) {
    if (t.tag == role->rack_tag && t.ps == role->agent) out.tags.push_back(t);
  }
  if (out.tags.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", config.job_id, ": no tag ", role->rack_tag,
                                            " for the rack of ", role->agent, " behind ",
                                            role->tor));
  }
  return out;
}

absl::StatusOr<RinaReport> RunRingMember(const JobConfig& config, const RinaOptions& options) {
  if (config.ring.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", config.job_id, " is not a ring all-reduce job (no ring)"));
  }
  RingMember member(config, options);
  if (absl::Status s = member.Prepare(); !s.ok()) return s;
  if (absl::Status s = member.Run(); !s.ok()) return s;
  return member.report();
}

nlohmann::json RinaReportJson(const RinaReport& r) {
  nlohmann::json j = {{"role", r.role},       {"job_id", r.job_id},
                      {"worker", r.worker},   {"members", r.members},
                      {"workers", r.workers}, {"rack_workers", r.rack_workers}};
  AddSummaryJson(r.iterations, r.workers, &j);
  j["size_bytes"] = r.size_bytes;
  nlohmann::json rings = nlohmann::json::array();
  int64_t retransmissions = 0;
  for (const RingReport& g : r.rings) {
    rings.push_back({{"elapsed_ms", g.elapsed_ms},
                     {"algbw_gbps", g.algbw_gbps},
                     {"busbw_gbps", g.busbw_gbps},
                     {"data_packets", g.data_packets},
                     {"retransmissions", g.retransmissions},
                     {"duplicates", g.duplicates}});
    retransmissions += g.retransmissions;
  }
  j["ring"] = rings;
  j["ring_retransmissions"] = retransmissions;
  if (r.has_rack) j["rack"] = PsReportJson(r.rack);
  j["check"] = r.checked ? "ok" : "skipped";
  return j;
}

}  // namespace inac::agent
