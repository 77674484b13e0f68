// Leadership of a cluster of controllers through etcd (docs/ha.md): a lease kept alive by this
// process and a leader key created under that lease by a transaction that succeeds only if the
// key does not exist (Compare CREATE == 0) -- the recipe behind etcd's own election API
// (concurrency.Election), with one key instead of a queue of candidates.
//
// Fencing token. The leader's token is the create revision of its leader key: etcd's revision
// counter only grows, so every new leader's token is greater than every previous one. It is used
// (1) by EtcdStorage, whose every write compares the leader key's create revision with it in the
// same transaction, so a deposed leader can never commit, and (2) as the P4Runtime election id,
// so a switch prefers the newest leader and refuses a deposed one.
//
// Local fence. The lease is renewed every `keepalive_period`; each successful renewal sent at
// time t extends the local validity to t + TTL - `margin` (etcd restarts the TTL when it receives
// the renewal, which is after t). LeaderToken() answers the token only while the local validity
// lasts, so a leader that cannot renew stops writing (switches and etcd) before etcd can expire
// its lease and elect another; when the validity has passed, etcd says the lease is gone, or the
// leader key is not its own any more (read every `keepalive_period` and whenever the watch sees
// it change: after etcd was restored from a snapshot a node's lease can outlive its key), the
// leadership is lost for good: `on_lost` runs once and LeaderToken() stays empty. (The
// process then exits and is restarted as a follower: kube-controller-manager's behaviour.)
//
// Followers do not poll. They watch the leader key (storage/etcd/etcd_watch.h) and campaign the
// moment it is deleted (a leader revoked its lease on shutdown, or etcd expired it), plus every
// `retry_period` as a safety net. A leader that crashed is noticed sooner than its TTL when
// `leader_gone` says so: a follower asks it every `probe_period` about the leader it sees and,
// on true, revokes that leader's lease (etcd then deletes the key and every follower campaigns).
// `leader_gone` must answer true only when the leader's process is certainly gone -- a false
// true deposes a live leader (still safe: its etcd writes fail the fence, it exits on its next
// renewal, and switches refuse its lower election id once the new leader arbitrated).
//
// Thread safety: every method may be called from any thread; the callbacks run on the election
// thread (on_leader_value also on the watch thread), never two at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_watch.h"

namespace inac::storage::etcd {

struct LeaderElectionOptions {
  std::string key = "/inac/leader";  // the leader key
  std::string value;                 // what followers read (this node's id and address, JSON)
  int64_t ttl_s = 2;                 // lease TTL
  absl::Duration keepalive_period = absl::Milliseconds(500);
  absl::Duration margin = absl::Milliseconds(500);  // local validity = last renewal + TTL - margin
  absl::Duration retry_period = absl::Seconds(2);   // followers campaign at least this often
  absl::Duration probe_period = absl::Milliseconds(100);
  // Followers: is the leader whose key holds `value` certainly gone? (nullptr: never asked.)
  std::function<bool(const std::string& value)> leader_gone;
  std::function<void(int64_t token)> on_elected;        // this node became the leader
  std::function<void(const std::string& why)> on_lost;  // the leadership is lost (once)
  // The leader key's value changed (another leader, or the leader republished it); "" when the
  // key is gone.
  std::function<void(const std::string& value)> on_leader_value;
};

class LeaderElection {
 public:
  // `client` is not owned and must outlive the election.
  LeaderElection(EtcdClient* client, LeaderElectionOptions options);
  ~LeaderElection();  // Stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Starts the election thread (campaigns at once).
  void Start();
  // Stops the thread; a leader deletes its key by revoking its lease (a quick hand-over).
  void Stop();

  // The fencing token while this node is the leader and its lease is locally valid; nullopt
  // otherwise.
  std::optional<int64_t> LeaderToken() const;
  // The leader key's value as last read (empty when there is no leader or it is unknown).
  std::string LeaderValue() const;
  bool lost() const { return lost_.load(); }

  // While this node leads: replaces the leader key's value (same lease, same create revision, so
  // the token is unchanged), in one transaction that also applies `also` (e.g. puts of other
  // keys) and compares the token. FailedPrecondition when this node does not lead (any more).
  absl::Status Republish(const std::string& value, const etcdserverpb::TxnRequest& also);

 private:
  void Main();
  // One step: keep the lease alive when due; a follower campaigns when woken or due, and probes
  // the leader it sees.
  void Step();
  // Renews (or, for a follower without one, grants) the lease; false when the leadership is lost.
  bool KeepLease(int64_t lease, bool leader);
  void Campaign(int64_t lease);
  void ProbeLeader();
  // A leader reads its key (every keep-alive period, and at once after the watch saw it change)
  // and loses when the key is not its own any more.
  void CheckKey();
  void SetLeader(const std::string& value, int64_t lease);
  void Lose(const std::string& why);

  EtcdClient* client_;
  LeaderElectionOptions options_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  std::atomic<bool> wake_{true};  // campaign at the next step (the watch saw the key deleted)
  std::unique_ptr<EtcdWatch> watch_;
  // Election thread only.
  std::chrono::steady_clock::time_point next_campaign_{};
  std::chrono::steady_clock::time_point next_probe_{};

  mutable absl::Mutex mu_;
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Steady-clock times (never wall time: a clock step must not extend a lease).
  std::chrono::steady_clock::time_point lease_valid_until_ ABSL_GUARDED_BY(mu_){};
  std::chrono::steady_clock::time_point next_keepalive_ ABSL_GUARDED_BY(mu_){};
  int64_t token_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not the leader
  std::string leader_value_ ABSL_GUARDED_BY(mu_);
  int64_t leader_lease_ ABSL_GUARDED_BY(mu_) = 0;  // the lease of the leader key as last read
  bool key_changed_ ABSL_GUARDED_BY(mu_) = false;  // a leader: check the key at the next step
  std::chrono::steady_clock::time_point next_key_check_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace inac::storage::etcd
