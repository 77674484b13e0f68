#include "agent/config_feed.h"

#include <utility>

namespace inac::agent {

ConfigPoller::ConfigPoller(std::function<absl::StatusOr<JobConfig>()> fetch, int64_t plan_version,
                           absl::Duration period, ConfigFeed* feed,
                           std::function<void(const absl::Status&)> on_error) {
  thread_ = std::thread(
      [this, fetch = std::move(fetch), plan_version, period, feed, on_error = std::move(on_error)] {
        int64_t last = plan_version;
        bool failing = false;
        absl::MutexLock lock(&mu_);
        while (!mu_.AwaitWithTimeout(absl::Condition(&done_), period)) {
          mu_.Unlock();
          absl::StatusOr<JobConfig> config = fetch();
          if (!config.ok()) {
            if (!failing && on_error) on_error(config.status());
            failing = true;
          } else {
            failing = false;
            if (config->plan_version != last && !config->tags.empty()) {
              last = config->plan_version;
              feed->Publish(*std::move(config));
            }
          }
          mu_.Lock();
        }
      });
}

ConfigPoller::~ConfigPoller() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  thread_.join();
}

}  // namespace inac::agent
