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

struct Keyed {
  std::string key;
  std::string fingerprint;
  p4::v1::Entity entity;
  int rank = 0;
};

p4::v1::Update MakeUpdate(p4::v1::Update::Type type, p4::v1::Entity entity) {
  p4::v1::Update update;
  update.set_type(type);
  *update.mutable_entity() = std::move(entity);
  return update;
}

// The smallest entity that names `canonical` for a DELETE (key fields only, plus the action
// for table entries: some targets validate it).
p4::v1::Entity DeleteForm(const p4::v1::Entity& canonical) {
  if (!canonical.has_packet_replication_engine_entry()) return canonical;
  p4::v1::Entity out;
  out.mutable_packet_replication_engine_entry()
      ->mutable_multicast_group_entry()
      ->set_multicast_group_id(
          canonical.packet_replication_engine_entry().multicast_group_entry().multicast_group_id());
  return out;
}

}  // namespace

absl::StatusOr<EntityDiff> DiffEntities(const IntentTranslator& translator,
                                        const std::vector<p4::v1::Entity>& current,
                                        const std::vector<p4::v1::Entity>& desired) {
  EntityDiff diff;
  absl::flat_hash_map<std::string, Keyed> have;
  have.reserve(current.size());
  for (const auto& raw : current) {
    if (!translator.IsOwned(raw)) continue;
    auto canonical = CanonicalEntity(raw);
    if (!canonical.ok()) return canonical.status();
    Keyed k;
    k.key = EntityKey(*canonical);
    k.fingerprint = EntityFingerprint(*canonical);
    k.rank = translator.DependencyRank(*canonical);
    k.entity = *std::move(canonical);
    ++diff.current;
    std::string key = k.key;
    have.insert_or_assign(std::move(key), std::move(k));
  }

  absl::flat_hash_map<std::string, std::string> wanted;  // key -> fingerprint
  wanted.reserve(desired.size());
  std::vector<Keyed> modifies, inserts;
  for (const auto& raw : desired) {
    auto canonical = CanonicalEntity(raw);
    if (!canonical.ok()) return canonical.status();
    std::string key = EntityKey(*canonical);
    std::string fingerprint = EntityFingerprint(*canonical);
    auto [it, fresh] = wanted.emplace(key, fingerprint);
    if (!fresh) {
      if (it->second == fingerprint) continue;  // an exact duplicate in the intent
      return absl::InvalidArgumentError(absl::StrCat(
          "intent holds two different entities with the same key: ", DescribeEntity(*canonical)));
    }
    const int rank = translator.DependencyRank(*canonical);
    auto existing = have.find(key);
    if (existing == have.end()) {
      inserts.push_back(Keyed{std::move(key), std::move(fingerprint), *std::move(canonical), rank});
    } else if (existing->second.fingerprint != fingerprint) {
      modifies.push_back(
          Keyed{std::move(key), std::move(fingerprint), *std::move(canonical), rank});
    } else {
      ++diff.unchanged;
    }
  }

  std::vector<Keyed> deletes;
  for (auto& [key, k] : have) {
    if (!wanted.contains(key)) deletes.push_back(std::move(k));
  }
  // Stable, deterministic order: by rank, then key.
  auto by_rank = [](const Keyed& a, const Keyed& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.key < b.key;
  };
  auto by_rank_desc = [](const Keyed& a, const Keyed& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.key < b.key;
  };
  std::sort(deletes.begin(), deletes.end(), by_rank_desc);
  std::stable_sort(modifies.begin(), modifies.end(), by_rank);
  std::stable_sort(inserts.begin(), inserts.end(), by_rank);
  for (auto& k : deletes) {
    diff.deletes.push_back(MakeUpdate(p4::v1::Update::DELETE, DeleteForm(k.entity)));
  }
  for (auto& k : modifies) {
    diff.modifies.push_back(MakeUpdate(p4::v1::Update::MODIFY, std::move(k.entity)));
  }
  for (auto& k : inserts) {
    diff.inserts.push_back(MakeUpdate(p4::v1::Update::INSERT, std::move(k.entity)));
  }
  return diff;
}

}  // namespace inac::southbound
