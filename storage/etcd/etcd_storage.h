// core/stores.h on etcd (docs/ha.md): the replicated store of a cluster of controllers.
//
// What lives where. The inputs of planning -- jobs, their idempotency keys, the topology (with
// its link states) -- and the event log are in etcd, under `prefix`:
//   <prefix>jobs/<id, 20 digits>      job (core::JobToJson)
//   <prefix>idem/<key>                {"job_id", "body_hash"}; <prefix>job_idem/<id> -> key
//   <prefix>events/<seq, 20 digits>   event
//   <prefix>meta/job_seq, meta/event_seq, meta/topology
//   <prefix>plan/jobs/<id, 20 digits>, plan/meta   the replicated plan (below)
// Plans, intents, switch records and the audit log are per controller, in `local` (a SqliteStorage
// of the node). Nothing larger than one job, one job's plan or the topology is written in one
// key (etcd refuses requests over 1.5 MiB by default).
//
// Warm standby (docs/ha.md; storage/etcd/etcd_plans.cc). From construction to destruction, every
// node keeps <prefix>jobs/, meta/ and plan/ in memory (storage/etcd/kv_mirror.h; the destructor
// stops it). ReadSnapshot serves topology, jobs and the last event seq from that mirror at one
// mirror revision, after waiting until the mirror has applied this node's own last committed
// write: read-your-writes. When that takes over 1 s it reads etcd directly, and keeps doing so
// without waiting until the mirror advances again. A job is decoded only when its
// mod revision changed. The other reads (GetJob, ListJobs, events, ...) read etcd directly.
// PlanStore::Save writes the plan to etcd first (fenced): per-job keys only for the jobs whose plan
// changed since the replicated plan, deletes for jobs that left, and plan/meta last (stamps of the
// job keys), in transactions of at most max_txn_ops operations; then the local save, then the
// events. A save that fails in etcd saves nothing locally; one whose local save fails after the
// etcd write leaves the replicated plan ahead (imported by the next Latest). Version 0 means
// max(local latest, replicated version) + 1. PlanStore::Latest and ReadSnapshot import a
// replicated plan whose stamps all match and whose version is greater than the local latest: saved
// locally with its version, its created_ms and the intents core::DeriveSwitchIntents derives from
// it and the mirrored topology. A half-written replicated plan is treated as absent. Get,
// Intents and Prune are local.
//
// Durability and atomicity. Every write to etcd is ONE etcd transaction, acknowledged by etcd
// after a majority of members committed it: a write that returned OK survives the loss of any
// minority of members and of this process. Each transaction also compares the leader key's create
// revision with `leader_token()` (when set), so only the current leader can commit. Job creations
// are group-committed: the JobStore::Create calls that arrive while a transaction is in flight
// share the next one (each with its own job, idempotency key and events, at most `max_txn_ops`
// operations in all); each call returns once that transaction was answered, with its own result
// as if the calls had run one after the other, and Unavailable when the answer was lost or the
// fence failed (for every call of that transaction). Exceptions to
// the one-transaction rule, because etcd bounds a transaction to --max-txn-ops (128 by default):
// JobStore::UpdateMany whose jobs and events exceed `max_txn_ops` puts and PruneFinished are
// applied in chunks of that size (the jobs, then the events), each atomic; the replicated plan
// (above); the events of a plan save or a switch record (local) are appended to etcd right after
// the local write. A write whose
// etcd answer was lost (timeout, member crash) returns Unavailable: it may or may not have
// committed (a client retries with its idempotency key).
//
// Reads are serializable (served by the member the client talks to, without a quorum round), so
// they keep working when the cluster has lost its quorum. Read-modify-write is guarded by
// comparing mod revisions; a stale read only costs a retry. ReadSnapshot reads every etcd range at
// one revision (of the mirror, or of etcd when it falls back).
//
// Errors: those of core/stores.h; Unavailable also when this controller is not the leader ("not
// the leader") or etcd cannot commit (no quorum, unreachable).
//
// Thread safety: every method may be called from any thread; writes are serialised by a mutex,
// plan saves and imports by another.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/stores.h"
#include "storage/etcd/etcd_client.h"

namespace inac::storage::etcd {

struct EtcdStorageOptions {
  std::string prefix = "/inac/";
  // The fence: the key whose create revision must equal leader_token() for a write to commit.
  // Unset leader_token: no fence (a single writer by construction, e.g. tests).
  std::string leader_key = "/inac/leader";
  std::function<std::optional<int64_t>()> leader_token;
  int max_txn_ops = 100;  // below etcd's default --max-txn-ops (128)
};

class EtcdStorage final : public core::Storage {
 public:
  // `client` is not owned and must outlive the storage; `local` holds the per-node stores.
  EtcdStorage(EtcdClient* client, std::unique_ptr<core::Storage> local, EtcdStorageOptions options);
  ~EtcdStorage() override;

  core::TopologyStore& topology() override;
  core::JobStore& jobs() override;
  core::PlanStore& plans() override;
  core::SwitchStateStore& switch_states() override;
  core::EventLog& events() override;
  core::AuditLog& audit() override;
  absl::StatusOr<core::Snapshot> ReadSnapshot() override;
  // The local store's health, and Unavailable when the etcd member in use cannot be read.
  absl::Status Health() override;

  class Impl;

 private:
  struct Stores;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Stores> stores_;
};

}  // namespace inac::storage::etcd
