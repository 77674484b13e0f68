// The job store of EtcdStorage (storage/etcd/etcd_storage_impl.h): jobs under <prefix>jobs/ with
// their idempotency keys (both directions) and the job counter, written through Fence and Commit;
// creations group-committed (CreateJob, CommitCreates).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/etcd/etcd_storage_impl.h"
#include "storage/store_rules.h"

namespace inac::storage::etcd {

using etcdserverpb::Compare;
using etcdserverpb::TxnRequest;
using internal::AddCompareMod;
using internal::AddDelete;
using internal::AddPut;
using internal::DecodeEvent;
using internal::DecodeJob;
using internal::ParseStored;
using Json = core::Json;

namespace {

// What etcd holds for an idempotency key: the job it was bound to and the body hash of that
// request; `job` is the job as stored (DataLoss when it does not decode or is gone). `stored`:
// DataLoss when the binding itself does not decode (the other fields are then unset).
struct Binding {
  absl::Status stored = absl::OkStatus();
  core::JobId job_id = 0;
  std::string body_hash;
  absl::StatusOr<core::Job> job = absl::UnknownError("not read");
};

// The result of a creation with `idem` whose key is bound as `b`, as JobStore::Create says: the
// bound job (created = false) for the same body, AlreadyExists for another.
absl::StatusOr<core::CreateJobResult> Resolve(const core::IdempotencyKey& idem, const Binding& b) {
  if (!b.stored.ok()) return b.stored;
  if (b.body_hash != idem.body_hash) {
    return absl::AlreadyExistsError(absl::StrCat("conflict: idempotency key \"", idem.key,
                                                 "\" was used for job ", b.job_id,
                                                 " with a different request body"));
  }
  if (!b.job.ok()) return b.job.status();
  return core::CreateJobResult{*b.job, false};
}

// The puts one creation adds to a transaction: its job, its idempotency key in both directions,
// its events. Its compare (the key) and its failure read (the key) are fewer than these.
int CreateOps(const std::optional<core::IdempotencyKey>& idem,
              const std::vector<core::Event>& events) {
  return 1 + (idem ? 2 : 0) + static_cast<int>(events.size());
}

// What a transaction of creations adds to each of its lists besides the creations' own: puts
// (the two counters), compares (fence, two counters), failure reads (leader key, two counters).
constexpr int kCreateTxnOverhead = 3;

}  // namespace

absl::StatusOr<core::CreateJobResult> EtcdStorage::Impl::CreateJob(
    const core::JobSpec& spec, int64_t now_ms, const std::optional<core::IdempotencyKey>& idem,
    const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  // Encoding throws on a string that is not UTF-8: find that out here, for this caller alone,
  // rather than in a transaction shared with others (the shared one encodes the same strings).
  try {
    core::Job probe;
    probe.spec = spec;
    (void)core::JobToJson(probe).dump();
    if (idem) (void)Json({{"body_hash", idem->body_hash}}).dump();
    for (const core::Event& e : events) (void)internal::EncodeEvent(e);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the job cannot be encoded: ", e.what()));
  }
  PendingCreate me{&spec, now_ms, &idem, &events, CreateOps(idem, events)};
  std::vector<PendingCreate*> batch;
  {
    absl::MutexLock l(&queue_mu_);
    queue_.push_back(&me);
    auto ready = [this, &me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
      return me.done || queue_.front() == &me;
    };
    queue_mu_.Await(absl::Condition(&ready));
    if (me.done) return std::move(me.result);
    // First in the queue: this caller commits the queued creations that fit in one
    // transaction (its own at least, however large), in arrival order.
    int ops = kCreateTxnOverhead;
    for (PendingCreate* p : queue_) {
      if (!batch.empty() && ops + p->ops > o_.max_txn_ops) break;
      ops += p->ops;
      batch.push_back(p);
    }
  }
  CommitCreates(batch);
  absl::MutexLock l(&queue_mu_);
  // The batch is the front of the queue: only its first caller pops, the others append.
  for (PendingCreate* p : batch) {
    queue_.pop_front();
    p->done = true;  // its caller may return (and free *p) once queue_mu_ is released
  }
  return std::move(me.result);
}

void EtcdStorage::Impl::CommitCreates(const std::vector<PendingCreate*>& batch) {
  absl::MutexLock l(&write_mu_);
  std::vector<PendingCreate*> pending = batch;
  auto fail_pending = [&pending](const absl::Status& status) {
    for (PendingCreate* p : pending) p->result = status;
  };
  // No exception may leave this function: the batch's callers wait for their results. CreateJob
  // checked that every creation encodes; this is the last line of defence.
  try {
    CommitPendingCreates(pending);
  } catch (const std::exception& e) {
    fail_pending(absl::InternalError(absl::StrCat("etcd: creating jobs failed: ", e.what())));
  }
}

void EtcdStorage::Impl::CommitPendingCreates(std::vector<PendingCreate*>& pending) {
  auto fail_pending = [&pending](const absl::Status& status) {
    for (PendingCreate* p : pending) p->result = status;
  };
  std::map<std::string, Binding> bound;  // idempotency keys known to be bound, by key
  for (int attempt = 0;; ++attempt) {
    // Creations whose key is known to be bound (in etcd, or by this batch's last commit) are
    // resolved against that binding, as if they had come after it.
    std::vector<PendingCreate*> open;
    for (PendingCreate* p : pending) {
      const std::optional<core::IdempotencyKey>& idem = *p->idem;
      auto it = idem ? bound.find(idem->key) : bound.end();
      if (it == bound.end()) {
        open.push_back(p);
      } else {
        p->result = Resolve(*idem, it->second);
      }
    }
    pending = std::move(open);
    if (pending.empty()) return;
    if (attempt >= kAttempts) return fail_pending(TooManyConflicts());
    if (absl::Status s = LoadCounters(); !s.ok()) return fail_pending(s);
    TxnRequest txn;
    if (absl::Status s = Fence(&txn); !s.ok()) return fail_pending(s);
    AddCompareMod(&txn, JobSeqKey(), job_seq_.mod_revision);
    core::JobId last_id = job_seq_.value;
    std::vector<std::pair<PendingCreate*, core::Job>> included;
    std::set<std::string> keys;  // the idempotency keys this transaction binds
    std::vector<core::Event> events;
    for (PendingCreate* p : pending) {
      const std::optional<core::IdempotencyKey>& idem = *p->idem;
      // A second creation with a key of this transaction waits for its outcome (next round).
      if (idem && !keys.insert(idem->key).second) continue;
      core::Job job;
      job.id = ++last_id;
      job.spec = *p->spec;
      job.created_ms = job.updated_ms = p->now_ms;
      AddPut(&txn, JobKey(job.id), core::JobToJson(job).dump());
      if (idem) {
        auto* c = txn.add_compare();
        c->set_key(IdemKey(idem->key));
        c->set_target(Compare::VERSION);
        c->set_result(Compare::EQUAL);
        c->set_version(0);
        AddPut(&txn, IdemKey(idem->key),
               Json({{"job_id", job.id}, {"body_hash", idem->body_hash}}).dump());
        AddPut(&txn, JobIdemKey(job.id), idem->key);
        // On a failed compare etcd answers with the key's binding: no read before the commit.
        txn.add_failure()->mutable_request_range()->set_key(IdemKey(idem->key));
      }
      for (core::Event e : *p->events) {
        if (!e.job_id) e.job_id = job.id;
        events.push_back(std::move(e));
      }
      included.emplace_back(p, std::move(job));
    }
    AddPut(&txn, JobSeqKey(), absl::StrCat(last_id));
    int64_t new_event_seq = 0;
    AddEvents(&txn, events, std::nullopt, &new_event_seq);
    // ... and with the counters, so that a retry needs no read either.
    txn.add_failure()->mutable_request_range()->set_key(JobSeqKey());
    txn.add_failure()->mutable_request_range()->set_key(EventSeqKey());
    etcdserverpb::TxnResponse failed;
    auto outcome =
        Commit(txn, true, last_id, !events.empty(), new_event_seq, /*revision=*/nullptr, &failed);
    if (!outcome.ok()) return fail_pending(outcome.status());
    if (*outcome == Outcome::kCommitted) {
      std::set<PendingCreate*> done;
      for (auto& [p, job] : included) {
        if (const auto& idem = *p->idem) {
          bound[idem->key] = Binding{absl::OkStatus(), job.id, idem->body_hash, job};
        }
        p->result = core::CreateJobResult{std::move(job), true};
        done.insert(p);
      }
      std::erase_if(pending, [&done](PendingCreate* p) { return done.count(p) > 0; });
      continue;
    }
    // A compare failed (not the fence: Commit checked it): a key of the batch is bound already,
    // or another writer moved a counter. The failure reads say which; retry the rest.
    std::map<std::string, const mvccpb::KeyValue*> read;
    for (const auto& response : failed.responses()) {
      for (const auto& kv : response.response_range().kvs()) read[kv.key()] = &kv;
    }
    for (const std::string& key : keys) {
      auto it = read.find(IdemKey(key));
      if (it == read.end()) continue;
      Binding& b = bound[key];
      auto j = ParseStored(it->second->value(), "idempotency key");
      if (j.ok() && !j->is_object())
        j = absl::DataLossError("stored idempotency key is not an object");
      if (!j.ok()) {
        b.stored = j.status();
        continue;
      }
      try {
        b.job_id = j->value("job_id", core::JobId{0});
        b.body_hash = j->value("body_hash", std::string());
      } catch (const std::exception& e) {
        b.stored = absl::DataLossError(absl::StrCat("stored idempotency key: ", e.what()));
        continue;
      }
      auto kv = GetKey(JobKey(b.job_id), 0, /*serializable=*/false);
      if (!kv.ok()) {
        b.job = kv.status();
      } else if (!*kv) {
        b.job = absl::DataLossError(absl::StrCat("idempotency key names job ", b.job_id, ", gone"));
      } else {
        b.job = DecodeJob((*kv)->value);
      }
    }
    counters_loaded_ = true;
    for (auto [key, counter] : {std::pair{JobSeqKey(), &job_seq_}, {EventSeqKey(), &event_seq_}}) {
      *counter = Counter{};
      auto it = read.find(key);
      if (it == read.end()) continue;
      if (!absl::SimpleAtoi(it->second->value(), &counter->value)) counters_loaded_ = false;
      counter->mod_revision = it->second->mod_revision();
    }
  }
}

absl::StatusOr<core::Job> EtcdStorage::Impl::GetJob(core::JobId id) {
  INAC_ASSIGN_OR_RETURN(auto kv, GetKey(JobKey(id)));
  if (!kv) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return DecodeJob(kv->value);
}

// Applies `updates` (in order; ids may repeat) in transactions of at most max_txn_ops jobs.
absl::StatusOr<std::map<core::JobId, core::Job>> EtcdStorage::Impl::UpdateJobs(
    const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates, int64_t now_ms,
    const std::vector<core::Event>& events, std::optional<core::JobId> default_job) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  absl::MutexLock l(&write_mu_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::map<core::JobId, std::pair<core::Job, int64_t>> changed;  // job, read mod revision
    for (const auto& [id, update] : updates) {
      auto it = changed.find(id);
      if (it == changed.end()) {
        INAC_ASSIGN_OR_RETURN(auto kv, GetKey(JobKey(id), 0, attempt == 0));
        if (!kv) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
        INAC_ASSIGN_OR_RETURN(core::Job job, DecodeJob(kv->value));
        it = changed.emplace(id, std::make_pair(std::move(job), kv->mod_revision)).first;
      }
      INAC_RETURN_IF_ERROR(ApplyJobUpdate(update, now_ms, it->second.first));
    }
    INAC_RETURN_IF_ERROR(LoadCounters());
    // Transactions of at most max_txn_ops puts: the jobs first, then the events (with the
    // counter). One transaction when everything fits (always for a single update).
    std::vector<core::JobId> ids;
    for (const auto& [id, entry] : changed) ids.push_back(id);
    const size_t limit = static_cast<size_t>(o_.max_txn_ops);
    const bool one_txn = ids.size() + events.size() + 1 <= limit;
    bool conflict = false;
    size_t chunk_index = 0;
    for (size_t start = 0; start < ids.size() || (start == 0 && ids.empty()); start += limit) {
      TxnRequest txn;
      INAC_RETURN_IF_ERROR(Fence(&txn));
      for (size_t k = start; k < std::min(ids.size(), start + limit); ++k) {
        AddCompareMod(&txn, JobKey(ids[k]), changed[ids[k]].second);
        AddPut(&txn, JobKey(ids[k]), core::JobToJson(changed[ids[k]].first).dump());
      }
      int64_t new_event_seq = event_seq_.value;
      if (one_txn) AddEvents(&txn, events, default_job, &new_event_seq);
      INAC_ASSIGN_OR_RETURN(Outcome outcome,
                            Commit(txn, false, 0, one_txn && !events.empty(), new_event_seq));
      if (outcome == Outcome::kConflict) {
        if (chunk_index > 0) {
          return absl::AbortedError(
              "a concurrent write changed a job during a chunked update; earlier chunks "
              "committed");
        }
        conflict = true;
        break;
      }
      ++chunk_index;
      if (ids.empty()) break;
    }
    if (!conflict && !one_txn) {
      for (size_t start = 0; start < events.size(); start += limit - 1) {
        std::vector<core::Event> part(events.begin() + start,
                                      events.begin() + std::min(events.size(), start + limit - 1));
        for (int attempt2 = 0;; ++attempt2) {
          INAC_RETURN_IF_ERROR(LoadCounters());
          TxnRequest txn;
          INAC_RETURN_IF_ERROR(Fence(&txn));
          int64_t new_event_seq = 0;
          AddEvents(&txn, part, default_job, &new_event_seq);
          INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, true, new_event_seq));
          if (outcome == Outcome::kCommitted) break;
          if (attempt2 + 1 >= kAttempts) return TooManyConflicts();
        }
      }
    }
    if (conflict) continue;
    std::map<core::JobId, core::Job> out;
    for (auto& [id, entry] : changed) out.emplace(id, std::move(entry.first));
    return out;
  }
  return TooManyConflicts();
}

