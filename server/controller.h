// The controller: INAC's main job (docs/architecture.md "Data flow"). It owns the loop that turns
// the stored desired state (topology + jobs) into a plan (scheduler), saves plan and per-switch
// intents in one transaction (storage), and brings every switch to its intent (southbound),
// advancing job states as switches apply. It hands out the services of server/services.h
// (services()), over which the REST layer (northbound/http_api.h) is a thin adapter: the job and
// topology managers it owns are the JobService and TopologyService, and it answers the plan,
// event, health and audit services itself.
//
// Commands (SubmitJob, CancelJob, ReportProgress, PutTopology, SetLinkStatus) are durable when they
// return OK (the storage transaction committed), then wake the loop. Queries read storage or the
// loop's in-memory view. Errors are canonical absl::Status codes: InvalidArgument (bad input, with
// the JSON path in the message), NotFound, FailedPrecondition (illegal state transition, no
// topology yet), AlreadyExists (idempotency conflict), Unavailable (storage busy).
//
// The loop (one thread): waits for a wake-up (job submitted / cancelled / progress, topology or
// link change, switch up / down, timer), debounces, reads a consistent snapshot, re-plans only when
// the inputs' fingerprint changed (topology version, active jobs, their specs and priorities, the
// algorithm), saves plan + intents, reconciles the switches in parallel, records per-switch state
// and moves jobs scheduled -> running once every switch holding one of their entries applied the
// plan's version. After a successful reconciliation of a switch, the INA counters of its
// aggregations are read (at most once per `counters_period_ms` per switch) and kept in memory
// for GET /jobs/{id} and /metrics; so are the workers' data-path reports (POST
// /jobs/{id}/data-path, server/data_path.h), never persisted. Restart runs the same loop: the
// stored plan is kept when its fingerprint matches, switches are reconnected with a higher
// election id, their pipeline checked and repaired.
//
// Incremental planning (ControllerOptions::incremental, the default): on a fingerprint change the
// loop saves and reconciles an admission plan (scheduler::AdmitJobs, milliseconds: new jobs routed
// around the running ones, removed jobs dropped, nobody moved), stored with the fingerprint
// "admitted:<fingerprint>", and hands a snapshot to the refiner thread, which runs the full
// scheduler::ComputePlan (CLP limited to replan_budget_ms, running jobs moved only past
// replan_move_threshold). The loop adopts the result -- saved with the plain fingerprint -- when
// it finishes and the inputs are still those it was computed for; a newer change supersedes it
// (the stale result is dropped). The loop never waits for the refiner. A restart that finds an
// admission plan refines it then. Sync also waits for an outstanding refinement.
//
// Composition (docs/server.md): the Controller owns the event hub, the metrics, the switch fleet
// (server/switch_fleet.h), the job and topology managers (the JobService and TopologyService) and
// runs the loop; planning itself is scheduler::ComputePlan (scheduler/planner.h). It also serves
// the audit log (AuditService, over core::AuditLog) and owns the RetentionWorker
// (server/retention_worker.h), whose thread prunes finished jobs and audit entries at Start and
// then every `retention.period_ms`, outside the loop.
//
// Files: controller.cc (lifecycle, the loop and its pass, job state changes), controller_plan.cc
// (re-planning: fingerprint, job triage, admission or full plan, save), controller_refiner.cc
// (the background full re-plan and its adoption), controller_services.cc (the plan, event,
// health and audit services, metrics).
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/stores.h"
#include "core/topology.h"
#include "scheduler/incremental.h"
#include "scheduler/planner.h"
#include "server/batch_refit.h"
#include "server/data_path.h"
#include "server/event_hub.h"
#include "server/job_config.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "server/retention_worker.h"
#include "server/services.h"
#include "server/stats_history.h"
#include "server/switch_fleet.h"
#include "server/topology_manager.h"

