// JobManager: the JobService (server/services.h) over the stores. Each command validates, commits
// one transaction carrying its event, notifies the event hub and wakes the control loop; queries
// read the stores (and the switch fleet's counters). It holds no state of its own: the parts it
// records into in memory -- the dashboard's history (submissions, progress), the workers'
// data-path reports (dropped when a command ends a job) and InGo's noise-scale refit -- are the
// Controller's, which hands this manager out as its JobService (Controller::services()).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>

#include "core/stores.h"
#include "server/batch_refit.h"
#include "server/data_path.h"
#include "server/event_hub.h"
#include "server/services.h"
#include "server/stats_history.h"
#include "server/switch_fleet.h"

namespace inac::server {

class JobManager : public JobService {
 public:
  // None owned; all must outlive the manager. `wake` asks the control loop for a pass.
  JobManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet, StatsHistory* stats,
             DataPathBook* data_paths, BatchRefit* batch_refit, Clock clock,
             std::function<void()> wake);

  absl::StatusOr<core::CreateJobResult> SubmitJob(
      const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) override;
  absl::StatusOr<core::Job> CancelJob(core::JobId id) override;
  absl::StatusOr<core::Job> ReportProgress(core::JobId id, int64_t iterations_done,
                                           std::optional<double> loss) override;
  absl::Status ReportGradientStats(core::JobId id, double grad_sqr_local,
                                   double grad_sqr_global) override;
  absl::StatusOr<core::Job> GetJob(core::JobId id) override;
  absl::StatusOr<core::JobPage> ListJobs(const core::JobFilter& filter) override;
  absl::StatusOr<JobConfig> GetJobConfig(core::JobId id) override;
  std::vector<InaCounterSample> JobCounters(core::JobId id) override;
  absl::StatusOr<JobDataPath> ReportDataPath(core::JobId id, const DataPathReport& report) override;
  std::optional<JobDataPath> DataPath(core::JobId id) override;

 private:
  // ReportProgress's validation and commit, before the in-memory records.
  absl::StatusOr<core::Job> CommitProgress(core::JobId id, int64_t iterations_done,
                                           std::optional<double> loss);

  core::Storage* storage_;
  EventHub* events_;
  SwitchFleet* fleet_;
  StatsHistory* stats_;
  DataPathBook* data_paths_;
  BatchRefit* batch_refit_;
  Clock clock_;
  std::function<void()> wake_;
};

}  // namespace inac::server
