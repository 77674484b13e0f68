#include "southbound/entity_diff.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "southbound/entity_codec.h"

namespace inac::southbound {
namespace {

// One entity on either side: its key, its content fingerprint, its write-order rank and where it
// is (index into the canonical current entities, or into `desired`).
struct Keyed {
  std::string key;
  std::string fingerprint;
  int rank = 0;
  size_t index = 0;
};

p4::v1::Update MakeUpdate(p4::v1::Update::Type type, p4::v1::Entity entity) {
  p4::v1::Update update;
  update.set_type(type);
  *update.mutable_entity() = std::move(entity);
  return update;
}

// The smallest entity that names `canonical` for a DELETE (key fields only for multicast groups;
// table entries keep their action: some targets validate it).
p4::v1::Entity DeleteForm(p4::v1::Entity canonical) {
  if (!canonical.has_packet_replication_engine_entry()) return canonical;
  p4::v1::Entity out;
  out.mutable_packet_replication_engine_entry()
      ->mutable_multicast_group_entry()
      ->set_multicast_group_id(
          canonical.packet_replication_engine_entry().multicast_group_entry().multicast_group_id());
  return out;
}

bool ByRank(const Keyed& a, const Keyed& b) {
  return a.rank != b.rank ? a.rank < b.rank : a.key < b.key;
}
bool ByRankDescending(const Keyed& a, const Keyed& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.key < b.key;
}

}  // namespace

absl::StatusOr<EntityDiff> DiffEntities(const IntentTranslator& translator,
                                        std::vector<p4::v1::Entity> current,
                                        const std::vector<p4::v1::Entity>& desired) {
  EntityDiff diff;
  std::vector<p4::v1::Entity>& have_entities = current;
  absl::flat_hash_map<std::string, Keyed> have;
  have.reserve(current.size());
  for (size_t i = 0; i < current.size(); ++i) {
    p4::v1::Entity& entity = current[i];
    if (!translator.IsOwned(entity)) continue;
    if (absl::Status status = CanonicalizeInPlace(entity); !status.ok()) return status;
    Keyed k;
    k.key = EntityKey(entity);
    k.fingerprint = EntityFingerprint(entity);
    k.rank = translator.DependencyRank(entity);
    k.index = i;
    ++diff.current;
    std::string key = k.key;
    have.insert_or_assign(std::move(key), std::move(k));
  }

  // Desired entities come from IntentTranslator::Translate and are canonical already.
  absl::flat_hash_map<std::string, std::string> wanted;  // key -> fingerprint
  wanted.reserve(desired.size());
  std::vector<Keyed> modifies, inserts;
  for (size_t i = 0; i < desired.size(); ++i) {
    std::string key = EntityKey(desired[i]);
    std::string fingerprint = EntityFingerprint(desired[i]);
    auto [it, fresh] = wanted.try_emplace(key, fingerprint);
    if (!fresh) {
      if (it->second == fingerprint) continue;  // an exact duplicate in the intent
      return absl::InvalidArgumentError(absl::StrCat(
          "intent holds two different entities with the same key: ", DescribeEntity(desired[i])));
    }
    auto existing = have.find(key);
    if (existing != have.end() && existing->second.fingerprint == fingerprint) {
      ++diff.unchanged;
      continue;
    }
    Keyed k{std::move(key), std::string(), translator.DependencyRank(desired[i]), i};
    (existing == have.end() ? inserts : modifies).push_back(std::move(k));
  }

  std::vector<Keyed> deletes;
  for (auto& [key, k] : have) {
    if (!wanted.contains(key)) deletes.push_back(std::move(k));
  }
  // Deterministic order: by rank, then key.
  std::sort(deletes.begin(), deletes.end(), ByRankDescending);
  std::stable_sort(modifies.begin(), modifies.end(), ByRank);
  std::stable_sort(inserts.begin(), inserts.end(), ByRank);
  diff.deletes.reserve(deletes.size());
  for (const auto& k : deletes) {
    diff.deletes.push_back(
        MakeUpdate(p4::v1::Update::DELETE, DeleteForm(std::move(have_entities[k.index]))));
  }
  diff.modifies.reserve(modifies.size());
  for (const auto& k : modifies) {
    diff.modifies.push_back(MakeUpdate(p4::v1::Update::MODIFY, desired[k.index]));
  }
  diff.inserts.reserve(inserts.size());
  for (const auto& k : inserts) {
    diff.inserts.push_back(MakeUpdate(p4::v1::Update::INSERT, desired[k.index]));
  }
  return diff;
}

}  // namespace inac::southbound
