// The controller's services: what the REST layer (and any other northbound adapter) may ask of the
// controller, in the style of ONOS's Service interfaces. The HTTP layer depends on these
// interfaces only, so it can be tested against a fake; server::Controller hands them out
// (Controller::services(): its job and topology managers, itself for the others).
//
// Errors are canonical absl::Status codes: InvalidArgument (bad input; the JSON path of the first
// problem is the status's `field` payload, core/status.h), NotFound, FailedPrecondition (illegal
// state transition, no topology yet), AlreadyExists (idempotency conflict), Unavailable (storage
// busy or a transient conflict: retry).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/stores.h"
#include "core/topology.h"
#include "server/data_path.h"
#include "server/job_config.h"
#include "server/metrics.h"
#include "server/stats_history.h"

namespace inac::server {

// Jobs: the commands a launcher sends and what it reads back.
class JobService {
 public:
  virtual ~JobService() = default;
  // Validates `spec` against the current topology and stores the job (pending). Durable when it
  // returns; an idempotency key already used with the same body returns the first job (created
  // false), with another body AlreadyExists.
  virtual absl::StatusOr<core::CreateJobResult> SubmitJob(
      const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency) = 0;
  // pending/scheduled/running -> cancelled; FailedPrecondition when already terminal.
  virtual absl::StatusOr<core::Job> CancelJob(core::JobId id) = 0;
  // Records progress; iterations_done == spec.iterations completes the job. FailedPrecondition
  // unless the job is scheduled or running; InvalidArgument if iterations go backwards or beyond
  // the job's iterations.
  virtual absl::StatusOr<core::Job> ReportProgress(core::JobId id, int64_t iterations_done,
                                                   std::optional<double> loss) = 0;
  // The gradient statistics of a progress report (InGo's noise-scale refit, docs/batch-size.md):
  // |g_i|^2 of a worker's local gradient and |g_bar|^2 of the aggregated one. InvalidArgument for
  // a statistic that is not finite or negative; FailedPrecondition for a one-worker job. The
  // default (services without a refit) is Unimplemented.
  virtual absl::Status ReportGradientStats(core::JobId id, double grad_sqr_local,
                                           double grad_sqr_global) {
    (void)id;
    (void)grad_sqr_local;
    (void)grad_sqr_global;
    return absl::UnimplementedError("gradient statistics are not used by this service");
  }
  virtual absl::StatusOr<core::Job> GetJob(core::JobId id) = 0;
  virtual absl::StatusOr<core::JobPage> ListJobs(const core::JobFilter& filter) = 0;
  // What the job's hosts need (server/job_config.h), from the latest plan.
  virtual absl::StatusOr<JobConfig> GetJobConfig(core::JobId id) = 0;
  // The INA counters last read for `id`'s tags on the switches that hold them (by switch, then
  // tag); empty until a read succeeded.
  virtual std::vector<InaCounterSample> JobCounters(core::JobId id) = 0;
  // Stores `report` as its worker's latest data-path report for `id` (in memory only,
  // server/data_path.h) and returns the job's data path. NotFound; FailedPrecondition unless the
  // job is scheduled or running (as ReportProgress); InvalidArgument (field "worker") for a worker
  // that is not one of the job's. The default (services without data-path telemetry) is
  // Unimplemented.
  virtual absl::StatusOr<JobDataPath> ReportDataPath(core::JobId id, const DataPathReport& report) {
    (void)id;
    (void)report;
    return absl::UnimplementedError("data-path reports are not kept by this service");
  }
  // The job's data path from its workers' latest reports; nullopt before any report and once
  // the job ended.
  virtual std::optional<JobDataPath> DataPath(core::JobId id) {
    (void)id;
    return std::nullopt;
  }
};

// A link's state after PATCH /links/{id}, and the topology version that holds it.
struct LinkChange {
  core::Link link;
  int64_t topology_version = 0;
};

// The fabric: the topology, its links and its switches.
class TopologyService {
 public:
  virtual ~TopologyService() = default;
  // Replaces the topology (InvalidArgument with every problem) and returns its version. Jobs
  // whose hosts left the topology fail at the next pass. With `if_match` (HTTP If-Match, the
  // version GET /topology returned): Aborted, nothing written, unless the stored topology is at
  // exactly that version (optimistic concurrency between operators).
  virtual absl::StatusOr<int64_t> PutTopology(const core::Topology& topology,
                                              std::optional<int64_t> if_match) = 0;
  // Sets one link up or down (NotFound for an unknown link id or no topology) and returns the
  // link and the topology's version after the change (unchanged when the link already had that
  // status). `if_match` as for PutTopology; without it a concurrent change is retried.
  virtual absl::StatusOr<LinkChange> SetLinkStatus(const std::string& link_id,
                                                   core::LinkStatus status,
                                                   std::optional<int64_t> if_match) = 0;
  virtual absl::StatusOr<std::optional<core::TopologyRecord>> GetTopology() = 0;
  // Every switch of the topology with its session and sync state.
  virtual std::vector<SwitchStatus> Switches() = 0;
  virtual absl::StatusOr<SwitchStatus> GetSwitch(const std::string& id) = 0;
};

// Plans: the current one, and what-if previews.
class PlanService {
 public:
  virtual ~PlanService() = default;
  virtual absl::StatusOr<std::optional<core::PlanRecord>> CurrentPlan() = 0;
  // Plans the active jobs plus `spec` (reported as job id 0) without admitting it. Validation
  // errors as SubmitJob; FailedPrecondition without a topology.
  virtual absl::StatusOr<core::Plan> PreviewPlan(const core::JobSpec& spec) = 0;
};

// The event log.
class EventService {
 public:
  virtual ~EventService() = default;
  virtual absl::StatusOr<std::vector<core::Event>> Events(const core::EventFilter& filter) = 0;
  // Blocks until an event with seq > after_seq exists, `timeout_ms` passes or the controller
  // stops; returns the newest sequence number.
  virtual int64_t WaitForEvents(int64_t after_seq, int timeout_ms) = 0;
};

// Health and metrics.
class HealthService {
 public:
  virtual ~HealthService() = default;
  // Liveness: the control loop ran a pass within a few timer periods.
  virtual bool LoopAlive() = 0;
  // Readiness: storage readable, loop alive, every managed switch connected (Unavailable with
  // the reason otherwise).
  virtual absl::Status Ready() = 0;
  // The Prometheus exposition text (server/metrics.h).
  virtual std::string MetricsText() = 0;
  // Where the HTTP layer records its request latencies (not owned; may be null).
  virtual Metrics* metrics() = 0;
};

// The audit log of API writes (docs/controller.md "Audit log and retention").
class AuditService {
 public:
  virtual ~AuditService() = default;
  // Appends `entry` (time_ms set from the controller's clock when 0) in a transaction of its own,
  // after the write it describes committed and was answered: a failure (logged and counted by the
  // caller) never changes that answer. Errors as core::AuditLog::Append.
  virtual absl::Status RecordAudit(core::AuditEntry entry) = 0;
  // Entries by increasing seq (core::AuditLog::List).
  virtual absl::StatusOr<core::AuditPage> ListAudit(const core::AuditFilter& filter) = 0;
};

// The services one northbound adapter is given (none owned; all must outlive the adapter).
struct ApiServices {
  JobService* jobs = nullptr;
  TopologyService* topology = nullptr;
  PlanService* plans = nullptr;
  EventService* events = nullptr;
  HealthService* health = nullptr;
  AuditService* audit = nullptr;  // null: writes are not audited and GET /audit is not served
  // The dashboard's history (GET /stats/...); null: those routes are not served.
  StatsHistory* stats = nullptr;
};

}  // namespace inac::server
