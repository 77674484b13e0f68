// The controller's metrics, on prometheus-cpp (Debian: prometheus-cpp-dev). Two kinds:
//   - what the controller observes as it works, kept in a registry for the process's life:
//     counters (plans, priority refreshes, P4Runtime writes and errors, loop passes, HTTP requests)
//     and latency histograms (plan solve time, per-switch reconciliation, loop pass, HTTP request
//     by route and status);
//   - what describes the current state (jobs by state, each switch's session and sync, aggregator
//     utilisation, the INA packet counters last read from the switches), built from a
//     MetricsSnapshot at each scrape so that a switch or job that left is not reported stale.
// Render() writes both in the Prometheus text exposition format 0.0.4 (GET /metrics).
//
// Metric names and labels are a public interface (dashboards, alerts): docs/controller.md lists
// them; renaming one is a breaking change.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace inac::server {

// A switch as the controller sees it (GET /switches).
// One P4 table (or the multicast groups) of a switch's intent: entries against the table's size
// in api/p4/ina.p4 (GET /switches "tables", the dashboard's table occupancy).
struct TableOccupancy {
  std::string name;
  int64_t entries = 0;
  int64_t size = 0;
};

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
  std::vector<TableOccupancy> tables;  // of its latest intent; empty until a visit (managed only)
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

// The controller's counters and current state in one value (Controller::Metrics(); tests and
// benchmarks read it, GET /metrics renders it).
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
  double last_reconcile_ms = 0;  // the last switch reconciliation
  int64_t loop_passes = 0;
  int64_t last_pass_ms = 0;    // clock time of the last completed pass
  int64_t auth_refusals = 0;   // requests answered 401/403 before a handler ran
  int64_t audit_failures = 0;  // audit entries that could not be appended
  int64_t pruned_jobs = 0;     // finished jobs removed by retention
  int64_t pruned_audit = 0;    // audit entries removed by retention
  std::vector<SwitchStatus> switches;
  std::vector<InaCounterSample> ina_counters;  // every (switch, tag) read, by job, switch, tag
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A plan computed (solve time) and saved.
  void ObservePlan(double seconds);
  void CountPriorityRefresh();
  // One switch reconciled (read, diff, writes), its accepted and refused updates.
  void ObserveReconcile(double seconds);
  void CountSouthbound(int64_t writes, int64_t errors);
  // The accepted updates of one reconciliation by kind (inac_southbound_updates_total{op}): a
  // new leader that adopted the plan in force modifies and deletes nothing (docs/ha.md).
  void CountUpdates(int64_t inserted, int64_t modified, int64_t deleted);
  // A loop pass ended at clock time `now_ms` after `seconds`.
  void ObservePass(double seconds, int64_t now_ms);
  // An HTTP request answered: `route` is the route's OpenAPI path ("/jobs/{id}"), or "unmatched".
  void ObserveHttp(std::string_view method, std::string_view route, int status, double seconds);
  // A request refused on its head (401 or 403) before any handler ran.
  void CountAuthRefusal(int status);
  // An audit entry that could not be appended (the request's answer stood).
  void CountAuditFailure();
  // Rows a retention run removed.
  void CountPruned(int64_t jobs, int64_t audit);

  // The counters above (jobs, switches and INA counters are left empty).
  ControllerMetrics Counters() const;
  // The exposition text: the registry's counters and histograms, then the state of `snapshot`.
  std::string Render(const ControllerMetrics& snapshot) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Histogram* plan_seconds_;
  prometheus::Gauge* plan_last_seconds_;
  prometheus::Counter* priority_refreshes_;
  prometheus::Histogram* reconcile_seconds_;
  prometheus::Counter* southbound_writes_;
  prometheus::Counter* southbound_errors_;
  prometheus::Counter* updates_inserted_;
  prometheus::Counter* updates_modified_;
  prometheus::Counter* updates_deleted_;
  prometheus::Histogram* pass_seconds_;
  prometheus::Counter* passes_;
  prometheus::Gauge* last_pass_time_;
  prometheus::Family<prometheus::Histogram>* http_seconds_;
  prometheus::Counter* refused_401_;
  prometheus::Counter* refused_403_;
  prometheus::Counter* audit_failures_;
  prometheus::Counter* pruned_jobs_;
  prometheus::Counter* pruned_audit_;
};

}  // namespace inac::server
