// P4RuntimeSwitchClient: SwitchClient over P4Runtime (SwitchSession + IntentTranslator +
// IntentReconciler) for one switch running api/p4/ina.p4. No protobuf type in this header.
//
// Thread safety: every method may be called from any thread; Reconcile, EnsurePipeline and
// ReadCounters are serialised by an internal mutex.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/topology.h"
#include "southbound/switch_client.h"
#include "southbound/switch_session.h"

namespace inac::southbound {

class IntentTranslator;
class IntentReconciler;
class P4InfoIndex;

struct P4RuntimeSwitchClientOptions {
  std::string switch_id;   // the topology's switch id
  SessionOptions session;  // address, device id, election id, backoff, batch limits
  // P4Info text (protobuf text format); empty: the ina.p4 P4Info embedded in the binary.
  std::string p4info_text;
  // Target-specific pipeline blob for SetForwardingPipelineConfig (BMv2: the p4c JSON); empty
  // for the emulated switch.
  std::string device_config;
  // Pipeline cookie; nullopt: a fingerprint of the P4Info and the device config, so a change of
  // either (e.g. a new ina.json, or a switch moved to another target kind) re-pushes.
  std::optional<uint64_t> cookie;
  // The target kind's name, for error messages ("emulator", "bmv2").
  std::string target_name = "emulator";
};

class P4RuntimeSwitchClient : public SwitchClient {
 public:
  // Loads the P4Info and resolves the INA contract. InvalidArgument for a bad P4Info; NotFound
  // when it lacks a table, action, field or counter of the contract. Does not connect.
  static absl::StatusOr<std::unique_ptr<P4RuntimeSwitchClient>> Create(
      P4RuntimeSwitchClientOptions options);
  ~P4RuntimeSwitchClient() override;

  const std::string& switch_id() const override { return options_.switch_id; }
  absl::Status Connect() override;
  bool IsConnected() const override;
  bool IsPrimary() const override;
  // SwitchClient::EnsurePipeline, plus: after a Reconcile that failed the way a switch without
  // a working pipeline fails (FAILED_PRECONDITION; BMv2's UNKNOWN on reading its tables) while
  // the cookie matched, pushes the pipeline again, once, until a Reconcile succeeds.
  absl::StatusOr<bool> EnsurePipeline() override;
  absl::StatusOr<ReconcileStats> Reconcile(const core::SwitchIntent& intent) override;
  absl::StatusOr<std::vector<AggregationCounters>> ReadCounters(
      const core::SwitchIntent& intent) override;
  void Disconnect() override;

  // Blocks until this client is primary or `timeout` passes; returns IsPrimary().
  bool AwaitPrimary(absl::Duration timeout) const { return session_->AwaitPrimary(timeout); }
  // Blocks until this client is not primary or `timeout` passes; returns !IsPrimary().
  bool AwaitNotPrimary(absl::Duration timeout) const { return session_->AwaitNotPrimary(timeout); }
  // Arbitration details (election id in use, last stream error) for status pages.
  ArbitrationState arbitration() const { return session_->state(); }
  uint64_t cookie() const { return cookie_; }

 private:
  P4RuntimeSwitchClient(P4RuntimeSwitchClientOptions options,
                        std::unique_ptr<IntentTranslator> translator, uint64_t cookie);

  const P4RuntimeSwitchClientOptions options_;
  const std::unique_ptr<IntentTranslator> translator_;
  const uint64_t cookie_;
  const std::unique_ptr<SwitchSession> session_;
  absl::Mutex mu_;  // serialises entity-level operations
  const std::unique_ptr<IntentReconciler> reconciler_ ABSL_PT_GUARDED_BY(mu_);
  // The last Reconcile failed like a pipeline-less switch; the next EnsurePipeline pushes.
  bool pipeline_suspect_ ABSL_GUARDED_BY(mu_) = false;
  // EnsurePipeline pushed because of that, and no Reconcile has succeeded since.
  bool repushed_ ABSL_GUARDED_BY(mu_) = false;

  static bool LooksPipelineless(const absl::Status& status);
};

// The client `inac serve` opens for a topology switch with a P4Runtime endpoint (`sw.p4runtime`
// set): its address and device id, `election_id` as this controller's primary-election id, the
// device config of its target kind (BMv2: p4c's JSON, embedded in the binary), and the session's
// own gRPC channel (SwitchSession: reconnect backoff capped at 250 ms, so a switch that is back
// is seen within ~250 ms). InvalidArgument when `sw` has no P4Runtime endpoint; the device
// config's error for an unknown target. Matches server::SwitchClientFactory.
absl::StatusOr<std::unique_ptr<SwitchClient>> CreateP4RuntimeClient(const core::Switch& sw,
                                                                    ElectionId election_id);

}  // namespace inac::southbound
