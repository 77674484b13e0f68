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
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

}  // namespace inac::agent
