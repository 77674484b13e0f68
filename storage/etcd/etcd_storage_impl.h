// Internal to storage/etcd/ (not part of storage/etcd/etcd_storage.h's API): the state and logic
// of EtcdStorage, shared by the files that implement it -- etcd_storage.cc (the reads, the write
// path with its leader fence and counters, topology, events, the snapshot, the store ports),
// etcd_jobs.cc (the job store), etcd_plans.cc (the replicated plan and the snapshot served from the
// mirror) -- and the value codecs and transaction builders of etcd_codec.cc. Contract: every write
// goes through Fence and Commit under write_mu_, in transactions of at most max_txn_ops
// operations, retried at most kAttempts times on a conflict; stored values that do not decode are
// DataLoss. Job creations are group-committed (CreateJob below): the creations that queue up while
// one transaction is in flight share the next one. Lock order: plan_mu_, then write_mu_ or
// snapshot_mu_, then the mirror's lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/json.h"
#include "core/stores.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_storage.h"
#include "storage/etcd/kv_mirror.h"

namespace inac::storage::etcd {
namespace internal {

// A sequence number as a key suffix: 20 digits, zero-padded, so keys sort as the numbers do.
std::string Seq20(int64_t n);

// `text` as JSON; DataLoss naming `what` when it is not JSON.
absl::StatusOr<core::Json> ParseStored(const std::string& text, const std::string& what);

// The stored forms of an event, a job and the topology record; DataLoss when they do not decode.
std::string EncodeEvent(const core::Event& e);
absl::StatusOr<core::Event> DecodeEvent(const std::string& text);
absl::StatusOr<core::Job> DecodeJob(const std::string& text);
absl::StatusOr<core::TopologyRecord> DecodeTopology(const std::string& text);

// Operations of a transaction: a put, a delete of `key` (or of [key, range_end)), and the compare
// that `key`'s mod revision is `mod_revision` (0: the key does not exist).
void AddPut(etcdserverpb::TxnRequest* txn, const std::string& key, const std::string& value);
void AddDelete(etcdserverpb::TxnRequest* txn, const std::string& key,
               const std::string& range_end = "");
void AddCompareMod(etcdserverpb::TxnRequest* txn, const std::string& key, int64_t mod_revision);

// The stamp of a replicated job plan value: FNV-1a (64 bits) of its bytes, 16 hex digits. Stable
// across builds and machines; it detects a job key that does not hold what the plan meta lists.
std::string PlanStamp(const std::string& value);

}  // namespace internal

// All the state and logic of EtcdStorage; the store ports of etcd_storage.cc forward to it.
class EtcdStorage::Impl {
 public:
  // Starts the mirror of <prefix>jobs/, meta/ and plan/ (etcd_plans.cc).
  Impl(EtcdClient* client, std::unique_ptr<core::Storage> local, EtcdStorageOptions options);
  ~Impl();  // stops the mirror before anything else goes

  core::Storage& local() { return *local_; }

  std::string JobKey(core::JobId id) const {
    return absl::StrCat(o_.prefix, "jobs/", internal::Seq20(id));
  }
  std::string JobsPrefix() const { return o_.prefix + "jobs/"; }
  std::string IdemKey(const std::string& key) const { return o_.prefix + "idem/" + key; }
  std::string JobIdemKey(core::JobId id) const {
    return absl::StrCat(o_.prefix, "job_idem/", internal::Seq20(id));
  }
  std::string EventKey(int64_t seq) const {
    return absl::StrCat(o_.prefix, "events/", internal::Seq20(seq));
  }
  std::string EventsPrefix() const { return o_.prefix + "events/"; }
  std::string JobSeqKey() const { return o_.prefix + "meta/job_seq"; }
  std::string EventSeqKey() const { return o_.prefix + "meta/event_seq"; }
  std::string TopologyKey() const { return o_.prefix + "meta/topology"; }
  std::string PlanJobsPrefix() const { return o_.prefix + "plan/jobs/"; }
  std::string PlanJobKey(core::JobId id) const {
    return absl::StrCat(o_.prefix, "plan/jobs/", internal::Seq20(id));
  }
  std::string PlanMetaKey() const { return o_.prefix + "plan/meta"; }
  // Whether the mirror keeps `key`: <prefix>jobs/, meta/ and plan/.
  bool MirroredKey(const std::string& key) const;

  // --- reads

  struct Kv {
    std::string value;
    int64_t mod_revision = 0;
  };
  // One key (serializable); nullopt when absent. `revision` > 0: at that revision.
  absl::StatusOr<std::optional<Kv>> GetKey(const std::string& key, int64_t revision = 0,
                                           bool serializable = true);