absl::StatusOr<core::JobPage> EtcdStorage::Impl::ListJobs(const core::JobFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateJobFilter(filter));
  core::JobPage page;
  absl::Status decode = absl::OkStatus();
  int64_t revision = 0;
  INAC_RETURN_IF_ERROR(Scan(JobKey(filter.after_id + 1), PrefixEnd(JobsPrefix()), &revision,
                            [&](const mvccpb::KeyValue& kv) {
                              auto job = DecodeJob(kv.value());
                              if (!job.ok()) {
                                decode = job.status();
                                return false;
                              }
                              if (!JobMatches(filter, *job)) return true;
                              if (static_cast<int64_t>(page.jobs.size()) == filter.limit) {
                                page.next_after_id = page.jobs.back().id;
                                return false;
                              }
                              page.jobs.push_back(*std::move(job));
                              return true;
                            }));
  INAC_RETURN_IF_ERROR(decode);
  return page;
}

absl::StatusOr<std::vector<core::Job>> EtcdStorage::Impl::AllJobs(int64_t* revision) {
  std::vector<core::Job> jobs;
  absl::Status decode = absl::OkStatus();
  INAC_RETURN_IF_ERROR(
      Scan(JobsPrefix(), PrefixEnd(JobsPrefix()), revision, [&](const mvccpb::KeyValue& kv) {
        auto job = DecodeJob(kv.value());
        if (!job.ok()) {
          decode = job.status();
          return false;
        }
        jobs.push_back(*std::move(job));
        return true;
      }));
  INAC_RETURN_IF_ERROR(decode);
  return jobs;
}

