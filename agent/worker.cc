// A fixed run of the worker (`inac worker`): its options, the run over every iteration and one
// iteration's loop. The rest of the Worker (agent/worker_state.h) lives in the files named there.
#include "agent/worker.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/gradient.h"
#include "agent/layout.h"
#include "agent/worker_state.h"
#include "core/topology.h"

namespace inac::agent {

Worker::Worker(const JobConfig& config, const WorkerOptions& options)
    : config_(std::make_shared<const JobConfig>(config)),
      options_(options),
      rto_us_(std::clamp<int64_t>(kInitialRtoMs, options.timeout_ms, options.max_timeout_ms) *
              1000) {}

absl::Status Worker::Prepare() {
  if (options_.worker.empty()) return absl::InvalidArgumentError("--worker: required");
  if (options_.iterations < 1) return absl::InvalidArgumentError("--iterations: must be >= 1");
  if (options_.timeout_ms < 1 || options_.max_timeout_ms < options_.timeout_ms) {
    return absl::InvalidArgumentError("--timeout-ms: must be >= 1 and at most the maximum timeout");
  }
  auto lanes = GradientLanes(options_.input, options_.lanes, options_.check);
  if (!lanes.ok()) return lanes.status();
  lanes_ = *lanes;
  auto layout = ComputeLayout(*config_, lanes_);
  if (!layout.ok()) return layout.status();
  layout_ = std::move(*layout);
  if (static_cast<double>(options_.iterations) * static_cast<double>(layout_.chunks) >=
      4294967296.0) {
    return absl::InvalidArgumentError(
        "--iterations x chunks: chunk numbers would not fit the header's 32 bits");
  }
  std::set<std::string> everyone;
  for (const JobConfig::Tag& t : config_->tags) {
    for (const auto& m : t.members) everyone.insert(m.worker);
  }
  BuildRuns();
  if (runs_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", options_.worker, " is not a member of any tag of job ", config_->job_id));
  }
  report_.worker = options_.worker;
  report_.job_id = config_->job_id;
  report_.plans.push_back(config_->plan_version);
  report_.workers = static_cast<int>(everyone.size());
  report_.tags = static_cast<int>(runs_.size());
  report_.size_bytes = lanes_ * 4;
  return absl::OkStatus();
}

absl::Status Worker::Run() {
  auto socket = UdpSocket::Open(options_.socket);
  if (!socket.ok()) return socket.status();
  socket_ = std::move(*socket);
  if (options_.input == nullptr) gradient_.assign(static_cast<size_t>(lanes_), 0);
  source_ = options_.input != nullptr ? options_.input->data() : gradient_.data();
  result_.assign(static_cast<size_t>(lanes_), 0);
  result_data_ = result_.data();
  absl::Status status;
  for (int64_t it = 0; it < options_.iterations && status.ok(); ++it) {
    status = RunIteration(it);
  }
  report_.packets_sent = static_cast<int64_t>(socket_->sent());
  report_.send_errors = static_cast<int64_t>(socket_->send_errors());
  report_.dropped_by_hook = static_cast<int64_t>(socket_->dropped());
  if (options_.result != nullptr) *options_.result = result_;
  return status;
}

absl::Status Worker::RunIteration(int64_t it) {
  StartIteration(it);
  const int64_t retrans_before = report_.retransmissions;
  const int64_t start = NowUs();
  int64_t last_progress = start;
  while (remaining_ > 0) {
    if (options_.stop != nullptr && options_.stop->load()) {
      return absl::CancelledError("stopped");
    }
    now_us_ = NowUs();
    if (options_.updates != nullptr) {
      if (auto next = options_.updates->TakeIfNewer(&seen_update_); next != nullptr) {
        if (absl::Status s = Adopt(std::move(next), it); !s.ok()) return s;
      }
    }
    const int64_t paced_until = SendNewChunks(it);
    int64_t now = NowUs();
    int64_t wait = 100000;
    if (!timers_.empty()) wait = std::clamp<int64_t>(timers_.top().at_us - now, 0, wait);
    if (paced_until > 0) wait = std::clamp<int64_t>(paced_until - now, 0, wait);
    ReceiveResults(it, wait, &last_progress);
    now = now_us_ = NowUs();
    FireTimers(it, now);
    if (now - last_progress > options_.give_up_ms * 1000) return GiveUpError(it);
  }
  return FinishIteration(it, start, retrans_before);
}

void Worker::StartIteration(int64_t it) {
  // A given gradient is read where it is (no copy per iteration); the synthetic one is made.
  if (!session_ && options_.input == nullptr) {
    FillSynthetic(options_.seed, options_.worker, it, 0, gradient_);
  }
  // Lanes of tags this worker is no member of stay 0; when it is a member of every lane, each
  // lane is written by its result and nothing needs clearing.
  int64_t covered = 0;
  for (const TagRun& r : runs_) covered += r.span.lanes;
  if (covered < lanes_) std::fill(result_data_, result_data_ + lanes_, 0);
  ChunkState fresh;
  fresh.timeout_us = options_.timeout_ms * 1000;
  chunks_.assign(static_cast<size_t>(layout_.chunks), fresh);
  remaining_ = 0;
  for (TagRun& r : runs_) {
    r.base = 0;
    r.next = 0;
    r.results_seen = false;
    r.dup_base = -1;  // chunk numbers start again
    r.dups = 0;
    remaining_ += r.span.chunks;
  }
  timers_.clear();
}

void Worker::ReceiveResults(int64_t it, int64_t wait_us, int64_t* last_progress) {
  if (!socket_->Wait(wait_us)) return;
  DatagramView d;
  now_us_ = NowUs();
  for (int n = 1; socket_->Next(&d); ++n) {
    if (n % 16 == 0) now_us_ = NowUs();
    if (OnDatagram(d.payload, it)) *last_progress = now_us_;
  }
}

absl::Status Worker::GiveUpError(int64_t it) {
  std::string where;
  for (TagRun& r : runs_) {
    int64_t missing = 0;
    for (int64_t k = 0; k < r.span.chunks; ++k) missing += State(r, k).done ? 0 : 1;
    if (missing > 0) {
      where = absl::StrCat("tag ", r.span.tag, " waits for chunk ", Wire(r.span, it, r.base), " (",
                           missing, " of ", r.span.chunks, " missing) from PS ", r.tag->ps, " at ",
                           core::FormatIpv4(r.tag->ps_address));
      break;
    }
  }
  return absl::DeadlineExceededError(absl::StrCat(session_ ? "all-reduce " : "iteration ", it,
                                                  ": no result for ", options_.give_up_ms, " ms; ",
                                                  where));
}

absl::Status Worker::FinishIteration(int64_t it, int64_t start_us, int64_t retransmissions_before) {
  IterationStats s;
  s.iteration = it;
  s.size_bytes = report_.size_bytes;
  s.time_ms = static_cast<double>(NowUs() - start_us) / 1000.0;
  s.retransmissions = report_.retransmissions - retransmissions_before;
  if (options_.check) {
    if (absl::Status c = Check(it); !c.ok()) return c;
    report_.checked = true;
  }
  report_.iterations.push_back(s);
  if (options_.on_iteration) options_.on_iteration(s);
  return absl::OkStatus();
}

absl::StatusOr<WorkerReport> RunWorker(const JobConfig& config, const WorkerOptions& options) {
  Worker worker(config, options);
  if (absl::Status s = worker.Prepare(); !s.ok()) return s;
  int64_t cpu_us = 0;
  absl::Status s = RunDataPlane(
      options.netns_fd, [&] { return worker.Run(); }, &cpu_us);
  if (!s.ok()) return s;
  WorkerReport report = worker.report();
  report.cpu_us = cpu_us;
  return report;
}

nlohmann::json WorkerReportJson(const WorkerReport& r) {
  nlohmann::json j = {{"role", "worker"},
                      {"job_id", r.job_id},
                      {"worker", r.worker},
                      {"workers", r.workers},
                      {"tags", r.tags}};
  AddSummaryJson(r.iterations, r.workers, &j);
  j["size_bytes"] = r.size_bytes;
  j["packets"] = {{"sent", r.packets_sent},
                  {"retransmitted", r.retransmissions},
                  {"results", r.results},
                  {"duplicate_results", r.duplicate_results},
                  {"ignored", r.ignored},
                  {"send_errors", r.send_errors},
                  {"dropped_by_test_hook", r.dropped_by_hook},
                  {"resent_on_new_tag", r.resent_on_new_tag},
                  {"acknowledgements", r.acknowledgements},
                  {"window_cuts", r.window_cuts},
                  {"fast_retransmissions", r.fast_retransmissions},
                  {"timeouts_deferred", r.timeouts_deferred}};
  j["plans"] = r.plans;
  j["check"] = r.checked ? "ok" : "skipped";
  j["cpu_ms"] = static_cast<double>(r.cpu_us) / 1000.0;
  return j;
}

}  // namespace inac::agent
