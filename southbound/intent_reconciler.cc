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

constexpr size_t kMaxErrorLines = 20;

absl::string_view TypeName(p4::v1::Update::Type type) {
  switch (type) {
    case p4::v1::Update::INSERT:
      return "INSERT";
    case p4::v1::Update::MODIFY:
      return "MODIFY";
    case p4::v1::Update::DELETE:
      return "DELETE";
    default:
      return "UPDATE";
  }
}

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
    ++stats.failed;
    if (stats.errors.size() < kMaxErrorLines) {
      stats.errors.push_back(absl::StrCat(TypeName(updates[i].type()), " ",
                                          DescribeEntity(updates[i].entity()), ": ",
                                          status.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

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
  if (stats.failed > static_cast<int64_t>(stats.errors.size())) {
    stats.errors.push_back(
        absl::StrCat("... and ", stats.failed - stats.errors.size(), " more refused updates"));
  }
  return stats;
}

}  // namespace inac::southbound
