// Cluster mode of `inac serve` (docs/ha.md): this controller as one node of a cluster
// that replicates through etcd. It owns the etcd client, the leader election
// (storage/etcd/leader_election.h) and the EtcdStorage the controller runs on, and it provides the
// two fences of the leader:
//   - FencedFactory wraps the switch clients so that no P4Runtime write (pipeline or entries) and
//     no arbitration starts unless this node holds the leadership with a locally valid lease;
//     the election id they are created with is the leader's fencing token (the etcd revision of
//     its leader key), so a switch also refuses a deposed leader;
//   - every storage write compares that token in its etcd transaction (EtcdStorage).
// Followers serve reads; writes are refused by the REST layer with the leader's URL (NotLeader).
//
// Thread safety: every method may be called from any thread after Create.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/stores.h"
#include "server/services.h"
#include "server/switch_fleet.h"
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
  int64_t lease_ttl_s = 10;            // leader lease TTL; keep-alive every TTL/3
  std::string advertise_url;           // how clients reach this node ("": http(s)://listen)
  std::string prefix = "/inac/";       // etcd key prefix of this cluster
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
  // hand to clients. `on_elected(token)` runs (on the election thread) when this node becomes
  // the leader; `on_lost(why)` when it loses the leadership (the process should exit: it is
  // restarted as a follower).
  void Start(const std::string& url, std::function<void(int64_t token)> on_elected,
             std::function<void(const std::string& why)> on_lost);
  // Stops campaigning; a leader revokes its lease so that another node takes over at once.
  void Stop();

  // nullopt while this node is the leader (with a valid lease); otherwise the leader's URL ("" when
  // none is known).
  std::optional<std::string> NotLeader() const;
  std::optional<int64_t> LeaderToken() const;
  // Whether this node is leading now (its controller loop runs).
  bool leading() const { return leading_.load(); }
  // Whether the election thread runs and has not lost a leadership.
  bool campaigning() const;

  // `inner`'s clients wrapped by the leader fence, created with the leader's token as election id.
  SwitchClientFactory FencedFactory(SwitchClientFactory inner);

 private:
  ClusterNode() = default;

  ClusterConfig config_;
  std::unique_ptr<storage::etcd::EtcdClient> client_;
  std::unique_ptr<storage::etcd::LeaderElection> election_;  // set by Start
  std::atomic<storage::etcd::LeaderElection*> election_ptr_{nullptr};
  std::atomic<bool> leading_{false};
  std::unique_ptr<storage::etcd::EtcdStorage> storage_;
};

}  // namespace inac::server
