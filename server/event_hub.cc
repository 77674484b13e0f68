#include "server/event_hub.h"

#include <chrono>

#include "absl/time/time.h"
#include "spdlog/spdlog.h"

namespace inac::server {

int64_t SystemClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

core::Event MakeEvent(int64_t now, std::string kind, std::optional<core::JobId> job,
                      std::string message, std::string data) {
  core::Event e;
  e.time_ms = now;
  e.kind = std::move(kind);
  e.job_id = job;
  e.message = std::move(message);
  e.data_json = std::move(data);
  return e;
}

void EventHub::Log(const std::string& kind, std::optional<core::JobId> job,
                   const std::string& message) {
  auto seq = events_->Append(MakeEvent(clock_(), kind, job, message));
  if (!seq.ok()) {
    spdlog::warn("event=event_log_failed kind={} error=\"{}\"", kind, seq.status().ToString());
  }
  Notify();
}

void EventHub::Notify() {
  absl::MutexLock lock(&mu_);
  ++generation_;
}

void EventHub::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  ++generation_;
}

void EventHub::Open() {
  absl::MutexLock lock(&mu_);
  closed_ = false;
}

int64_t EventHub::WaitForEvents(int64_t after_seq, int timeout_ms) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  while (true) {
    int64_t seen;
    {
      absl::MutexLock lock(&mu_);
      seen = generation_;
    }
    auto last = events_->LastSeq();
    int64_t seq = last.ok() ? *last : after_seq;
    if (seq > after_seq) return seq;
    absl::MutexLock lock(&mu_);
    if (closed_) return seq;
    // Another process may append to the same database: look again at least every 200 ms.
    const absl::Time until = std::min(deadline, absl::Now() + absl::Milliseconds(200));
    auto changed = [this, seen]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != seen; };
    mu_.AwaitWithDeadline(absl::Condition(&changed), until);
    if (generation_ == seen && absl::Now() >= deadline) return seq;
  }
}

}  // namespace inac::server