absl::StatusOr<int64_t> EtcdStorage::Impl::PruneFinished(int64_t older_than_ms, int64_t max_rows) {
  INAC_RETURN_IF_ERROR(ValidatePruneBatch(max_rows));
  absl::MutexLock l(&write_mu_);
  int64_t revision = 0;
  INAC_ASSIGN_OR_RETURN(std::vector<core::Job> jobs, AllJobs(&revision));
  std::vector<std::pair<int64_t, core::JobId>> old;
  for (const core::Job& job : jobs) {
    if (core::IsTerminal(job.state) && job.updated_ms < older_than_ms) {
      old.emplace_back(job.updated_ms, job.id);
    }
  }
  std::sort(old.begin(), old.end());
  if (static_cast<int64_t>(old.size()) > max_rows) old.resize(max_rows);
  if (old.empty()) return 0;
  std::set<core::JobId> doomed;
  for (const auto& [t, id] : old) doomed.insert(id);
  // Keys to delete: job, its idempotency key (both directions), its events.
  std::vector<std::string> keys;
  for (core::JobId id : doomed) {
    keys.push_back(JobKey(id));
    INAC_ASSIGN_OR_RETURN(auto idem, GetKey(JobIdemKey(id), revision));
    if (idem) {
      keys.push_back(JobIdemKey(id));
      keys.push_back(IdemKey(idem->value));
    }
  }
  absl::Status decode = absl::OkStatus();
  int64_t event_rev = revision;
  INAC_RETURN_IF_ERROR(
      Scan(EventsPrefix(), PrefixEnd(EventsPrefix()), &event_rev, [&](const mvccpb::KeyValue& kv) {
        auto e = DecodeEvent(kv.value());
        if (!e.ok()) {
          decode = e.status();
          return false;
        }
        if (e->job_id && doomed.count(*e->job_id)) keys.push_back(kv.key());
        return true;
      }));
  INAC_RETURN_IF_ERROR(decode);
  for (size_t i = 0; i < keys.size(); i += o_.max_txn_ops) {
    TxnRequest txn;
    INAC_RETURN_IF_ERROR(Fence(&txn));
    for (size_t k = i; k < std::min(keys.size(), i + o_.max_txn_ops); ++k) AddDelete(&txn, keys[k]);
    INAC_ASSIGN_OR_RETURN(Outcome outcome, Commit(txn, false, 0, false, 0));
    if (outcome != Outcome::kCommitted) return absl::AbortedError("prune conflicted");
  }
  return static_cast<int64_t>(old.size());
}

}  // namespace inac::storage::etcd
