// The warm standby of EtcdStorage (storage/etcd/etcd_storage.h, docs/ha.md "Warm standby"): the
// mirror of <prefix>jobs/, meta/ and plan/, the snapshot served from it, and the replicated plan.
//
// The replicated plan is the leader's latest plan, written by PlanStore::Save:
//   <prefix>plan/jobs/<id, 20 digits>  one job's plan (core::JobPlanToJson), written only when it
//                                      differs from the value the key holds
//   <prefix>plan/meta                  {"format", "version", "created_ms", "plan" (the plan
//                                      without its jobs), "jobs": [[id, stamp], ...] in plan
//                                      order}, written LAST
// in transactions of at most max_txn_ops operations and kTxnBytes bytes. A stamp is
// internal::PlanStamp of the job key's value: a reader accepts the plan only when every job meta
// lists has a key whose value has that stamp (a crash between transactions leaves keys that do
// not match), and then imports it into the local store with its version and the intents
// core::DeriveSwitchIntents derives from it.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/status.h"
#include "spdlog/spdlog.h"
#include "storage/etcd/etcd_storage_impl.h"
#include "storage/store_rules.h"

namespace inac::storage::etcd {

using etcdserverpb::RangeRequest;
using etcdserverpb::TxnRequest;
using internal::AddDelete;
using internal::AddPut;
using internal::DecodeJob;
using internal::DecodeTopology;
using internal::ParseStored;
using internal::PlanStamp;
using Json = core::Json;

namespace {

constexpr int kPlanFormat = 1;
// The bytes of one plan transaction: well under etcd's default request limit (1.5 MiB).
constexpr size_t kTxnBytes = 512 * 1024;

// The id of a key "<prefix><id, 20 digits>"; 0 when the suffix is not a number.
core::JobId IdOf(const std::string& key, size_t prefix_size) {
  core::JobId id = 0;
  if (!absl::SimpleAtoi(key.substr(prefix_size), &id)) return 0;
  return id;
}

// The parsed plan meta.
struct Meta {
  int64_t version = 0;
  int64_t created_ms = 0;
  core::Plan plan;  // without its jobs
  std::vector<std::pair<core::JobId, std::string>> jobs;
};

absl::StatusOr<Meta> DecodeMeta(const std::string& text) {
  INAC_ASSIGN_OR_RETURN(Json j, ParseStored(text, "plan meta"));
  Meta meta;
  try {
    if (j.at("format").get<int>() != kPlanFormat) {
      return absl::DataLossError("stored plan meta has an unknown format");
    }
    meta.version = j.at("version").get<int64_t>();
    meta.created_ms = j.at("created_ms").get<int64_t>();
    for (const Json& e : j.at("jobs")) {
      meta.jobs.emplace_back(e.at(0).get<core::JobId>(), e.at(1).get<std::string>());
    }
  } catch (const std::exception& ex) {
    return absl::DataLossError(absl::StrCat("stored plan meta does not decode: ", ex.what()));
  }
  auto plan = core::PlanFromJson(j["plan"]);
  if (!plan.ok()) return absl::DataLossError(plan.status().message());
  meta.plan = *std::move(plan);
  meta.plan.version = meta.version;
  return meta;
}

std::string EncodeMeta(const core::Plan& plan, int64_t created_ms,
                       const std::vector<std::pair<core::JobId, std::string>>& stamps) {
  core::Plan head = plan;
  head.jobs.clear();
  Json jobs = Json::array();
  for (const auto& [id, stamp] : stamps) jobs.push_back(Json::array({id, stamp}));
  return Json({{"format", kPlanFormat},
               {"version", plan.version},
               {"created_ms", created_ms},
               {"plan", core::PlanToJson(head)},
               {"jobs", std::move(jobs)}})
      .dump();
}

}  // namespace

EtcdStorage::Impl::Impl(EtcdClient* client, std::unique_ptr<core::Storage> local,
                        EtcdStorageOptions options)
    : client_(client), local_(std::move(local)), o_(std::move(options)) {
  KvMirrorOptions m;
  m.key = o_.prefix;
  m.range_end = PrefixEnd(o_.prefix);
  m.include = {JobsPrefix(), o_.prefix + "meta/", o_.prefix + "plan/"};
  mirror_ = std::make_unique<KvMirror>(client_, std::move(m));
}

bool EtcdStorage::Impl::MirroredKey(const std::string& key) const {
  for (const char* part : {"jobs/", "meta/", "plan/"}) {
    if (key.size() > o_.prefix.size() && key.compare(0, o_.prefix.size(), o_.prefix) == 0 &&
        key.compare(o_.prefix.size(), strlen(part), part) == 0) {
      return true;
    }
  }
  return false;
}

EtcdStorage::Impl::~Impl() { mirror_->Stop(); }

// --- the snapshot

absl::StatusOr<std::optional<core::Snapshot>> EtcdStorage::Impl::MirrorSnapshot() {
  // Read-your-writes: the mirror must hold this node's last committed write (and have listed).
  // After a timeout, later passes read directly without waiting until the mirror moves again.
  int64_t want = std::max<int64_t>(last_write_revision_.load(), 1);
  // A new leader reads nothing older than its own election: everything its predecessor wrote
  // precedes the leader key's create revision (the token), and the epoch the new leader stores
  // right after (server/cluster_node.h) is a key of the mirrored meta/, so the mirror does reach
  // it. Without this, a first pass right after the election can read a mirror still behind the
  // old leader's last plan, find it half applied, and plan anew.
  if (o_.leader_token) {
    if (std::optional<int64_t> token = o_.leader_token()) want = std::max(want, *token);
  }
  const int64_t stalled = mirror_stalled_at_.load();
  if (stalled >= 0 && mirror_->applied_revision() == stalled &&
      mirror_->applied_revision() < want) {
    return std::optional<core::Snapshot>();
  }
  if (!mirror_->WaitForApplied(want, kReadYourWritesTimeout)) {
    mirror_stalled_at_ = mirror_->applied_revision();
    return std::optional<core::Snapshot>();
  }
  mirror_stalled_at_ = -1;
  absl::MutexLock l(&snapshot_mu_);
  struct Raw {
    core::JobId id;
    int64_t mod_revision;
    std::string value;
  };
  std::vector<std::pair<core::JobId, int64_t>> ids;  // every job key, by id
  std::vector<Raw> raw;                              // the ones to decode
  std::optional<Raw> topology;
  std::string event_seq;
  const std::string jobs_prefix = JobsPrefix();
  const std::string jobs_end = PrefixEnd(jobs_prefix);
  mirror_->Read([&](const KvMirror::Map& state, int64_t) {
    for (auto it = state.lower_bound(jobs_prefix); it != state.end() && it->first < jobs_end;
         ++it) {
      core::JobId id = IdOf(it->first, jobs_prefix.size());
      const int64_t mod = it->second.mod_revision();
      ids.emplace_back(id, mod);
      auto cached = job_cache_.find(id);
      if (cached == job_cache_.end() || cached->second.mod_revision != mod) {
        raw.push_back(Raw{id, mod, it->second.value()});
      }
    }
    if (auto it = state.find(TopologyKey()); it != state.end()) {
      topology = Raw{0, it->second.mod_revision(), ""};
      if (it->second.mod_revision() != topology_mod_) topology->value = it->second.value();
    }
    if (auto it = state.find(EventSeqKey()); it != state.end()) event_seq = it->second.value();
  });
  for (Raw& r : raw) {
    INAC_ASSIGN_OR_RETURN(core::Job job, DecodeJob(r.value));
    job_cache_[r.id] = CachedJob{r.mod_revision, std::move(job)};
  }
  core::Snapshot snap;
  std::map<core::JobId, CachedJob> kept;
  for (const auto& [id, mod] : ids) {
    auto node = job_cache_.extract(id);
    if (node.empty()) continue;  // a repeated id (keys that are not "<prefix>jobs/<id>")
    if (!core::IsTerminal(node.mapped().job.state)) snap.jobs.push_back(node.mapped().job);
    kept.insert(std::move(node));
  }
  job_cache_ = std::move(kept);  // forgets the jobs that are gone
  if (!topology) {
    topology_mod_ = 0;
    topology_cache_.reset();
  } else if (topology->mod_revision != topology_mod_) {
    INAC_ASSIGN_OR_RETURN(core::TopologyRecord record, DecodeTopology(topology->value));
    topology_cache_ = std::move(record);
    topology_mod_ = topology->mod_revision;
  }
  snap.topology = topology_cache_;
  if (!event_seq.empty() && !absl::SimpleAtoi(event_seq, &snap.last_event_seq)) {
    return absl::DataLossError("stored event counter is not a number");
  }
  return std::optional<core::Snapshot>(std::move(snap));
}

absl::StatusOr<core::Snapshot> EtcdStorage::Impl::ReadSnapshot() {
  INAC_ASSIGN_OR_RETURN(std::optional<core::Snapshot> mirrored, MirrorSnapshot());
  core::Snapshot snap;
  if (mirrored) {
    snap = *std::move(mirrored);
  } else {
    INAC_ASSIGN_OR_RETURN(snap, DirectSnapshot());
  }
  INAC_ASSIGN_OR_RETURN(core::Snapshot local, local_->ReadSnapshot());
  const int64_t local_version = local.plan ? local.plan->plan.version : 0;
  if (ReplicatedVersion() > local_version) {
    absl::MutexLock l(&plan_mu_);
    INAC_ASSIGN_OR_RETURN(bool imported, ImportIfNewer(local_version));
    (void)imported;
    // Read again whether or not this call imported: another reader (Latest) may have imported
    // the same plan a moment before, and the local snapshot above predates it.
    INAC_ASSIGN_OR_RETURN(local, local_->ReadSnapshot());
  }
  snap.plan = std::move(local.plan);
  snap.intents = std::move(local.intents);
  snap.switch_states = std::move(local.switch_states);
  return snap;
}

// --- the replicated plan

int64_t EtcdStorage::Impl::ReplicatedVersion() {
  int64_t mod = 0;
  std::string value;
  const std::string key = PlanMetaKey();
  absl::MutexLock l(&meta_mu_);
  const int64_t known = meta_mod_;
  mirror_->Read([&](const KvMirror::Map& state, int64_t) {
    auto it = state.find(key);
    if (it == state.end()) return;
    mod = it->second.mod_revision();
    if (mod != known) value = it->second.value();
  });
  if (mod == meta_mod_) return meta_version_;
  meta_mod_ = mod;
  meta_version_ = 0;
  if (mod != 0) {
    auto meta = DecodeMeta(value);
    if (meta.ok()) meta_version_ = meta->version;
  }
  return meta_version_;
}

absl::StatusOr<std::optional<EtcdStorage::Impl::Replicated>> EtcdStorage::Impl::ReadReplicated(
    int64_t skip_meta_mod, int64_t* meta_mod) {
  *meta_mod = 0;
  std::string meta_value;
  std::map<core::JobId, std::string> values;
  std::optional<std::string> topology;
  const std::string meta_key = PlanMetaKey();
  const std::string jobs_prefix = PlanJobsPrefix();
  const std::string jobs_end = PrefixEnd(jobs_prefix);
  mirror_->Read([&](const KvMirror::Map& state, int64_t) {
    auto meta = state.find(meta_key);
    if (meta == state.end()) return;
    *meta_mod = meta->second.mod_revision();
    if (*meta_mod == skip_meta_mod) return;
    meta_value = meta->second.value();
    for (auto it = state.lower_bound(jobs_prefix); it != state.end() && it->first < jobs_end;
         ++it) {
      values[IdOf(it->first, jobs_prefix.size())] = it->second.value();
    }
    if (auto it = state.find(TopologyKey()); it != state.end()) topology = it->second.value();
  });
  if (meta_value.empty()) return std::optional<Replicated>();
  auto meta = DecodeMeta(meta_value);
  if (!meta.ok()) {  // treated as absent (a foreign format)
    spdlog::warn("event=replicated_plan_unreadable error=\"{}\"", meta.status().ToString());
    return std::optional<Replicated>();
  }
  Replicated out;
  out.plan = std::move(meta->plan);
  out.created_ms = meta->created_ms;
  for (const auto& [id, stamp] : meta->jobs) {
    auto it = values.find(id);
    if (it == values.end() || PlanStamp(it->second) != stamp) {
      // Half written: not the plan meta describes.
      spdlog::info("event=replicated_plan_incomplete version={} job={} reason={}", out.plan.version,
                   id, it == values.end() ? "missing" : "stamp");
      return std::optional<Replicated>();
    }
    auto parsed = ParseStored(it->second, "job plan");
    auto job = parsed.ok() ? core::JobPlanFromJson(*parsed) : parsed.status();
    if (!job.ok() || job->job_id != id) {
      spdlog::warn("event=replicated_plan_unreadable job={} error=\"{}\"", id,
                   job.ok() ? "another job's plan" : job.status().ToString());
      return std::optional<Replicated>();
    }
    out.plan.jobs.push_back(*std::move(job));
  }
  if (topology) {
    INAC_ASSIGN_OR_RETURN(core::TopologyRecord record, DecodeTopology(*topology));
    out.topology = std::move(record);
  }
  return std::optional<Replicated>(std::move(out));
}

absl::StatusOr<bool> EtcdStorage::Impl::ImportIfNewer(int64_t local_version) {
  // The caller's local version may predate another import (plan_mu_ serialises them).
  INAC_ASSIGN_OR_RETURN(std::optional<core::PlanRecord> current, local_->plans().Latest());
  if (current) local_version = std::max(local_version, current->plan.version);
  if (ReplicatedVersion() <= local_version) return false;
  int64_t meta_mod = 0;
  INAC_ASSIGN_OR_RETURN(std::optional<Replicated> replicated,
                        ReadReplicated(rejected_meta_mod_, &meta_mod));
  if (!replicated) {
    // Absent or inconsistent: not read again until the meta changes (it is written last).
    rejected_meta_mod_ = meta_mod;
    return false;
  }
  if (replicated->plan.version <= local_version || !replicated->topology) {
    spdlog::info("event=replicated_plan_not_imported version={} local_version={} topology={}",
                 replicated->plan.version, local_version, replicated->topology.has_value());
    return false;
  }
  std::vector<core::SwitchIntent> intents =
      core::DeriveSwitchIntents(replicated->topology->topology, replicated->plan);
  auto saved = local_->plans().Save(replicated->plan, intents, replicated->created_ms, {});
  if (absl::IsFailedPrecondition(saved.status())) {  // a newer local plan meanwhile
    spdlog::info("event=replicated_plan_not_imported version={} error=\"{}\"",
                 replicated->plan.version, saved.status().ToString());
    return false;
  }
  INAC_RETURN_IF_ERROR(saved.status());
  spdlog::info("event=replicated_plan_imported version={} jobs={}", replicated->plan.version,
               replicated->plan.jobs.size());
  return true;
}

absl::StatusOr<std::optional<core::PlanRecord>> EtcdStorage::Impl::LatestPlan() {
  INAC_ASSIGN_OR_RETURN(std::optional<core::PlanRecord> latest, local_->plans().Latest());
  const int64_t local_version = latest ? latest->plan.version : 0;
  if (ReplicatedVersion() <= local_version) return latest;
  absl::MutexLock l(&plan_mu_);
  INAC_ASSIGN_OR_RETURN(bool imported, ImportIfNewer(local_version));
  (void)imported;  // read again either way: another reader may have imported meanwhile
  return local_->plans().Latest();
}

absl::StatusOr<int64_t> EtcdStorage::Impl::SavePlan(const core::Plan& plan,
                                                    const std::vector<core::SwitchIntent>& intents,
                                                    int64_t now_ms,
                                                    const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  INAC_RETURN_IF_ERROR(ValidateIntents(intents));
  if (plan.version < 0) return absl::InvalidArgumentError("plan version must not be negative");
  absl::MutexLock l(&plan_mu_);
  // The replicated plan as etcd holds it now (a quorum read), and the mirror up to there: the
  // writes below are computed against it.
  RangeRequest r;
  r.set_key(PlanMetaKey());
  INAC_ASSIGN_OR_RETURN(auto response, client_->Range(r));
  int64_t replicated_version = 0;
  int64_t meta_mod = 1;
  if (response.kvs_size() > 0) {
    meta_mod = response.kvs(0).mod_revision();
    auto meta = DecodeMeta(response.kvs(0).value());
    if (meta.ok()) replicated_version = meta->version;
  }
  // The mirror up to the meta's write, so up to every key of the plan it describes. Keys of a
  // write that crashed after that meta may be missed; a stale view only costs puts, or a plan
  // readers reject (its stamps). Not KvMirror::WaitFor: no progress request (kv_mirror.h).
  const bool fresh = mirror_->WaitForApplied(meta_mod, kReadYourWritesTimeout);
  INAC_ASSIGN_OR_RETURN(std::optional<core::PlanRecord> latest, local_->plans().Latest());
  const int64_t local_version = latest ? latest->plan.version : 0;
  core::Plan stored = plan;
  stored.version =
      plan.version > 0 ? plan.version : std::max(local_version, replicated_version) + 1;
  if (stored.version <= local_version) {
    return absl::FailedPreconditionError(absl::StrCat("plan version ", stored.version,
                                                      " is not newer than the latest saved plan ",
                                                      local_version));
  }
  INAC_RETURN_IF_ERROR(Replicate(stored, now_ms, fresh));
  INAC_ASSIGN_OR_RETURN(int64_t version, local_->plans().Save(stored, intents, now_ms, {}));
  if (!events.empty()) INAC_RETURN_IF_ERROR(AppendEvents(events).status());
  return version;
}

absl::Status EtcdStorage::Impl::Replicate(const core::Plan& plan, int64_t now_ms, bool fresh) {
  // What the job keys hold now (nothing known when the mirror is not fresh: every key is put).
  std::map<core::JobId, std::string> current;
  const std::string jobs_prefix = PlanJobsPrefix();
  const std::string jobs_end = PrefixEnd(jobs_prefix);
  mirror_->Read([&](const KvMirror::Map& state, int64_t) {
    for (auto it = state.lower_bound(jobs_prefix); it != state.end() && it->first < jobs_end;
         ++it) {
      current[IdOf(it->first, jobs_prefix.size())] = it->second.value();
    }
  });
  struct Op {
    std::string key;
    std::optional<std::string> value;  // nullopt: delete
  };
  std::vector<Op> ops;
  std::vector<std::pair<core::JobId, std::string>> stamps;
  std::set<core::JobId> in_plan;
  for (const core::JobPlan& job : plan.jobs) {
    std::string value = core::JobPlanToJson(job).dump();
    stamps.emplace_back(job.job_id, PlanStamp(value));
    in_plan.insert(job.job_id);
    auto it = current.find(job.job_id);
    if (fresh && it != current.end() && it->second == value) continue;
    ops.push_back(Op{PlanJobKey(job.job_id), std::move(value)});
  }
  for (const auto& [id, value] : current) {
    if (!in_plan.count(id)) ops.push_back(Op{PlanJobKey(id), std::nullopt});
  }
  ops.push_back(Op{PlanMetaKey(), EncodeMeta(plan, now_ms, stamps)});  // last

  // write_mu_ per transaction, not for the whole plan: job submissions interleave.
  const size_t limit = static_cast<size_t>(std::max(1, o_.max_txn_ops));
  size_t start = 0;
  while (start < ops.size()) {
    TxnRequest txn;
    INAC_RETURN_IF_ERROR(Fence(&txn));
    size_t bytes = 0;
    size_t end = start;
    while (end < ops.size() && end - start < limit) {
      const size_t size = ops[end].key.size() + (ops[end].value ? ops[end].value->size() : 0);
      if (end > start && bytes + size > kTxnBytes) break;
      bytes += size;
      if (ops[end].value) {
        AddPut(&txn, ops[end].key, *ops[end].value);
      } else {
        AddDelete(&txn, ops[end].key);
      }
      ++end;
    }
    absl::MutexLock l(&write_mu_);
    INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, false, 0));
    if (outcome != Outcome::kCommitted) {
      return absl::AbortedError("the replicated plan write conflicted");
    }
    start = end;
  }
  return absl::OkStatus();
}

}  // namespace inac::storage::etcd
