// Cluster mode of `inac serve` (docs/ha.md): this controller as one node of a cluster
// that replicates through etcd. It owns the etcd client, the leader election
// (storage/etcd/leader_election.h) and the EtcdStorage the controller runs on, and it provides the
// two fences of the leader:
//   - FencedFactory wraps the switch clients so that no P4Runtime write (pipeline or entries) and
//     no arbitration starts unless this node holds the leadership with a locally valid lease;
//   - every storage write compares the leader's token (the etcd create revision of its leader
//     key) in its etcd transaction (EtcdStorage).
// Election id. The switches get epoch * 2^64 + token. The epoch is stored in etcd
// (<prefix>meta/epoch) and mirrored by every node in a local file (`state_file`): each new leader
// takes max(etcd's, its own mirror's) + 1 before it writes anything. So ids grow with every
// election even when etcd is restored from an older snapshot (its revision, hence the token,
// goes back; the mirrors of the nodes that saw later leaders do not), and a switch always
// prefers the newest leader. The token alone keeps the storage fence.
// Followers serve reads; writes are refused by the REST layer with the leader's URL (NotLeader).
// A follower probes the leader it sees (server/leader_probe.h: a TCP connect to its URL's port
// every 100 ms); when the port that answered before refuses twice in a row, the leader's process
// is gone and its lease is revoked at once (storage/etcd/leader_election.h) -- a crashed leader is
// replaced in well under its TTL. `inac serve` closes its port only after it revoked its lease
// (cli/cmd_serve.cc).
//
// Thread safety: every method may be called from any thread after Create.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/stores.h"
#include "server/leader_probe.h"
#include "server/services.h"
#include "server/switch_fleet.h"
#include "southbound/switch_session.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_storage.h"
#include "storage/etcd/leader_election.h"

namespace inac::server {

// Cluster mode (docs/ha.md): controllers replicate through etcd; empty `endpoints` is the
// single-node default (SQLite only). Config file key "cluster": {"endpoints": [...], "node_id",
// "lease_ttl_s", "advertise_url", "prefix"}; flags --cluster-endpoints, --node-id, --lease-ttl-s,
// --advertise-url.
struct ClusterConfig {
  std::vector<std::string> endpoints;  // etcd client URLs, e.g. "http://127.0.0.1:2379"
  std::string node_id;                 // this controller's name in the cluster (required)
  int64_t lease_ttl_s = 2;             // leader lease TTL; keep-alive every TTL/4
  std::string advertise_url;           // how clients reach this node ("": http(s)://listen)
  std::string prefix = "/inac/";       // etcd key prefix of this cluster
  std::string state_file;              // the local mirror of the highest epoch seen ("": none)
  bool probe_leader = true;            // revoke a crashed leader's lease when its port refuses
};

// Health of a cluster node: the leader's is its controller's; a follower is alive while its
// election runs (it campaigns and serves reads) and ready when its storage (etcd) can be read --
// its controller loop does not run, by design.
class ClusterHealthService final : public HealthService {
 public:
  // Neither is owned.
  ClusterHealthService(HealthService* controller, class ClusterNode* node)
      : controller_(controller), node_(node) {}
  bool LoopAlive() override;
  absl::Status Ready() override;
  std::string MetricsText() override { return controller_->MetricsText(); }
  Metrics* metrics() override { return controller_->metrics(); }

 private:
  HealthService* controller_;
  ClusterNode* node_;
};

class ClusterNode {
 public:
  // InvalidArgument for a config without node_id or with a malformed endpoint. `local` (this
  // node's SqliteStorage: plans, switch records, audit) is owned from here on. Does not contact
  // etcd yet.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Create(const ClusterConfig& config,
                                                             std::unique_ptr<core::Storage> local);
  ~ClusterNode();

  // The storage the controller runs on (owned by the node).
  core::Storage* storage() { return storage_.get(); }

  // Starts campaigning; `url` is this node's API base URL ("http://host:port"), which followers
  // hand to clients. `on_elected(id)` runs (on the election thread) when this node becomes the
  // leader and has taken its epoch: `id` is its P4Runtime election id; `on_lost(why)` when it
  // loses the leadership, or cannot take an epoch (the process should exit: it is restarted as
  // a follower).
  void Start(const std::string& url,
             std::function<void(southbound::ElectionId election_id)> on_elected,
             std::function<void(const std::string& why)> on_lost);
  // Stops campaigning; a leader revokes its lease so that another node takes over at once.
  void Stop();

  // nullopt while this node is the leader (with a valid lease); otherwise the leader's URL ("" when
  // none is known).
  std::optional<std::string> NotLeader() const;
  std::optional<int64_t> LeaderToken() const;
  // The election id this node leads with (zero while it does not lead).
  southbound::ElectionId election_id() const;
  // The highest epoch this node has seen (its local mirror).
  int64_t seen_epoch() const;
  // Whether this node is leading now (its controller loop runs).
  bool leading() const { return leading_.load(); }
  // Whether the election thread runs and has not lost a leadership.
  bool campaigning() const;

  // `inner`'s clients wrapped by the leader fence, created with the leader's token as election id.
  SwitchClientFactory FencedFactory(SwitchClientFactory inner);

 private:
  ClusterNode() = default;
  // The leader's first step: takes the next epoch (etcd's and the mirror's maximum + 1), stores
  // it in etcd with the leader key republished, then in the mirror.
  absl::StatusOr<int64_t> TakeEpoch(const std::string& url);
  // Records `epoch` in the mirror when it is above what it holds.
  void SeeEpoch(int64_t epoch);

  ClusterConfig config_;
  std::unique_ptr<storage::etcd::EtcdClient> client_;
  std::unique_ptr<storage::etcd::LeaderElection> election_;  // set by Start
  std::atomic<storage::etcd::LeaderElection*> election_ptr_{nullptr};
  std::atomic<bool> leading_{false};
  mutable absl::Mutex mu_;
  southbound::ElectionId election_id_ ABSL_GUARDED_BY(mu_);
  int64_t seen_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  LeaderProbe probe_;  // election thread only
  std::unique_ptr<storage::etcd::EtcdStorage> storage_;
};

}  // namespace inac::server
