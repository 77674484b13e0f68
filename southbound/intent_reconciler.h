// IntentReconciler: brings one switch to a core::SwitchIntent over an open SwitchSession
// (docs/controller.md, "Data flow", step 4).
//
// One run: Translate the intent (IntentTranslator) -> wildcard-read the INA tables and all
// multicast groups -> canonicalise -> diff by key (entity_diff.h) -> Write all DELETEs, then all
// MODIFYs, then all INSERTs, each phase in size-bounded batches. Idempotent: on a switch equal
// to the intent a run reads and writes nothing. State outside the INA tables and the multicast
// groups is never touched. A DELETE answered NOT_FOUND counts as done (the entry is gone, which
// is what was wanted); every other refused update is reported in ReconcileStats and retried by
// the next run (nothing is assumed about it).
//
// Thread safety: not thread-safe; the owner serialises runs (P4RuntimeSwitchClient does).
#pragma once

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/switch_client.h"

namespace inac::southbound {

class IntentTranslator;
class SwitchSession;

// The refused-update lines of ReconcileStats (switch_client.h), shared by every SwitchClient:
// RecordRefusal counts `update` as failed and, for the first 20, adds its line
// ("INSERT table_entry{...}: CODE: message"); FinishRefusals adds the summary line of the rest.
void RecordRefusal(const p4::v1::Update& update, const absl::Status& status, ReconcileStats* stats);
void FinishRefusals(ReconcileStats* stats);

class IntentReconciler {
 public:
  // Not owned; both must outlive the reconciler.
  IntentReconciler(SwitchSession* session, const IntentTranslator* translator)
      : session_(session), translator_(translator) {}

  // See the file comment. Errors: InvalidArgument when the intent does not fit the pipeline
  // (nothing is written); the Read's error; a Write batch's RPC-wide error (PermissionDenied when
  // not primary, Unavailable, ...), after which the switch may hold part of the changes.
  absl::StatusOr<ReconcileStats> Reconcile(const core::SwitchIntent& intent);

 private:
  SwitchSession* session_;
  const IntentTranslator* translator_;
};

}  // namespace inac::southbound
