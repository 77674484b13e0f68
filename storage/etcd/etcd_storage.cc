// EtcdStorage (storage/etcd/etcd_storage.h): the reads, the write path (leader fence, counters,
// commit), topology, events, the snapshot, and the store ports that forward to EtcdStorage::Impl
// (storage/etcd/etcd_storage_impl.h). The job store is etcd_jobs.cc, the codecs etcd_codec.cc.
#include "storage/etcd/etcd_storage.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/status.h"
#include "storage/etcd/etcd_storage_impl.h"
#include "storage/store_rules.h"

namespace inac::storage::etcd {

using etcdserverpb::Compare;
using etcdserverpb::RangeRequest;
using etcdserverpb::TxnRequest;
using internal::AddCompareMod;
using internal::AddDelete;
using internal::AddPut;
using internal::DecodeEvent;
using internal::DecodeTopology;
using internal::EncodeEvent;
using Json = core::Json;

// --- reads and the write path

// One key (serializable); nullopt when absent. `revision` > 0: at that revision.
absl::StatusOr<std::optional<EtcdStorage::Impl::Kv>> EtcdStorage::Impl::GetKey(
    const std::string& key, int64_t revision, bool serializable) {
  RangeRequest r;
  r.set_key(key);
  r.set_serializable(serializable);
  r.set_revision(revision);
  INAC_ASSIGN_OR_RETURN(auto response, client_->Range(r));
  if (response.kvs_size() == 0) return std::optional<Kv>();
  return std::optional<Kv>(Kv{response.kvs(0).value(), response.kvs(0).mod_revision()});
}

// Every kv of [from, end) in key order, read in pages at one revision (`*revision` 0: the
// newest, then set). `visit` returns false to stop.
absl::Status EtcdStorage::Impl::Scan(const std::string& from, const std::string& end,
                                     int64_t* revision,
                                     const std::function<bool(const mvccpb::KeyValue&)>& visit,
                                     bool keys_only) {
  std::string key = from;
  while (true) {
    RangeRequest r;
    r.set_key(key);
    r.set_range_end(end);
    r.set_serializable(true);
    r.set_limit(500);
    r.set_keys_only(keys_only);
    r.set_revision(*revision);
    INAC_ASSIGN_OR_RETURN(auto response, client_->Range(r));
    if (*revision == 0) *revision = response.header().revision();
    for (const auto& kv : response.kvs()) {
      if (!visit(kv)) return absl::OkStatus();
    }
    if (!response.more() || response.kvs_size() == 0) return absl::OkStatus();
    key = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
  }
}

absl::Status EtcdStorage::Impl::LoadCounters() {
  if (counters_loaded_) return absl::OkStatus();
  for (auto [key, counter] : {std::pair{JobSeqKey(), &job_seq_}, {EventSeqKey(), &event_seq_}}) {
    INAC_ASSIGN_OR_RETURN(auto kv, GetKey(key, 0, /*serializable=*/false));
    *counter = Counter{};
    if (kv) {
      if (!absl::SimpleAtoi(kv->value, &counter->value)) {
        return absl::DataLossError(absl::StrCat("stored counter ", key, " is not a number"));
      }
      counter->mod_revision = kv->mod_revision;
    }
  }
  counters_loaded_ = true;
  return absl::OkStatus();
}

// Adds the leader fence to `txn` and a failure read of the leader key (the first failure
// operation: Commit finds it there). Unavailable when this node is not the leader.
absl::Status EtcdStorage::Impl::Fence(TxnRequest* txn) {
  if (!o_.leader_token) return absl::OkStatus();
  std::optional<int64_t> token = o_.leader_token();
  if (!token) return absl::UnavailableError("not the leader: this controller cannot write");
  auto* c = txn->add_compare();
  c->set_key(o_.leader_key);
  c->set_target(Compare::CREATE);
  c->set_result(Compare::EQUAL);
  c->set_create_revision(*token);
  txn->add_failure()->mutable_request_range()->set_key(o_.leader_key);
  return absl::OkStatus();
}

// Appends the puts of `events` (job_id defaulting to `default_job`) and of the event counter,
// with its compare.
void EtcdStorage::Impl::AddEvents(TxnRequest* txn, const std::vector<core::Event>& events,
                                  std::optional<core::JobId> default_job, int64_t* new_event_seq) {
  *new_event_seq = event_seq_.value;
  if (events.empty()) return;
  AddCompareMod(txn, EventSeqKey(), event_seq_.mod_revision);
  for (core::Event e : events) {
    e.seq = ++*new_event_seq;
    if (!e.job_id) e.job_id = default_job;
    AddPut(txn, EventKey(e.seq), EncodeEvent(e));
  }
  AddPut(txn, EventSeqKey(), absl::StrCat(*new_event_seq));
}

// Commits `txn`. Conflict: a compare other than the fence failed (the caller re-reads and
// retries); `failed`, when given, then receives etcd's answer. Unavailable: not the leader any
// more, or the outcome is unknown.
absl::StatusOr<EtcdStorage::Impl::Outcome> EtcdStorage::Impl::Commit(
    TxnRequest& txn, bool job_seq_used, int64_t new_job_seq, bool event_seq_used,
    int64_t new_event_seq, int64_t* revision, etcdserverpb::TxnResponse* failed) {
  auto response = client_->Txn(txn);
  if (!response.ok()) {
    counters_loaded_ = false;
    if (absl::IsUnavailable(response.status())) {
      return absl::UnavailableError(
          absl::StrCat("etcd did not confirm the write (it may or may not have committed): ",
                       response.status().message()));
    }
    return response.status();
  }
  if (!response->succeeded()) {
    counters_loaded_ = false;
    if (o_.leader_token) {
      std::optional<int64_t> token = o_.leader_token();
      const auto& range = response->responses(0).response_range();
      if (!token || range.kvs_size() == 0 || range.kvs(0).create_revision() != *token) {
        return absl::UnavailableError("not the leader: the leadership passed to another node");
      }
    }
    if (failed) *failed = *std::move(response);
    return Outcome::kConflict;
  }
  int64_t rev = response->header().revision();
  if (revision) *revision = rev;
  // Read-your-writes of ReadSnapshot: a put of a mirrored key is an event the mirror applies.
  bool mirrored = false;
  for (const auto& op : txn.success()) {
    if (op.has_request_put() && MirroredKey(op.request_put().key())) mirrored = true;
  }
  if (mirrored && rev > last_write_revision_.load()) last_write_revision_ = rev;  // under write_mu_
  if (job_seq_used) job_seq_ = Counter{new_job_seq, rev};
  if (event_seq_used && new_event_seq != event_seq_.value) event_seq_ = Counter{new_event_seq, rev};
  return Outcome::kCommitted;
}

// --- topology

absl::StatusOr<std::optional<core::TopologyRecord>> EtcdStorage::Impl::GetTopology(
    int64_t revision, int64_t* read_revision) {
  RangeRequest r;
  r.set_key(TopologyKey());
  r.set_serializable(true);
  r.set_revision(revision);
  INAC_ASSIGN_OR_RETURN(auto response, client_->Range(r));
  if (read_revision) *read_revision = response.header().revision();
  if (response.kvs_size() == 0) return std::optional<core::TopologyRecord>();
  INAC_ASSIGN_OR_RETURN(core::TopologyRecord record, DecodeTopology(response.kvs(0).value()));
  return std::optional<core::TopologyRecord>(std::move(record));
}

absl::StatusOr<int64_t> EtcdStorage::Impl::PutTopology(const core::Topology& topology,
                                                       int64_t now_ms,
                                                       std::optional<int64_t> expected_version,
                                                       const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  absl::MutexLock l(&write_mu_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    INAC_ASSIGN_OR_RETURN(auto kv, GetKey(TopologyKey(), 0, attempt == 0));
    int64_t current = 0;
    if (kv) {
      INAC_ASSIGN_OR_RETURN(core::TopologyRecord record, DecodeTopology(kv->value));
      current = record.version;
    }
    if (expected_version && *expected_version != current) {
      return absl::FailedPreconditionError(
          absl::StrCat("topology version is ", current, ", not the expected ", *expected_version));
    }
    INAC_RETURN_IF_ERROR(LoadCounters());
    TxnRequest txn;
    INAC_RETURN_IF_ERROR(Fence(&txn));
    AddCompareMod(&txn, TopologyKey(), kv ? kv->mod_revision : 0);
    Json doc = {{"version", current + 1},
                {"updated_ms", now_ms},
                {"topology", core::TopologyToJson(topology)}};
    AddPut(&txn, TopologyKey(), doc.dump());
    int64_t new_event_seq = 0;
    AddEvents(&txn, events, std::nullopt, &new_event_seq);
    INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, !events.empty(), new_event_seq));
    if (outcome == Outcome::kCommitted) return current + 1;
  }
  return TooManyConflicts();
}

