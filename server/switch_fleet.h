// The switch fleet: one P4Runtime client per managed switch of the topology (a switch with a
// p4runtime endpoint), and the work of bringing each to its intent. The control loop drives it:
//   Sync(topology)      creates clients for new switches (on the worker pool, with their stored
//                       records read in one List) and drops those that left or moved;
//   Watch()             between passes, observes the sessions (a switch that went down or came
//                       back, a primary change) so that the loop can start a pass at once;
//   Reconcile(version)  visits every switch on a persistent worker pool: connects, checks and
//                       pushes the pipeline, reconciles the intent, reads the INA counters (at
//                       most once per counters period per switch) and records what happened;
//   Persist(writes)     writes the per-switch records (one transaction each) the visit produced.
// Readers (the REST layer, readiness, metrics) see each switch's state as published after its
// last visit; they never wait for a visit in progress.
//
// Switch records are informational: jobs advance on versions a visit of this process confirmed
// (ConfirmedVersions), and a restarted controller reads the switches back.
//
// Thread safety: Sync, Watch, Reconcile, Persist and Shutdown are called by the control loop
// only; the queries may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/plan.h"
#include "core/stores.h"
#include "core/topology.h"
#include "server/event_hub.h"
#include "server/metrics.h"
#include "server/worker_pool.h"
#include "southbound/switch_client.h"
#include "southbound/switch_session.h"

namespace inac::server {

// Builds the client for one switch of the topology (which has a p4runtime endpoint) using
// `election_id` (128 bits: a single controller uses the low 64; a cluster leader puts its epoch in
// the high 64, docs/ha.md). Returning an error marks the switch unreachable with that error. Called
// from the fleet's worker threads, several at once (Sync builds new switches' clients in
// parallel): it must be thread-safe.
using SwitchClientFactory = std::function<absl::StatusOr<std::unique_ptr<southbound::SwitchClient>>(
    const core::Switch& sw, southbound::ElectionId election_id)>;

struct SwitchFleetOptions {
  int parallelism = 16;  // switches visited at once
  // INA counters are read from a switch after a successful reconciliation, at most once per this
  // period per switch (0: every visit).
  int counters_period_ms = 2000;
  // A changed applied version alone is written to a switch's record at most once per this
  // period (the loop's timer period).
  int state_write_period_ms = 2000;
};

class SwitchFleet {
 public:
  // `states`, `events` and `metrics` are not owned and must outlive the fleet.
  SwitchFleet(core::SwitchStateStore* states, EventHub* events, Metrics* metrics,
              SwitchClientFactory factory, Clock clock, SwitchFleetOptions options);
  ~SwitchFleet();
  SwitchFleet(const SwitchFleet&) = delete;
  SwitchFleet& operator=(const SwitchFleet&) = delete;

  // The election id every client is created with (set before the first Sync).
  void SetElectionId(southbound::ElectionId election_id);
  southbound::ElectionId election_id() const;

  struct Slot;
  // A switch's record to be written after a visit (with the events of the visit).
  struct StateWrite {
    std::shared_ptr<Slot> slot;
    core::SwitchState state;
    std::vector<core::Event> events;
  };
  struct Visit {
    std::vector<StateWrite> writes;
  };

  // Creates and drops clients to match the topology's managed switches.
  void Sync(const core::Topology& topology);
  // True when a session changed (connected / primary) since the last observation.
  bool Watch();
  // Visits every switch and brings it to its intent of `plan_version` (a switch with no intent
  // gets the empty one). Returns the records to persist.
  Visit Reconcile(int64_t plan_version, const std::vector<core::SwitchIntent>& intents);
  // Writes each record in its own transaction.
  void Persist(Visit visit);
  // Disconnects every switch, writes their last records and forgets them.
  void Shutdown();

  // Switch id -> the applied version confirmed by a visit of this process (0 when none).
  std::map<std::string, int64_t> ConfirmedVersions();
  // Every switch of `topology` with what the fleet knows of it (`stored`: records of switches it
  // does not manage in this process).
  std::vector<SwitchStatus> Statuses(const core::Topology& topology,
                                     const std::vector<core::SwitchState>& stored);
  // The INA counters last read, every (switch, tag), by switch then tag.
  std::vector<InaCounterSample> Counters();
  // The INA counters last read for `job`'s tags.
  std::vector<InaCounterSample> JobCounters(core::JobId job);

 private:
  // The record to write for `slot` after a visit (nullopt: nothing worth a transaction).
  // `flush`: write a changed applied version now.
  std::optional<StateWrite> MakeStateWrite(const std::shared_ptr<Slot>& slot, uint64_t election,
                                           std::vector<core::Event> events, bool flush);
  // One switch's visit (on a pool thread).
  std::optional<StateWrite> VisitOne(const std::shared_ptr<Slot>& slot, uint64_t election,
                                     int64_t plan_version, const core::SwitchIntent& intent);
  void MaybeReadCounters(Slot& slot, const core::SwitchIntent& intent);
  void PruneCounters(const std::string& switch_id, const core::SwitchIntent* intent);
  std::vector<std::shared_ptr<Slot>> AllSlots();

  core::SwitchStateStore* states_;
  EventHub* events_;
  Metrics* metrics_;
  SwitchClientFactory factory_;
  Clock clock_;
  SwitchFleetOptions options_;
  WorkerPool pool_;

  mutable absl::Mutex mu_;
  southbound::ElectionId election_id_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);

  // INA counters last read: switch id -> tag -> sample. Written by the visits, read by the API.
  absl::Mutex counters_mu_;
  std::map<std::string, std::map<uint32_t, InaCounterSample>> counters_
      ABSL_GUARDED_BY(counters_mu_);
};

}  // namespace inac::server
