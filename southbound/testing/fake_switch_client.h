// FakeSwitchClient: an in-memory SwitchClient for other layers' tests (a fake, not a mock: it
// really holds the switch's INA state). Reconcile translates the intent with the real
// IntentTranslator and diffs it with the real DiffEntities against what the fake holds, so its
// stats are those a P4Runtime switch would produce. Knobs simulate the failures the controller
// must survive: unreachable switch, lost primary, switch restart (state lost), refused writes.
//
// Thread safety: all methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "southbound/switch_client.h"

namespace inac::southbound {

class FakeSwitchClient : public SwitchClient {
 public:
  // Uses the embedded ina.p4 P4Info (CHECK-fails if it does not load: a build defect).
  explicit FakeSwitchClient(std::string switch_id);
  ~FakeSwitchClient() override;

  const std::string& switch_id() const override { return switch_id_; }
  absl::Status Connect() override;
  bool IsConnected() const override;
  bool IsPrimary() const override;
  absl::StatusOr<bool> EnsurePipeline() override;
  absl::StatusOr<ReconcileStats> Reconcile(const core::SwitchIntent& intent) override;
  absl::StatusOr<std::vector<AggregationCounters>> ReadCounters(
      const core::SwitchIntent& intent) override;
  void Disconnect() override;

  // --- Knobs ---
  // While unreachable, Connect returns Unavailable and a connected fake drops its session.
  void SetReachable(bool reachable);
  // Whether Connect makes this client primary (default true); changing it on a connected fake
  // takes effect at once (a higher election id arrived, or the other controller left).
  void SetPrimary(bool primary);
  // The next Reconcile fails with `status` without touching the state.
  void FailNextReconcile(absl::Status status);
  // Updates whose entity description contains `substring` are refused with `status` (reported
  // in ReconcileStats.failed), until cleared with an empty substring.
  void RefuseUpdatesMatching(std::string substring, absl::Status status);
  // The switch restarts: pipeline and all entries are lost, the session drops.
  void Restart();
  // Counter values ReadCounters reports for `counters.multicast_group` (the counter index).
  void SetCounters(const AggregationCounters& counters);
  // ReadCounters fails with `status` until called again with an OK status.
  void FailReadCounters(absl::Status status);

  // --- Inspection ---
  // The intent of the last Reconcile that converged, if any since the last Restart.
  std::optional<core::SwitchIntent> applied_intent() const;
  int64_t entity_count() const;  // table entries + multicast groups held
  int64_t reconcile_calls() const;
  int64_t pipeline_pushes() const;
  int64_t read_counters_calls() const;

 private:
  struct State;  // protobuf-typed state, hidden from this header

  const std::string switch_id_;
  mutable absl::Mutex mu_;
  std::unique_ptr<State> state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inac::southbound