// --- events

absl::StatusOr<int64_t> EtcdStorage::Impl::AppendEvents(const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  absl::MutexLock l(&write_mu_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    INAC_RETURN_IF_ERROR(LoadCounters());
    TxnRequest txn;
    INAC_RETURN_IF_ERROR(Fence(&txn));
    int64_t new_event_seq = 0;
    AddEvents(&txn, events, std::nullopt, &new_event_seq);
    INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, true, new_event_seq));
    if (outcome == Outcome::kCommitted) return new_event_seq;
  }
  return TooManyConflicts();
}

absl::StatusOr<std::vector<core::Event>> EtcdStorage::Impl::ListEvents(
    const core::EventFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateEventFilter(filter));
  std::vector<core::Event> out;
  absl::Status decode = absl::OkStatus();
  int64_t revision = 0;
  INAC_RETURN_IF_ERROR(Scan(EventKey(filter.after_seq + 1), PrefixEnd(EventsPrefix()), &revision,
                            [&](const mvccpb::KeyValue& kv) {
                              auto e = DecodeEvent(kv.value());
                              if (!e.ok()) {
                                decode = e.status();
                                return false;
                              }
                              if (filter.job_id && e->job_id != filter.job_id) return true;
                              if (filter.kind && e->kind != *filter.kind) return true;
                              out.push_back(*std::move(e));
                              return static_cast<int64_t>(out.size()) < filter.limit;
                            }));
  INAC_RETURN_IF_ERROR(decode);
  return out;
}

