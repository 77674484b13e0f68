// A job configuration that changes while the agents run: the controller re-plans (a link down,
// a switch gone, other jobs) and GET /jobs/{id}/config answers the new plan. Whoever watches the
// controller (`inac worker` / `inac ps` poll it on their main thread) publishes each new
// configuration; the data-plane loop of RunWorker / RunPs takes the latest between packets and
// continues under it (agent/worker.h, agent/ps.h).
//
// Contract: thread-safe. Publish replaces the latest configuration; TakeIfNewer returns it once
// per publication (nullptr when nothing was published since the caller's `*seen`).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/job_config.h"

namespace inac::agent {

class ConfigFeed {
 public:
  void Publish(JobConfig config) {
    auto next = std::make_shared<const JobConfig>(std::move(config));
    absl::MutexLock lock(&mu_);
    latest_ = std::move(next);
    serial_.store(serial_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // The latest configuration if it was published after `*seen` (then *seen is updated). Cheap
  // when there is nothing new (one atomic load): the agents call it before every packet.
  std::shared_ptr<const JobConfig> TakeIfNewer(uint64_t* seen) const {
    if (serial_.load(std::memory_order_acquire) == *seen) return nullptr;
    absl::MutexLock lock(&mu_);
    *seen = serial_.load(std::memory_order_relaxed);
    return latest_;
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const JobConfig> latest_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> serial_{0};  // written under mu_
};

// Polls a job's configuration on a thread of its own: every `period`, fetch() (the caller's
// GET /jobs/{id}/config), and each configuration with tags and another plan version than the
// last one seen (first: `plan_version`) is published to `feed`. A failed fetch is retried at the
// next period; on_error (optional) hears the first failure of each series. The destructor stops
// the thread and waits for it (at most one fetch).
class ConfigPoller {
 public:
  ConfigPoller(std::function<absl::StatusOr<JobConfig>()> fetch, int64_t plan_version,
               absl::Duration period, ConfigFeed* feed,
               std::function<void(const absl::Status&)> on_error = nullptr);
  ~ConfigPoller();
  ConfigPoller(const ConfigPoller&) = delete;
  ConfigPoller& operator=(const ConfigPoller&) = delete;

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace inac::agent