namespace inac::server {

struct ControllerOptions {
  // The planner's options; defaults those of scheduler::PlannerOptions (also `inac plan`'s).
  std::string algorithm = scheduler::PlannerOptions{}.algorithm;
  std::string memory_policy = scheduler::PlannerOptions{}.memory_policy;
  uint64_t seed = scheduler::PlannerOptions{}.seed;
  int rounds = scheduler::PlannerOptions{}.rounds;
  int paths = scheduler::PlannerOptions{}.paths;
  // Spread candidates above this estimated LP size (scheduler::PlannerOptions).
  int64_t spread_min_columns = scheduler::PlannerOptions{}.spread_min_columns;
  // grid-split's chunk ranges per job and PS at most (scheduler::PlannerOptions).
  int split_max_ranges = scheduler::PlannerOptions{}.split_max_ranges;
  // Incremental planning (docs/controller.md "Incremental planning"): on a change of the inputs
  // the loop applies an admission plan at once (scheduler::AdmitJobs: new jobs routed around the
  // others, nobody moved) and a background thread computes the full re-plan, adopted when it
  // finishes and its inputs are still current. false: the loop computes the full plan itself.
  bool incremental = true;
  // CLP time limit of the background re-plan (PlannerOptions::lp_time_limit_s), ms.
  int replan_budget_ms = 10000;
  // A running job's routes move in a re-plan only when that raises its rate, or the minimum
  // rate, by more than this fraction (PlannerOptions::replan_move_threshold); < 0: always move.
  double replan_move_threshold = scheduler::PlannerOptions{}.replan_move_threshold;
  // InGo's batch re-choices (docs/batch-size.md): relative improvement of the predicted
  // completion needed to change batch sizes, and the least time between two changes of a job's.
  double batch_hysteresis = scheduler::BatchSwitchRule{}.hysteresis;
  int64_t batch_min_interval_ms = scheduler::BatchSwitchRule{}.min_interval_ms;
  int debounce_ms = 50;  // wake-ups within this window after a pass share the next pass
  int timer_ms = 2000;   // periodic pass: retries failed switches, reconnects
  int reconcile_parallelism = 16;
  // INA counters (job_aggregated / job_fallback / job_preempted of ina.p4) are read from a switch
  // after a successful reconciliation, at most once per this period per switch (0: every pass).
  int counters_period_ms = 2000;
  // Election id: 0 = one more than the highest id stored for any switch (a restarted controller
  // thus wins arbitration); otherwise this fixed value (a standby controller is given a lower one).
  southbound::ElectionId election_id{};
  int64_t keep_events = 100000;
  int64_t keep_plans = 50;
  // Retention of finished jobs and audit entries (server/retention_worker.h): run at Start and
  // then every retention.period_ms on a thread of its own.
  RetentionOptions retention;
  // The dashboard's history (server/stats_history.h): observed at the end of every loop pass.
  StatsHistoryOptions stats;
};

class Controller : public PlanService,
                   public EventService,
                   public HealthService,
                   public AuditService {
 public:
  // `storage` is not owned and must outlive the controller.
  Controller(core::Storage* storage, SwitchClientFactory factory, Clock clock,
             ControllerOptions options);
  ~Controller() override;
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Loads the stored state, creates the switch clients and starts the loop thread. Errors from
  // storage (the database cannot be read) or InvalidArgument for unknown algorithm/policy names.
  absl::Status Start();
  // Stops the loop and the refiner and disconnects the switches. Idempotent. Waits for the loop's
  // current step and the refiner's solve (not interrupted: bounded by replan_budget_ms of CLP).
  void Stop();
  // Stop() that waits at most `grace` for the loop. false: the loop is still inside a step (a
  // solve) and the controller is NOT stopped -- it must not be destroyed; a process that is
  // shutting down exits without it (every acknowledged write is already committed; the plan in
  // progress is recomputed at the next start). true: stopped as by Stop().
  bool StopWithin(absl::Duration grace);

  // Cluster mode (docs/ha.md): the P4Runtime election id the next Start uses -- the leader's
  // etcd fencing token. Call before Start.
  void SetElectionId(southbound::ElectionId election_id) { options_.election_id = election_id; }

  // Every service of this controller, for a northbound adapter: the job and topology managers,
  // this controller for the others, and the dashboard's history.
  ApiServices services();

  // --- JobService and TopologyService: the managers this controller owns (as services() hands
  // them out).
  JobService& jobs() { return jobs_; }
  TopologyService& topology() { return topology_; }

  // --- PlanService
  absl::StatusOr<std::optional<core::PlanRecord>> CurrentPlan() override;
  absl::StatusOr<core::Plan> PreviewPlan(const core::JobSpec& spec) override;

  // --- EventService
  absl::StatusOr<std::vector<core::Event>> Events(const core::EventFilter& filter) override;
  int64_t WaitForEvents(int64_t after_seq, int timeout_ms) override;

  // --- HealthService
  bool LoopAlive() override;
  absl::Status Ready() override;
  std::string MetricsText() override;
  server::Metrics* metrics() override { return &metrics_; }

  // --- AuditService
  absl::Status RecordAudit(core::AuditEntry entry) override;
  absl::StatusOr<core::AuditPage> ListAudit(const core::AuditFilter& filter) override;

  // One retention run now, on the calling thread (tests; the retention thread runs it too).
  absl::StatusOr<storage::RetentionResult> RunRetention() { return retention_.RunOnce(); }

  // Counters and the current state in one value (tests and benchmarks).
  ControllerMetrics Metrics();

  // Wakes the loop and blocks until it completed a whole pass that started after this call (tests
  // and the demo use it to wait for convergence). DeadlineExceeded after `timeout_ms`.
  absl::Status Sync(int timeout_ms);

 private:
  void Wake();
  // Replays the stored noise-scale refits and batch changes into batch_refit_ (at Start).
  void RestoreBatchRefit();
  void LoopMain();
  void Pass();
  // Whether Stop() was asked for (the loop's steps check it between them).
  bool Stopping();
  // The pass's planning step: the plan in force when the inputs' fingerprint is unchanged
  // (KeepPlan), the refiner's step while an admission plan is in force (RefineStep), else a new
  // plan (SortJobs -> PlanJobs -> SavePlan -> ScheduleJobs). True when it saved a plan.
  absl::StatusOr<bool> MaybeReplan(const core::Snapshot& snapshot, int64_t* plan_version);
  // The inputs of the plan in force are unchanged: clears any refinement, finishes marking its
  // jobs scheduled and refreshes the priorities.
  absl::StatusOr<bool> KeepPlan(const core::Snapshot& snapshot, int64_t* plan_version);
  // The jobs of a snapshot sorted for planning: the placeable ones, and the state changes (with
  // their events) of those that are not.
  struct JobSort {
    std::vector<core::Job> placeable;  // hosts present and connected over up links
    std::vector<std::pair<core::JobId, core::JobUpdate>> updates;
    std::vector<core::Event> events;  // events[i] is updates[i]'s
  };
  JobSort SortJobs(const std::vector<core::Job>& jobs, const core::Topology& topology,
                   int64_t now) const;
  // A plan computed by PlanJobs, not yet saved.
  struct PlannedJobs {
    core::Plan plan;
    std::optional<scheduler::AdmissionOutput> admission;  // set when admitted onto `previous`
    double solve_ms = 0;
  };
  // Incremental with a plan in force: admits `placeable` onto it (scheduler::AdmitJobs);
  // otherwise the full plan (ComputePlan).
  absl::StatusOr<PlannedJobs> PlanJobs(const core::Topology& topology,
                                       const std::vector<core::Job>& placeable,
                                       const core::Plan* previous);
  // Saves `planned` with its intents and events (an admission that kept jobs is provisional:
  // fingerprint "admitted:<fingerprint>", and its refinement is requested), counts it and
  // returns its version.
  absl::StatusOr<int64_t> SavePlan(const core::Topology& topology, const std::string& fingerprint,
                                   PlannedJobs planned, const core::Plan* previous,
                                   const std::vector<core::Job>& placeable, int64_t now);
  // Appends pending -> scheduled for the pending jobs of `placeable` (saved in `plan_version`).
  void ScheduleJobs(const std::vector<core::Job>& placeable, int64_t plan_version, int64_t now,
                    JobSort* sort) const;
  // With the current plan's inputs unchanged: re-ranks the ESA priorities from progress and age
  // (scheduler::RefreshPriorities) and saves a new plan version (same routes and aggregators)
  // when the order changed. True when it saved one.
  absl::StatusOr<bool> RefreshPriorities(const core::Snapshot& snapshot, int64_t* plan_version);
  // Moves scheduled jobs to running once every switch holding one of their entries confirmed
  // `plan_version`.
  void AdvanceJobs(int64_t plan_version, const std::vector<core::SwitchIntent>& intents);
  // Applies job state changes (`events[i]` is `updates[i]`'s event) in one transaction; when a
  // concurrent command made one of them illegal, applies each of the others alone.
  void ApplyJobUpdates(const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates,
                       const std::vector<core::Event>& events, int64_t now);
  absl::StatusOr<core::Plan> ComputePlan(const core::Topology& topology,
                                         const std::vector<core::Job>& jobs,
                                         const core::Plan* previous);
  // The loop's step while an admission plan for `fingerprint` is in force: asks the refiner for
  // the full plan (once per fingerprint) and adopts its result when it is current.
  absl::StatusOr<bool> RefineStep(const core::Snapshot& snapshot, const std::string& fingerprint,
                                  int64_t* plan_version);
  // Marks the pending jobs that `snapshot`'s plan holds as scheduled (a crash between saving a
  // plan and that update leaves them pending).
  void MarkScheduled(const core::Snapshot& snapshot, int64_t plan_version);
  // The refiner's thread (controller_refiner.cc). It is a thread of this class rather than a
  // class of its own because its state is the loop's: Sync's convergence and StopWithin's wait
  // are single conditions over both under mu_.
  void RefinerMain();
  // A snapshot for the refiner and its answer.
  struct RefineRequest {
    std::string fingerprint;
    int64_t base_version = 0;  // the admission plan it refines
    core::Topology topology;
    std::vector<core::Job> jobs;
    core::Plan previous;
    int64_t now_ms = 0;
  };
  struct RefineResult {
    std::string fingerprint;
    int64_t base_version = 0;
    absl::StatusOr<scheduler::PlannerOutput> output;
    double solve_ms = 0;
  };
  // RefineStep's exchange with the refiner: its answer for `fingerprint` on the admission plan in
  // force, or nullopt (asked now, still queued or solving, or these inputs already failed).
  std::optional<RefineResult> TakeRefineResult(const core::Snapshot& snapshot,
                                               const std::string& fingerprint);
  // Saves the refiner's full plan in place of the admission plan (a failed one is logged).
  absl::StatusOr<bool> AdoptRefinedPlan(const core::Snapshot& snapshot,
                                        const std::string& fingerprint, RefineResult result,
                                        int64_t* plan_version);
  std::string Fingerprint(const core::Snapshot& snapshot) const;
  scheduler::PlannerOptions PlannerOptionsOf() const;

  core::Storage* storage_;
  Clock clock_;
  ControllerOptions options_;
  server::Metrics metrics_;
  EventHub events_;
  SwitchFleet fleet_;
  JobManager jobs_;
  BatchRefit batch_refit_;  // InGo: noise-scale refit and batch-change times
  TopologyManager topology_;
  RetentionWorker retention_;
  StatsHistory stats_;  // GET /stats/...: observed at each pass end, submissions and plans counted
  // The workers' data-path reports (in memory, server/data_path.h; recorded by jobs_): dropped
  // when a job ends (JobManager's CancelJob and ReportProgress, ApplyJobUpdates) and, at each pass
  // end, for every job that is no longer active.
  DataPathBook data_paths_;

  absl::Mutex mu_;  // the loop's state, shared with Sync, Stop and the health queries
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool loop_exited_ ABSL_GUARDED_BY(mu_) = true;  // no loop thread running
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  int64_t passes_started_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t passes_done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_pass_ms_ ABSL_GUARDED_BY(mu_) = 0;  // clock time of the last completed pass
  // Refinement: the inputs the loop wants refined (empty: none outstanding), the request not yet
  // taken by the refiner, whether it is solving, and its last answer not yet handled.
  std::string refine_fingerprint_ ABSL_GUARDED_BY(mu_);
  std::optional<RefineRequest> refine_request_ ABSL_GUARDED_BY(mu_);
  bool refine_running_ ABSL_GUARDED_BY(mu_) = false;
  bool refiner_exit_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<RefineResult> refine_result_ ABSL_GUARDED_BY(mu_);
  std::string refine_failed_fingerprint_ ABSL_GUARDED_BY(mu_);   // not asked again
  bool refine_settle_at_pass_end_ ABSL_GUARDED_BY(mu_) = false;  // a refined plan was saved
  std::thread loop_;
  std::thread refiner_;
};

}  // namespace inac::server