absl::StatusOr<int64_t> EtcdStorage::Impl::LastSeq(int64_t revision) {
  INAC_ASSIGN_OR_RETURN(auto kv, GetKey(EventSeqKey(), revision));
  int64_t seq = 0;
  if (kv && !absl::SimpleAtoi(kv->value, &seq)) {
    return absl::DataLossError("stored event counter is not a number");
  }
  return seq;
}

absl::StatusOr<int64_t> EtcdStorage::Impl::TrimEvents(int64_t keep_last) {
  if (keep_last < 0) return absl::InvalidArgumentError("keep_last must not be negative");
  absl::MutexLock l(&write_mu_);
  RangeRequest count;
  count.set_key(EventsPrefix());
  count.set_range_end(PrefixEnd(EventsPrefix()));
  count.set_count_only(true);
  INAC_ASSIGN_OR_RETURN(auto counted, client_->Range(count));
  int64_t excess = counted.count() - keep_last;
  if (excess <= 0) return 0;
  // The key of the newest event to delete.
  RangeRequest last;
  last.set_key(EventsPrefix());
  last.set_range_end(PrefixEnd(EventsPrefix()));
  last.set_keys_only(true);
  last.set_limit(excess);
  last.set_revision(counted.header().revision());
  INAC_ASSIGN_OR_RETURN(auto keys, client_->Range(last));
  if (keys.kvs_size() == 0) return 0;
  TxnRequest txn;
  INAC_RETURN_IF_ERROR(Fence(&txn));
  AddDelete(&txn, EventsPrefix(), keys.kvs(keys.kvs_size() - 1).key() + std::string(1, '\0'));
  INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, false, 0));
  if (outcome != Outcome::kCommitted) return absl::AbortedError("trim conflicted");
  return static_cast<int64_t>(keys.kvs_size());
}

