// The persistent worker of a client session (agent/worker.h WorkerSession, agent/inac_client.h):
// one socket for the session's life and all-reduces of any size, numbered on from one to the next
// (docs/agents.md, "Sessions"). The Worker it drives is agent/worker_state.h's.
#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/layout.h"
#include "agent/worker_state.h"

namespace inac::agent {

absl::Status Worker::OpenSession() {
  if (options_.worker.empty()) return absl::InvalidArgumentError("worker: required");
  if (options_.timeout_ms < 1 || options_.max_timeout_ms < options_.timeout_ms ||
      options_.give_up_ms < 1) {
    return absl::InvalidArgumentError("timeouts: must be >= 1 ms, the first at most the maximum");
  }
  bool member = false;
  std::set<std::string> everyone;
  for (const JobConfig::Tag& t : config_->tags) {
    member |= t.MemberIndex(options_.worker) >= 0;
    for (const auto& m : t.members) everyone.insert(m.worker);
  }
  if (!member) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", options_.worker, " is not a member of any tag of job ", config_->job_id));
  }
  session_ = true;
  report_.worker = options_.worker;
  report_.job_id = config_->job_id;
  report_.plans.push_back(config_->plan_version);
  report_.workers = static_cast<int>(everyone.size());
  auto socket = UdpSocket::Open(options_.socket);
  if (!socket.ok()) return socket.status();
  socket_ = std::move(*socket);
  return absl::OkStatus();
}

absl::Status Worker::AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats) {
  if (lanes < 1) return absl::InvalidArgumentError("all-reduce: needs at least one value");
  if (lanes != lanes_ || runs_.empty()) {
    auto layout = ComputeLayout(*config_, lanes);
    if (!layout.ok()) return layout.status();
    lanes_ = lanes;
    layout_ = std::move(*layout);
    SaveCongestion();
    BuildRuns();
    report_.tags = static_cast<int>(runs_.size());
  }
  if (static_cast<double>(wire_base_) + static_cast<double>(layout_.chunks) > 4294967296.0) {
    return absl::ResourceExhaustedError(
        "the session's chunk numbers (32 bits on the wire) are used up: open a new session");
  }
  int64_t covered = 0;
  for (const TagRun& r : runs_) covered += r.span.lanes;
  absl::Status status;
  if (covered < lanes_) {
    status = absl::FailedPreconditionError(
        absl::StrCat("worker ", options_.worker, " is a member of tags that carry ", covered,
                     " of the ", lanes_, " values: it cannot all-reduce all of them"));
  } else {
    source_ = buf;
    result_data_ = buf;
    report_.size_bytes = lanes_ * 4;
    const size_t before = report_.iterations.size();
    status = RunIteration(allreduces_);
    if (status.ok() && stats != nullptr && report_.iterations.size() > before) {
      *stats = report_.iterations.back();
    }
  }
  wire_base_ += layout_.chunks;
  ++allreduces_;
  report_.packets_sent = static_cast<int64_t>(socket_->sent());
  report_.send_errors = static_cast<int64_t>(socket_->send_errors());
  report_.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
  return status;
}

void Worker::Skip(int64_t lanes) {
  wire_base_ += (std::max<int64_t>(lanes, 0) + kLanes - 1) / kLanes;  // ComputeLayout's chunks
  ++allreduces_;
}

bool Worker::InNetwork() const {
  for (const TagRun& r : runs_) {
    if (r.slot_mode == TagRun::SlotMode::kWindow) return true;
  }
  return false;
}

namespace {

class Session : public WorkerSession {
 public:
  Session(const JobConfig& config, const WorkerOptions& options)
      : options_(options), worker_(config, options_) {}
  absl::Status Open() { return worker_.OpenSession(); }
  absl::Status AllReduce(int32_t* buf, int64_t lanes, IterationStats* stats) override {
    return worker_.AllReduce(buf, lanes, stats);
  }
  void Skip(int64_t lanes) override { worker_.Skip(lanes); }
  const WorkerReport& report() const override { return worker_.report(); }
  int64_t next_chunk() const override { return worker_.next_chunk(); }
  int64_t plan_version() const override { return worker_.plan_version(); }
  bool InNetwork() const override { return worker_.InNetwork(); }
  const UdpSocket& socket() const override { return worker_.socket(); }

 private:
  const WorkerOptions options_;  // before worker_, which keeps a reference
  Worker worker_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerSession>> OpenWorkerSession(const JobConfig& config,
                                                                 const WorkerOptions& options) {
  auto session = std::make_unique<Session>(config, options);
  if (absl::Status s = session->Open(); !s.ok()) return s;
  return session;
}

}  // namespace inac::agent
