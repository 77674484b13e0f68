// The controller: INAC's main job (DESIGN.md "The data flow"). It owns the loop that turns the
// stored desired state (topology + jobs) into a plan (scheduler), saves plan and per-switch intents
// in one transaction (storage), and brings every switch to its intent (southbound), advancing job
// states as switches apply. The REST layer (server/http_api.h) is a thin adapter over this class.
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
// for GET /jobs/{id} and /metrics. Restart runs the same loop: the stored plan is kept when its
// fingerprint matches, switches are reconnected with a higher election id, their pipeline checked
// and repaired.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/ports.h"
#include "core/topology.h"
#include "scheduler/planner.h"
#include "southbound/switch_client.h"

namespace inac::server {

// Unix epoch milliseconds. Injected so tests control time.
using Clock = std::function<int64_t()>;
int64_t SystemClockMs();

// Builds the client for one switch of the topology (which has a p4runtime endpoint) using
// `election_id`. Returning an error marks the switch unreachable with that error.
using SwitchClientFactory = std::function<absl::StatusOr<std::unique_ptr<southbound::SwitchClient>>(
    const core::Switch& sw, uint64_t election_id)>;

struct ControllerOptions {
  // The planner's options; defaults those of scheduler::PlannerOptions (also `inac plan`'s).
  std::string algorithm = scheduler::PlannerOptions{}.algorithm;
  std::string memory_policy = scheduler::PlannerOptions{}.memory_policy;
  uint64_t seed = scheduler::PlannerOptions{}.seed;
  int rounds = scheduler::PlannerOptions{}.rounds;
  int paths = scheduler::PlannerOptions{}.paths;
  int debounce_ms = 50;  // wake-ups within this window after a pass share the next pass
  int timer_ms = 2000;   // periodic pass: retries failed switches, reconnects
  int reconcile_parallelism = 8;
  // INA counters (job_aggregated / job_fallback / job_preempted of ina.p4) are read from a switch
  // after a successful reconciliation, at most once per this period per switch (0: every pass).
  int counters_period_ms = 2000;
  // Election id: 0 = one more than the highest id stored for any switch (a restarted controller
  // thus wins arbitration); otherwise this fixed value (a standby controller is given a lower one).
  uint64_t election_id = 0;
  int64_t keep_events = 100000;
  int64_t keep_plans = 50;
};

// A switch as the controller sees it (GET /switches).
struct SwitchStatus {
  std::string id;
  bool managed = false;  // has a p4runtime endpoint
  std::string address;
  uint64_t device_id = 0;
  std::string target;  // target kind ("emulator", "bmv2"), empty when not managed
  bool connected = false;
  bool primary = false;
  uint64_t election_id = 0;
  int64_t intent_version = 0;   // version of the latest saved intent
  int64_t applied_version = 0;  // version the switch is known to hold
  std::string last_error;
  int64_t last_contact_ms = 0;
  int64_t pipeline_pushes = 0;  // times the pipeline was (re)installed since start
  int64_t entries = 0;          // entries + groups in its intent
  int64_t aggregators_used = 0;
  int64_t aggregators_total = 0;
};

// What a worker of a job needs to run (GET /jobs/{id}/config).
struct JobConfig {
  core::Job job;
  int64_t plan_version = 0;
  uint32_t generation = 0;  // the job's aggregation generation (core::JobPlan::generation)
  std::string algorithm;
  int batch_size = 0;
  int priority = 0;
  double rate_gbps = 0;
  double iteration_ms = 0;
  struct Shard {
    std::string ps;
    uint32_t ps_address = 0;
    double share = 0;
    uint32_t tag = 0;  // value for the INA header's job_id field
    uint32_t multicast_group = 0;
  };
  std::vector<Shard> shards;
  struct WorkerRoute {
    std::string worker;
    std::string ps;
    std::string aggregation_node;  // switch id, or the PS itself
    double fraction = 1;
  };
  std::vector<WorkerRoute> routes;
  struct Region {
    std::string switch_id;
    uint32_t tag = 0;
    uint32_t aggregator_base = 0;
    uint32_t aggregator_count = 0;
    // The slots the workers use: slot = (slot_offset + chunk mod window) mod aggregator_count.
    uint32_t slot_offset = 0;
    uint32_t window = 0;
  };
  std::vector<Region> regions;
  // What the host agents need per aggregation tag (one per PS and chunk range): the data-plane
  // contract of docs/ina-pipeline.md seen from the hosts.
  struct Tag {
    uint32_t tag = 0;
    std::string ps;
    uint32_t ps_address = 0;
    double share = 0;  // the PS's share of the model
    double begin = 0;  // the tag's part [begin, end) of that share's chunks
    double end = 1;
    uint32_t multicast_group = 0;
    struct Member {
      std::string worker;
      uint32_t address = 0;
      std::string aggregation_node;  // a switch id, or the PS itself
    };
    std::vector<Member> members;
    struct Aggregator {
      std::string switch_id;
      uint32_t address = 0;             // the source of what it sends to the PS
      std::vector<std::string> inputs;  // node ids in input-bit order (bit i = inputs[i])
      uint32_t aggregator_base = 0;
      uint32_t aggregator_count = 0;
      uint32_t slot_offset = 0;
      uint32_t window = 0;
    };
    std::vector<Aggregator> aggregators;
  };
  std::vector<Tag> tags;
  std::vector<std::string> ring;  // ring all-reduce order
};

// The INA counters of one aggregation (tag) of a job on one switch, as last read (GET /jobs/{id},
// GET /metrics). Packet counts are cumulative since the switch's pipeline was pushed: a switch
// restart or a pipeline push resets them to 0.
struct InaCounterSample {
  std::string switch_id;
  uint32_t tag = 0;
  core::JobId job_id = 0;
  int64_t aggregated_packets = 0;  // summed into an aggregator
  int64_t fallback_packets = 0;    // sent on unaggregated to the PS
  int64_t preempted_packets = 0;   // partial aggregates evicted by a higher-priority tag
  int64_t read_ms = 0;             // clock time of the read (epoch ms)
};

// Counters and gauges for GET /metrics.
struct ControllerMetrics {
  std::map<core::JobState, int64_t> jobs_by_state;
  int64_t plans_computed = 0;
  int64_t priority_refreshes = 0;  // plan versions that only re-ranked ESA priorities
  double last_plan_ms = 0;
  double plan_ms_sum = 0;
  int64_t reconcile_runs = 0;
  int64_t southbound_writes = 0;
  int64_t southbound_errors = 0;
  double reconcile_ms_sum = 0;
  double last_reconcile_ms = 0;
  int64_t loop_passes = 0;
  int64_t last_pass_ms = 0;  // clock time of the last completed pass
  std::vector<SwitchStatus> switches;
  std::vector<InaCounterSample> ina_counters;  // every (switch, tag) read, by job, switch, tag
};

class Controller {
 public:
  // `storage` is not owned and must outlive the controller.
  Controller(core::Storage* storage, SwitchClientFactory factory, Clock clock,
             ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Loads the stored state, creates the switch clients and starts the loop thread. Errors from
  // storage (the database cannot be read) or InvalidArgument for unknown algorithm/policy names.
  absl::Status Start();
  // Stops the loop and disconnects the switches. Idempotent.
  void Stop();

  // --- Commands ---
  absl::StatusOr<core::CreateJobResult> SubmitJob(
      const core::JobSpec& spec, const std::optional<core::IdempotencyKey>& idempotency);
  // pending/scheduled/running -> cancelled; FailedPrecondition when already terminal.
  absl::StatusOr<core::Job> CancelJob(core::JobId id);
  // Records progress; iterations_done >= spec.iterations completes the job. FailedPrecondition
  // unless the job is scheduled or running, or if iterations go backwards.
  absl::StatusOr<core::Job> ReportProgress(core::JobId id, int64_t iterations_done,
                                           std::optional<double> loss);
  // Replaces the topology (validated here: InvalidArgument with every problem) and returns its
  // version. Jobs whose hosts left the topology fail.
  absl::StatusOr<int64_t> PutTopology(const core::Topology& topology);
  // Sets one link up or down (NotFound for an unknown link id).
  absl::StatusOr<core::Link> SetLinkStatus(const std::string& link_id, core::LinkStatus status);

  // --- Queries ---
  absl::StatusOr<std::optional<core::TopologyRecord>> GetTopology();
  absl::StatusOr<core::Job> GetJob(core::JobId id);
  absl::StatusOr<core::JobPage> ListJobs(const core::JobFilter& filter);
  absl::StatusOr<JobConfig> GetJobConfig(core::JobId id);
  absl::StatusOr<std::optional<core::PlanRecord>> CurrentPlan();
  // What-if: plans the active jobs plus `spec` (as job id 0 if it had no id) without admitting it;
  // returns the hypothetical plan. Validation errors as SubmitJob.
  absl::StatusOr<core::Plan> PreviewPlan(const core::JobSpec& spec);
  std::vector<SwitchStatus> Switches();
  absl::StatusOr<SwitchStatus> GetSwitch(const std::string& id);
  absl::StatusOr<std::vector<core::Event>> Events(const core::EventFilter& filter);
  // Blocks until an event with seq > after_seq exists or `timeout_ms` passes; returns the newest
  // sequence number.
  int64_t WaitForEvents(int64_t after_seq, int timeout_ms);

  // Health: the loop thread ran a pass within a few timer periods.
  bool LoopAlive();
  // Readiness: storage readable, loop alive, every managed switch connected.
  absl::Status Ready();
  ControllerMetrics Metrics();
  // The INA counters last read for `id`'s tags on the switches that hold them (by switch, then
  // tag); empty until a read succeeded. Entries leave when the tag leaves the switch's intent.
  std::vector<InaCounterSample> JobCounters(core::JobId id);

  // Wakes the loop and blocks until it completed a whole pass that started after this call (tests
  // and the demo use it to wait for convergence). DeadlineExceeded after `timeout_ms`.
  absl::Status Sync(int timeout_ms);

 private:
  struct SwitchSlot;
  enum class Wake { kJobs, kTopology, kSwitch, kTimer };

  void Notify(Wake why);
  void LoopMain();
  // Observes every switch's session; true when one changed (connected / primary) since the last
  // observation. Loop thread only.
  bool WatchSwitches();
  void Pass();
  absl::StatusOr<bool> MaybeReplan(const core::Snapshot& snapshot, int64_t* plan_version);
  // With the current plan's inputs unchanged: re-ranks the ESA priorities from progress and age
  // (scheduler::RefreshPriorities) and saves a new plan version (same routes and aggregators)
  // when the order changed. True when it saved one.
  absl::StatusOr<bool> RefreshPriorities(const core::Snapshot& snapshot, int64_t* plan_version);
  void SyncSwitchSlots(const core::Topology& topology);
  // A switch's state (and the events of its visit) to be written after the visit.
  struct SwitchStateWrite {
    std::shared_ptr<SwitchSlot> slot;
    core::SwitchState state;
    std::vector<core::Event> events;
  };
  // Visits every managed switch (in parallel) and returns the states that changed.
  std::vector<SwitchStateWrite> ReconcileAll(const core::Snapshot& snapshot, int64_t plan_version,
                                             const std::vector<core::SwitchIntent>& intents);
  // The record to write for `slot` after a visit (nullopt: nothing worth a transaction).
  // `flush`: write a changed applied version now. Caller holds slot->mu.
  std::optional<SwitchStateWrite> StateWrite(const std::shared_ptr<SwitchSlot>& slot,
                                             uint64_t election, std::vector<core::Event> events,
                                             bool flush);
  // Writes each record (with its events) in its own transaction. Takes each slot's mu.
  void PersistSwitchStates(std::vector<SwitchStateWrite> writes);
  // After a successful reconciliation of `slot` to `intent`: reads its INA counters when the
  // period has elapsed (a failure is logged at debug level only). Caller holds slot.mu.
  void MaybeReadCounters(SwitchSlot& slot, const core::SwitchIntent& intent);
  // Drops the counter samples of `switch_id` whose tag is not one of `intent` (every tag when
  // `intent` is null).
  void PruneCounters(const std::string& switch_id, const core::SwitchIntent* intent);
  void AdvanceJobs(int64_t plan_version, const std::vector<core::SwitchIntent>& intents);
  absl::StatusOr<core::Plan> ComputePlan(const core::Topology& topology,
                                         const std::vector<core::Job>& jobs,
                                         const core::Plan* previous, std::string* error);
  std::string Fingerprint(const core::Snapshot& snapshot) const;
  scheduler::PlannerOptions PlannerOptionsOf() const;
  void Log(const std::string& kind, std::optional<core::JobId> job, const std::string& message);

  core::Storage* storage_;
  SwitchClientFactory factory_;
  Clock clock_;
  ControllerOptions options_;

  std::mutex mu_;  // guards everything below except the slots' clients (own locks)
  std::condition_variable wake_cv_;
  std::condition_variable pass_cv_;
  bool wake_ = false;
  bool stopping_ = false;
  int64_t passes_started_ = 0;
  int64_t passes_done_ = 0;
  uint64_t election_id_ = 0;
  std::map<std::string, std::shared_ptr<SwitchSlot>> slots_;
  ControllerMetrics metrics_;
  std::thread loop_;
  bool started_ = false;

  std::mutex event_mu_;
  std::condition_variable event_cv_;

  // INA counters last read: switch id -> tag -> sample. Written by the reconcile workers, read by
  // the API; its own lock so that readers never wait for the loop.
  std::mutex counters_mu_;  // guards counters_
  std::map<std::string, std::map<uint32_t, InaCounterSample>> counters_;
};

}  // namespace inac::server