// --- snapshot

// The etcd part of the snapshot, every range read directly at one revision (the mirror's
// fallback); ReadSnapshot (etcd_plans.cc) adds the local part.
absl::StatusOr<core::Snapshot> EtcdStorage::Impl::DirectSnapshot() {
  core::Snapshot snap;
  int64_t revision = 0;
  INAC_ASSIGN_OR_RETURN(snap.topology, GetTopology(0, &revision));
  INAC_ASSIGN_OR_RETURN(std::vector<core::Job> jobs, AllJobs(&revision));
  for (core::Job& job : jobs) {
    if (!core::IsTerminal(job.state)) snap.jobs.push_back(std::move(job));
  }
  INAC_ASSIGN_OR_RETURN(snap.last_event_seq, LastSeq(revision));
  return snap;
}

absl::Status EtcdStorage::Impl::Health() {
  INAC_RETURN_IF_ERROR(local_->Health());
  auto kv = GetKey(JobSeqKey());
  if (!kv.ok()) {
    return absl::UnavailableError(absl::StrCat("etcd cannot be read: ", kv.status().message()));
  }
  return absl::OkStatus();
}

namespace {

class TopologyStoreImpl final : public core::TopologyStore {
 public:
  explicit TopologyStoreImpl(EtcdStorage::Impl* impl) : impl_(impl) {}
  absl::StatusOr<std::optional<core::TopologyRecord>> Get() override {
    return impl_->GetTopology();
  }
  absl::StatusOr<int64_t> Put(const core::Topology& topology, int64_t now_ms,
                              std::optional<int64_t> expected_version,
                              const std::vector<core::Event>& events) override {
    return impl_->PutTopology(topology, now_ms, expected_version, events);
  }

 private:
  EtcdStorage::Impl* impl_;
};

class JobStoreImpl final : public core::JobStore {
 public:
  explicit JobStoreImpl(EtcdStorage::Impl* impl) : impl_(impl) {}
  absl::StatusOr<core::CreateJobResult> Create(
      const core::JobSpec& spec, int64_t now_ms,
      const std::optional<core::IdempotencyKey>& idempotency,
      const std::vector<core::Event>& events) override {
    return impl_->CreateJob(spec, now_ms, idempotency, events);
  }
  absl::StatusOr<core::Job> Get(core::JobId id) override { return impl_->GetJob(id); }
  absl::StatusOr<core::Job> Update(core::JobId id, const core::JobUpdate& update, int64_t now_ms,
                                   const std::vector<core::Event>& events) override {
    INAC_ASSIGN_OR_RETURN(auto jobs, impl_->UpdateJobs({{id, update}}, now_ms, events, id));
    return jobs.at(id);
  }
  absl::Status UpdateMany(const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates,
                          int64_t now_ms, const std::vector<core::Event>& events) override {
    return impl_->UpdateJobs(updates, now_ms, events, std::nullopt).status();
  }
  absl::StatusOr<core::JobPage> List(const core::JobFilter& filter) override {
    return impl_->ListJobs(filter);
  }
  absl::StatusOr<std::map<core::JobState, int64_t>> CountByState() override {
    int64_t revision = 0;
    INAC_ASSIGN_OR_RETURN(std::vector<core::Job> jobs, impl_->AllJobs(&revision));
    std::map<core::JobState, int64_t> counts;
    for (const core::Job& job : jobs) ++counts[job.state];
    return counts;
  }
  absl::StatusOr<int64_t> PruneFinished(int64_t older_than_ms, int64_t max_rows) override {
    return impl_->PruneFinished(older_than_ms, max_rows);
  }

