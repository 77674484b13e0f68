// Diff by key between the entities a switch holds and the entities an intent requires: the pure
// core of reconciliation (IntentReconciler, FakeSwitchClient). Codec layer (protobuf types).
//
// Entities are canonicalised (entity_codec.h) and keyed by EntityKey; a key only on the switch
// is deleted, a key only in the intent inserted, a key in both with different canonical content
// modified. Deletes are ordered by decreasing dependency rank (routes, inputs, jobs, then
// multicast groups), inserts and modifies by increasing rank, so nothing is ever referenced
// before it exists. A key that "moves" (an entity replaced by one with another key) becomes a
// delete plus an insert, and the reconciler sends every delete before any insert.
// Complexity: O((n + m) log(n + m)) for n current and m desired entities.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/intent_translator.h"

namespace inac::southbound {

struct EntityDiff {
  std::vector<p4::v1::Update> deletes;
  std::vector<p4::v1::Update> modifies;
  std::vector<p4::v1::Update> inserts;
  int64_t current = 0;    // owned entities on the switch
  int64_t unchanged = 0;  // keys whose content already matches
};

// Diffs `current` (as read back, any form; entities `translator` does not own are ignored)
// against `desired`, which must be canonical (IntentTranslator::Translate's output is).
// InvalidArgument when `desired` holds two different entities with the same key, or an entity of
// `current` cannot be canonicalised.
// `current` is taken by value and canonicalised in place (move a Read result in).
absl::StatusOr<EntityDiff> DiffEntities(const IntentTranslator& translator,
                                        std::vector<p4::v1::Entity> current,
                                        const std::vector<p4::v1::Entity>& desired);

}  // namespace inac::southbound
