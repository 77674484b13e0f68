// The controller's recent history for the dashboard (docs/dashboard.md): a bounded
// in-memory ring of time buckets (by default 10 s each over the last hour, 360 buckets) holding,
// per bucket, the aggregator utilisation of every INA switch, each planned job's predicted rate,
// LP bound, predicted and reported iteration time and progress, and how many jobs were submitted
// and plans saved (re-plans) in it. Served as column-oriented JSON (one `times_ms` array and one
// array of values per series, null where a series has no value in a bucket) under
// /api/v1/stats/..., the shape uPlot draws directly.
//
// Buckets: an observation at time t falls in the bucket starting at t - t mod resolution_ms. The
// controller observes its state at the end of every loop pass (Observe): within one bucket the
// last observation wins, so the newest bucket always holds the current state. Counters
// (CountSubmission, CountReplan) add into the bucket of their time. A bucket is evicted once it
// starts more than window_ms before the newest one, and the ring never holds more than
// window_ms / resolution_ms + 1 buckets. An observation older than the newest bucket is
// recorded into the newest one (a clock that stepped back never reorders the ring).
//
// Memory: per bucket one double per INA switch and a few per planned job, so k=16 (128 INA edge
// switches) with 100 jobs over an hour is about 360 * (128 + 600) values. Nothing is stored: a
// restarted controller starts with an empty history.
//
// Reported iteration time: from the job's progress reports (ObserveProgress), the time between
// two reports over the iterations they advanced, smoothed (exponentially weighted, weight 1/2 for
// the newest interval); unknown until a job has reported progress twice.
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/job.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/topology.h"

namespace inac::server {

struct StatsHistoryOptions {
  int64_t resolution_ms = 10000;  // bucket width, > 0
  int64_t window_ms = 3600000;    // how far back buckets are kept, >= resolution_ms
};

// One job's values in one bucket.
struct JobStatsSample {
  double rate_gbps = 0;  // the plan's predicted per-worker rate
  std::optional<double> lp_bound_gbps;
  double predicted_iteration_ms = 0;
  std::optional<double> reported_iteration_ms;
  int64_t iterations_done = 0;
  int64_t iterations = 0;
};

struct StatsBucket {
  int64_t start_ms = 0;
  // Allocated aggregators over the switch's aggregators (0..1), INA switches only.
  std::map<std::string, double> switch_utilisation;
  std::map<core::JobId, JobStatsSample> jobs;  // the jobs of the plan in force
  int64_t submissions = 0;
  int64_t replans = 0;
};

class StatsHistory {
 public:
  // Options with resolution_ms <= 0 or window_ms < resolution_ms are clamped (1 ms; one bucket).
  explicit StatsHistory(StatsHistoryOptions options = {});

  // Records the state at `now_ms`: utilisation of every INA switch of `topology` from the grants
  // of `plan` (0 without a plan), and for every job of `plan` its rate, bound and predicted
  // iteration time with the progress of that job in `jobs` (jobs absent from `jobs` keep 0).
  void Observe(int64_t now_ms, const core::Topology& topology, const core::Plan* plan,
               const std::vector<core::Job>& jobs);
  // A job submitted (created, not an idempotent replay) at `now_ms`.
  void CountSubmission(int64_t now_ms);
  // A plan saved (an admission, a full plan or a refinement) at `now_ms`.
  void CountReplan(int64_t now_ms);
  // A progress report of `job` at `now_ms`: updates its reported iteration time.
  void ObserveProgress(core::JobId job, int64_t now_ms, int64_t iterations_done);

  // The buckets starting at or after `since_ms`, oldest first (a copy).
  std::vector<StatsBucket> Buckets(int64_t since_ms = 0) const;
  // The smoothed reported iteration time of `job`, if known.
  std::optional<double> ReportedIterationMs(core::JobId job) const;
  const StatsHistoryOptions& options() const { return options_; }

  // GET /stats/switches: {"resolution_ms", "window_ms", "times_ms": [...], "switches": [{"id",
  // "aggregator_utilisation": [...]}]}, switches by id.
  core::Json SwitchesJson(int64_t since_ms) const;
  // GET /stats/jobs: {"resolution_ms", "window_ms", "times_ms", "jobs": [{"job_id", "rate_gbps",
  // "lp_bound_gbps", "predicted_iteration_ms", "reported_iteration_ms", "iterations_done",
  // "iterations"} of arrays]}, jobs by id; only `job` when set.
  core::Json JobsJson(int64_t since_ms, std::optional<core::JobId> job) const;
  // GET /stats/controller: {"resolution_ms", "window_ms", "times_ms", "submissions": [...],
  // "replans": [...]} (counts per bucket).
  core::Json ControllerJson(int64_t since_ms) const;

 private:
  // The bucket for `now_ms` (created, evicting old ones, when newer than the newest).
  StatsBucket& BucketAt(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  core::Json Header(const std::vector<StatsBucket>& buckets) const;

  StatsHistoryOptions options_;
  size_t max_buckets_;
  mutable absl::Mutex mu_;
  std::deque<StatsBucket> buckets_ ABSL_GUARDED_BY(mu_);
  struct Progress {
    int64_t time_ms = 0;
    int64_t iterations_done = 0;
    std::optional<double> iteration_ms;
  };
  std::map<core::JobId, Progress> progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inac::server
