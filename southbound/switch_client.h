// SwitchClient: what the controller needs of one INA switch, whatever the transport. The
// production implementation is P4RuntimeSwitchClient (southbound/p4runtime_switch_client.h);
// other layers' tests use FakeSwitchClient (southbound/testing/fake_switch_client.h). This header
// sees core types and absl::Status only, never a protobuf type (docs/architecture.md, "Shape of a
// module").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"

namespace inac::southbound {

// What a reconciliation did. Updates are counted when the switch accepted them.
struct ReconcileStats {
  int64_t read = 0;       // owned entities found on the switch before the run
  int64_t unchanged = 0;  // entities already equal to the intent
  int64_t deleted = 0;
  int64_t modified = 0;
  int64_t inserted = 0;
  int64_t failed = 0;   // updates the switch refused (see `errors`)
  int64_t batches = 0;  // Write RPCs sent
  // One line per refused update (at most 20, then a summary line), e.g.
  // "INSERT table_entry{...}: ALREADY_EXISTS: ...".
  std::vector<std::string> errors;

  int64_t writes() const { return deleted + modified + inserted; }
  // True when the switch now holds exactly the intent.
  bool converged() const { return failed == 0; }
};

// One counter cell: packets (and bytes, when the counter counts them).
struct CounterValue {
  int64_t packets = 0;
  int64_t bytes = 0;

  bool operator==(const CounterValue&) const = default;
};

// The per-tag counters of api/p4/ina.p4 (job_aggregated, job_preempted, job_fallback), read at
// index = the tag's multicast group id.
struct AggregationCounters {
  uint32_t tag = 0;
  core::JobId job_id = 0;
  uint32_t multicast_group = 0;  // the counter index
  CounterValue aggregated;       // packets summed into an aggregator
  CounterValue preempted;        // partial aggregates evicted by a higher-priority tag (ESA)
  CounterValue fallback;         // packets sent on unaggregated to the PS

  bool operator==(const AggregationCounters&) const = default;
};

// The controller's view of one switch.
//
// Thread safety: implementations are safe to call from several threads; calls on one switch are
// serialised internally.
class SwitchClient {
 public:
  virtual ~SwitchClient() = default;

  // The switch id of the topology this client serves.
  virtual const std::string& switch_id() const = 0;

  // Opens the session and takes part in arbitration. OK once the switch answered, as primary or
  // as backup (see IsPrimary); Unavailable / DeadlineExceeded when it cannot be reached (the
  // client keeps retrying with backoff in the background); InvalidArgument / NotFound /
  // FailedPrecondition when the switch refused the session (bad device id, duplicate election
  // id). Idempotent.
  virtual absl::Status Connect() = 0;

  // True while the session is up and the switch has answered arbitration.
  virtual bool IsConnected() const = 0;

  // True when the switch's last arbitration answer made this client the primary (only the
  // primary may write).
  virtual bool IsPrimary() const = 0;

  // Makes sure the switch runs the INA pipeline: reads the pipeline cookie and pushes the
  // pipeline (P4Info + the target's device config, VERIFY_AND_COMMIT, which clears forwarding
  // state) when it is missing or different, or when the last Reconcile failed the way a switch
  // without a working pipeline fails although the cookie matched (then once, until a Reconcile
  // succeeds). Returns true when it pushed. PermissionDenied when not primary.
  virtual absl::StatusOr<bool> EnsurePipeline() = 0;

  // Brings the switch to `intent`: reads back the INA tables and multicast groups, diffs by key
  // and writes DELETE, MODIFY and INSERT updates (deletes first). Entries of other tables are
  // not touched. A non-OK status means the run could not complete (not connected, read failed,
  // the switch refused the whole batch, e.g. PermissionDenied for a backup, or the intent does
  // not fit the pipeline: InvalidArgument); refused single updates are reported in the stats
  // (`failed`, `errors`), and the next run retries them. A run on a converged switch writes 0.
  virtual absl::StatusOr<ReconcileStats> Reconcile(const core::SwitchIntent& intent) = 0;

  // Reads the counters of every aggregation of `intent` (one per entry of intent.jobs with a
  // non-zero multicast group, in that order). Reads need no arbitration.
  virtual absl::StatusOr<std::vector<AggregationCounters>> ReadCounters(
      const core::SwitchIntent& intent) = 0;

  // Closes the session; a later Connect opens a new one.
  virtual void Disconnect() = 0;
};

}  // namespace inac::southbound
