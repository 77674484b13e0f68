// JobManager: the JobService (server/services.h) over the stores. Each command validates, commits
// one transaction carrying its event, notifies the event hub and wakes the control loop; queries
// read the stores (and the switch fleet's counters). It holds no state of its own.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <functional>

#include "core/stores.h"
#include "server/event_hub.h"
#include "server/services.h"
#include "server/switch_fleet.h"

namespace inac::server {

class JobManager : public JobService {
 public:
  // None owned; all must outlive the manager. `wake` asks the control loop for a pass.
  JobManager(core::Storage* storage, EventHub* events, SwitchFleet* fleet, Clock clock,
             std::function<void()> wake);

  absl::StatusOr<core::CreateJobResult> SubmitJob(
      const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) override;
  absl::StatusOr<core::Job> CancelJob(core::JobId id) override;
  absl::StatusOr<core::Job> ReportProgress(core::JobId id, int64_t iterations_done,
                                           std::optional<double> loss) override;
  absl::StatusOr<core::Job> GetJob(core::JobId id) override;
  absl::StatusOr<core::JobPage> ListJobs(const core::JobFilter& filter) override;
  absl::StatusOr<JobConfig> GetJobConfig(core::JobId id) override;
  std::vector<InaCounterSample> JobCounters(core::JobId id) override;

 private:
  core::Storage* storage_;
  EventHub* events_;
  SwitchFleet* fleet_;
  Clock clock_;
  std::function<void()> wake_;
};

}  // namespace inac::server
