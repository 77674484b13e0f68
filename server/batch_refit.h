// The controller's side of InGo (docs/batch-size.md "Online refit"): a smoothed
// gradient noise scale per job from the statistics workers put in their progress reports, the
// noise scale the planner is given (published only when it moved by more than a threshold, so
// that a stream of reports does not re-plan at every one), and when each job's batch size last
// changed (for the planner's hysteresis, scheduler::PlanRequest::batch_changed_ms).
//
// Persistence: every published estimate is an event (kind "noise_scale_refit", data
// {"noise_scale": x}) and every batch change a "job_batch_size" event; at start the controller
// replays both from the event log (Restore), so a restart keeps the published noise scale and the
// hysteresis clock. The estimator's smoothed moments are not kept: after a restart it starts again
// and re-publishes only when it moves past the threshold from the restored value. Events the log
// no longer holds (trimmed to the newest keep_events, or deleted with a finished job) are not
// restored. Thread safety: every method
// takes the internal mutex; REST threads call Add, the control loop the others.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/stores.h"
#include "scheduler/batch/noise_scale.h"

namespace inac::server {

class BatchRefit {
 public:
  // publish_threshold: relative change of the estimate that publishes it (0.1: 10 %).
  explicit BatchRefit(double publish_threshold = 0.1, double smoothing = 0.9)
      : publish_threshold_(publish_threshold), smoothing_(smoothing) {}

  // One report of `job` running at per-worker batch `batch`: |g_i|^2 of a worker's local
  // gradient and |g_bar|^2 of the aggregated one. True when the published noise scale changed
  // (the caller wakes the loop). InvalidArgument (with the field) for a statistic that is not
  // finite or negative, FailedPrecondition for a job of one worker (no local/global difference).
  absl::StatusOr<bool> Add(const core::Job& job, int batch, double grad_sqr_local,
                           double grad_sqr_global);

  // Sets spec.noise_scale of every job with a published estimate and more than one batch choice.
  void Apply(std::vector<core::Job>* jobs) const;
  std::optional<double> Published(core::JobId id) const;

  // The jobs of `plan` whose batch size differs from `previous` (absent in `previous`: not a
  // change), with a message each; remembers `now_ms` as their change time.
  std::vector<std::pair<core::JobId, std::string>> NoteBatchChanges(const core::Plan* previous,
                                                                    const core::Plan& plan,
                                                                    int64_t now_ms);
  std::map<core::JobId, int64_t> ChangedMs() const;

  // Replays the event log (oldest first): "noise_scale_refit" events set the published estimate,
  // "job_batch_size" events the change time. Other kinds and malformed data are skipped.
  void Restore(const std::vector<core::Event>& events);

 private:
  const double publish_threshold_;
  const double smoothing_;
  mutable absl::Mutex mu_;
  std::map<core::JobId, scheduler::NoiseScaleEstimator> estimators_ ABSL_GUARDED_BY(mu_);
  std::map<core::JobId, double> published_ ABSL_GUARDED_BY(mu_);
  std::map<core::JobId, int64_t> changed_ms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inac::server