 private:
  EtcdStorage::Impl* impl_;
};

// Plans and intents are local; Save also replicates the plan to etcd and Latest imports a newer
// replicated plan (etcd_plans.cc); a save's events go to etcd after the local commit.
class PlanStoreImpl final : public core::PlanStore {
 public:
  explicit PlanStoreImpl(EtcdStorage::Impl* impl) : impl_(impl) {}
  absl::StatusOr<int64_t> Save(const core::Plan& plan,
                               const std::vector<core::SwitchIntent>& intents, int64_t now_ms,
                               const std::vector<core::Event>& events) override {
    return impl_->SavePlan(plan, intents, now_ms, events);
  }
  absl::StatusOr<std::optional<core::PlanRecord>> Latest() override { return impl_->LatestPlan(); }
  absl::StatusOr<core::PlanRecord> Get(int64_t version) override {
    return impl_->local().plans().Get(version);
  }
  absl::StatusOr<std::vector<core::SwitchIntent>> Intents(int64_t version) override {
    return impl_->local().plans().Intents(version);
  }
  absl::StatusOr<int64_t> Prune(int64_t keep_last) override {
    return impl_->local().plans().Prune(keep_last);
  }

 private:
  EtcdStorage::Impl* impl_;
};

class SwitchStateStoreImpl final : public core::SwitchStateStore {
 public:
  explicit SwitchStateStoreImpl(EtcdStorage::Impl* impl) : impl_(impl) {}
  absl::StatusOr<std::optional<core::SwitchState>> Get(const std::string& switch_id) override {
    return impl_->local().switch_states().Get(switch_id);
  }
  absl::StatusOr<std::vector<core::SwitchState>> List() override {
    return impl_->local().switch_states().List();
  }
  absl::Status Put(const core::SwitchState& state,
                   const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    INAC_RETURN_IF_ERROR(impl_->local().switch_states().Put(state, {}));
    if (!events.empty()) INAC_RETURN_IF_ERROR(impl_->AppendEvents(events).status());
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> MaxElectionId() override {
    return impl_->local().switch_states().MaxElectionId();
  }

 private:
  EtcdStorage::Impl* impl_;
};

class EventLogImpl final : public core::EventLog {
 public:
  explicit EventLogImpl(EtcdStorage::Impl* impl) : impl_(impl) {}
  absl::StatusOr<int64_t> Append(const core::Event& event) override {
    return impl_->AppendEvents({event});
  }
  absl::StatusOr<std::vector<core::Event>> List(const core::EventFilter& filter) override {
    return impl_->ListEvents(filter);
  }
  absl::StatusOr<int64_t> LastSeq() override { return impl_->LastSeq(); }
  absl::StatusOr<int64_t> Trim(int64_t keep_last) override { return impl_->TrimEvents(keep_last); }

 private:
  EtcdStorage::Impl* impl_;
};

}  // namespace

struct EtcdStorage::Stores {
  explicit Stores(EtcdStorage::Impl* impl)
      : topology(impl), jobs(impl), plans(impl), switches(impl), events(impl) {}
  TopologyStoreImpl topology;
  JobStoreImpl jobs;
  PlanStoreImpl plans;
  SwitchStateStoreImpl switches;
  EventLogImpl events;
};

EtcdStorage::EtcdStorage(EtcdClient* client, std::unique_ptr<core::Storage> local,
                         EtcdStorageOptions options)
    : impl_(std::make_unique<Impl>(client, std::move(local), std::move(options))),
      stores_(std::make_unique<Stores>(impl_.get())) {}

EtcdStorage::~EtcdStorage() = default;

core::TopologyStore& EtcdStorage::topology() { return stores_->topology; }
core::JobStore& EtcdStorage::jobs() { return stores_->jobs; }
core::PlanStore& EtcdStorage::plans() { return stores_->plans; }
core::SwitchStateStore& EtcdStorage::switch_states() { return stores_->switches; }
core::EventLog& EtcdStorage::events() { return stores_->events; }
core::AuditLog& EtcdStorage::audit() { return impl_->local().audit(); }
absl::StatusOr<core::Snapshot> EtcdStorage::ReadSnapshot() { return impl_->ReadSnapshot(); }
absl::Status EtcdStorage::Health() { return impl_->Health(); }

}  // namespace inac::storage::etcd