  // Every kv of [from, end) in key order, read in pages at one revision (`*revision` 0: the
  // newest, then set). `visit` returns false to stop.
  absl::Status Scan(const std::string& from, const std::string& end, int64_t* revision,
                    const std::function<bool(const mvccpb::KeyValue&)>& visit,
                    bool keys_only = false);

  // --- the write path

  struct Counter {
    int64_t value = 0;
    int64_t mod_revision = 0;  // 0: the key does not exist
  };
  absl::Status LoadCounters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  // Adds the leader fence to `txn` and a failure read of the leader key (the first failure
  // operation: call Fence before adding any other). Unavailable when this node is not the leader.
  absl::Status Fence(etcdserverpb::TxnRequest* txn);

  // Appends the puts of `events` (job_id defaulting to `default_job`) and of the event counter,
  // with its compare.
  void AddEvents(etcdserverpb::TxnRequest* txn, const std::vector<core::Event>& events,
                 std::optional<core::JobId> default_job, int64_t* new_event_seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  enum class Outcome { kCommitted, kConflict };
  // Commits `txn`. Conflict: a compare other than the fence failed (the caller re-reads and
  // retries); `failed`, when given, then receives etcd's answer (the failure operations' reads).
  // Unavailable: not the leader any more, or the outcome is unknown.
  absl::StatusOr<Outcome> Commit(etcdserverpb::TxnRequest& txn, bool job_seq_used,
                                 int64_t new_job_seq, bool event_seq_used, int64_t new_event_seq,
                                 int64_t* revision = nullptr,
                                 etcdserverpb::TxnResponse* failed = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  static constexpr int kAttempts = 8;
  static absl::Status TooManyConflicts() {
    return absl::UnavailableError("etcd: the write kept conflicting with concurrent writes");
  }

  // --- jobs

  // JobStore::Create with group commit. The caller queues its creation; the first of the queue
  // takes every queued creation that fits (at most max_txn_ops operations, at least its own),
  // commits them in ONE transaction (CommitCreates) and hands each its own result; the creations
  // that queued meanwhile form the next transaction. Returns only once this creation's
  // transaction was answered: a created job is majority-committed. Unavailable for every creation
  // of a transaction whose answer was lost or whose fence failed.
  absl::StatusOr<core::CreateJobResult> CreateJob(const core::JobSpec& spec, int64_t now_ms,
                                                  const std::optional<core::IdempotencyKey>& idem,
                                                  const std::vector<core::Event>& events);

  // One queued creation: its arguments (owned by the waiting caller), its result, and `done`.
  struct PendingCreate {
    const core::JobSpec* spec;
    int64_t now_ms;
    const std::optional<core::IdempotencyKey>* idem;
    const std::vector<core::Event>* events;
    int ops;  // puts it adds to a transaction
    absl::StatusOr<core::CreateJobResult> result = absl::UnknownError("not committed");
    bool done = false;  // guarded by queue_mu_; `result` is final once it is set
  };

  // Commits `batch` as one transaction (ids consecutive from the job counter), each creation
  // with its idempotency key (compare: the key does not exist yet), its job_idem key and its
  // events, and sets every creation's result as if they had run one after the other: a key
  // already bound in etcd, or bound by an earlier creation of the batch, gives that job (same
  // body hash, created = false) or AlreadyExists. A transaction that fails on a compare is
  // resolved from its failure reads (the batch's idempotency keys and the counters) and retried
  // without the creations it resolved, at most kAttempts times.
  // Never throws: an exception fails the creations it left without a result (Internal).
  void CommitCreates(const std::vector<PendingCreate*>& batch);
  // CommitCreates's rounds. May throw (JSON encoding); `pending` then holds the creations still
  // without a result.
  void CommitPendingCreates(std::vector<PendingCreate*>& pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  absl::StatusOr<core::Job> GetJob(core::JobId id);

  // Applies `updates` (in order; ids may repeat) in transactions of at most max_txn_ops jobs.
  absl::StatusOr<std::map<core::JobId, core::Job>> UpdateJobs(
      const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates, int64_t now_ms,
      const std::vector<core::Event>& events, std::optional<core::JobId> default_job);

  absl::StatusOr<core::JobPage> ListJobs(const core::JobFilter& filter);

  absl::StatusOr<std::vector<core::Job>> AllJobs(int64_t* revision);

  absl::StatusOr<int64_t> PruneFinished(int64_t older_than_ms, int64_t max_rows);

  // --- topology

  absl::StatusOr<std::optional<core::TopologyRecord>> GetTopology(int64_t revision = 0,
                                                                  int64_t* read_revision = nullptr);

  absl::StatusOr<int64_t> PutTopology(const core::Topology& topology, int64_t now_ms,
                                      std::optional<int64_t> expected_version,
                                      const std::vector<core::Event>& events);

  // --- events

  absl::StatusOr<int64_t> AppendEvents(const std::vector<core::Event>& events);

  absl::StatusOr<std::vector<core::Event>> ListEvents(const core::EventFilter& filter);

  absl::StatusOr<int64_t> LastSeq(int64_t revision = 0);

  absl::StatusOr<int64_t> TrimEvents(int64_t keep_last);

  // --- plans (etcd_plans.cc)

  // PlanStore::Save: the replicated plan first (fenced), then the local save, then the events.
  absl::StatusOr<int64_t> SavePlan(const core::Plan& plan,
                                   const std::vector<core::SwitchIntent>& intents, int64_t now_ms,
                                   const std::vector<core::Event>& events);
  // PlanStore::Latest: the local latest, after importing a newer consistent replicated plan.
  absl::StatusOr<std::optional<core::PlanRecord>> LatestPlan();

  // --- snapshot

  // From the mirror after read-your-writes (etcd_plans.cc); DirectSnapshot when the mirror does
  // not reach this node's last write within kReadYourWritesTimeout.
  absl::StatusOr<core::Snapshot> ReadSnapshot();
  absl::StatusOr<core::Snapshot> DirectSnapshot();
  static constexpr absl::Duration kReadYourWritesTimeout = absl::Seconds(1);

  absl::Status Health();

  KvMirror& mirror() { return *mirror_; }

 private:
  // The replicated plan as the mirror holds it; nullopt when absent or inconsistent (a job key
  // whose stamp is not the one meta lists, a key missing, a value that does not decode).
  struct Replicated {
    core::Plan plan;
    int64_t created_ms = 0;
    std::optional<core::TopologyRecord> topology;  // at the same mirror revision
  };
  // `*meta_mod`: the meta's mod revision (0: none); nullopt without reading when it is
  // `skip_meta_mod`.
  absl::StatusOr<std::optional<Replicated>> ReadReplicated(int64_t skip_meta_mod,
                                                           int64_t* meta_mod);
  // The version in the replicated plan's meta (0: none), from the mirror, parsed once per meta
  // revision.
  int64_t ReplicatedVersion();
  // Imports the replicated plan into `local` when it is consistent and newer than
  // `local_version`; whether it did.
  absl::StatusOr<bool> ImportIfNewer(int64_t local_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(plan_mu_);
  // Writes `plan` (its version set) as the replicated plan: changed job keys, deletes, meta last.
  absl::Status Replicate(const core::Plan& plan, int64_t now_ms, bool fresh)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(plan_mu_);
  absl::StatusOr<std::optional<core::Snapshot>> MirrorSnapshot();

  EtcdClient* client_;
  std::unique_ptr<core::Storage> local_;
  EtcdStorageOptions o_;
  // The creations waiting for a transaction, in arrival order; the front one commits.
  absl::Mutex queue_mu_;
  std::deque<PendingCreate*> queue_ ABSL_GUARDED_BY(queue_mu_);
  absl::Mutex write_mu_;
  bool counters_loaded_ ABSL_GUARDED_BY(write_mu_) = false;
  Counter job_seq_ ABSL_GUARDED_BY(write_mu_);
  Counter event_seq_ ABSL_GUARDED_BY(write_mu_);
  // The revision of this node's last committed write that put a mirrored key (read-your-writes of
  // ReadSnapshot: the mirror has applied it once it applied an event at that revision).
  std::atomic<int64_t> last_write_revision_{0};
  // The mirror's applied revision when read-your-writes last timed out (-1: it did not).
  std::atomic<int64_t> mirror_stalled_at_{-1};

  absl::Mutex plan_mu_;  // plan saves and imports, one at a time
  // The meta revision of a replicated plan found absent or inconsistent (not read again).
  int64_t rejected_meta_mod_ ABSL_GUARDED_BY(plan_mu_) = -1;
  // Decoded jobs and topology by mod revision, so an unchanged one is not decoded again.
  struct CachedJob {
    int64_t mod_revision = 0;
    core::Job job;
  };
  absl::Mutex snapshot_mu_;
  std::map<core::JobId, CachedJob> job_cache_ ABSL_GUARDED_BY(snapshot_mu_);
  int64_t topology_mod_ ABSL_GUARDED_BY(snapshot_mu_) = -1;
  std::optional<core::TopologyRecord> topology_cache_ ABSL_GUARDED_BY(snapshot_mu_);
  absl::Mutex meta_mu_;
  int64_t meta_mod_ ABSL_GUARDED_BY(meta_mu_) = -1;
  int64_t meta_version_ ABSL_GUARDED_BY(meta_mu_) = 0;

  std::unique_ptr<KvMirror> mirror_;  // last member: stopped first
};

}  // namespace inac::storage::etcd
