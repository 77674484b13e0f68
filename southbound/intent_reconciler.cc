#include "southbound/intent_reconciler.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "southbound/entity_codec.h"
#include "southbound/entity_diff.h"
#include "southbound/intent_translator.h"
#include "southbound/switch_session.h"

namespace inac::southbound {
namespace {

// Sends one phase; counts successes into `*done` and failures into `stats`.
absl::Status ApplyPhase(SwitchSession& session, std::vector<p4::v1::Update>& updates, int64_t* done,
                        ReconcileStats& stats) {
  if (updates.empty()) return absl::OkStatus();
  int64_t batches = 0;
  auto results = session.WriteInPlace(&updates, &batches);
  stats.batches += batches;
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < updates.size(); ++i) {
    const absl::Status& status = (*results)[i];
    const bool gone_already =
        updates[i].type() == p4::v1::Update::DELETE && absl::IsNotFound(status);
    if (status.ok() || gone_already) {
      ++*done;
      continue;
    }
    RecordRefusal(updates[i], status, &stats);
  }
  return absl::OkStatus();
}

}  // namespace

void RecordRefusal(const p4::v1::Update& update, const absl::Status& status,
                   ReconcileStats* stats) {
  constexpr size_t kMaxErrorLines = 20;
  ++stats->failed;
  if (stats->errors.size() >= kMaxErrorLines) return;
  absl::string_view type = "UPDATE";
  switch (update.type()) {
    case p4::v1::Update::INSERT:
      type = "INSERT";
      break;
    case p4::v1::Update::MODIFY:
      type = "MODIFY";
      break;
    case p4::v1::Update::DELETE:
      type = "DELETE";
      break;
    default:
      break;
  }
  stats->errors.push_back(
      absl::StrCat(type, " ", DescribeEntity(update.entity()), ": ", status.ToString()));
}

void FinishRefusals(ReconcileStats* stats) {
  if (stats->failed > static_cast<int64_t>(stats->errors.size())) {
    stats->errors.push_back(
        absl::StrCat("... and ", stats->failed - stats->errors.size(), " more refused updates"));
  }
}

absl::StatusOr<ReconcileStats> IntentReconciler::Reconcile(const core::SwitchIntent& intent) {
  INAC_ASSIGN_OR_RETURN(std::vector<p4::v1::Entity> desired, translator_->Translate(intent));
  INAC_ASSIGN_OR_RETURN(std::vector<p4::v1::Entity> current,
                        session_->Read(translator_->OwnedStateFilters()));
  INAC_ASSIGN_OR_RETURN(EntityDiff diff, DiffEntities(*translator_, std::move(current), desired));

  ReconcileStats stats;
  stats.read = diff.current;
  stats.unchanged = diff.unchanged;
  INAC_RETURN_IF_ERROR(ApplyPhase(*session_, diff.deletes, &stats.deleted, stats));
  INAC_RETURN_IF_ERROR(ApplyPhase(*session_, diff.modifies, &stats.modified, stats));
  INAC_RETURN_IF_ERROR(ApplyPhase(*session_, diff.inserts, &stats.inserted, stats));
  FinishRefusals(&stats);
  return stats;
}

}  // namespace inac::southbound
