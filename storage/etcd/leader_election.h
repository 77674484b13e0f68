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
// its lease and elect another; when the validity has passed, or etcd says the lease is gone,
// the leadership is lost for good: `on_lost` runs once and LeaderToken() stays empty. (The
// process then exits and is restarted as a follower: kube-controller-manager's behaviour.)
//
// Thread safety: every method may be called from any thread; the callbacks run on the election
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/etcd/etcd_client.h"

namespace inac::storage::etcd {

struct LeaderElectionOptions {
  std::string key = "/inac/leader";  // the leader key
  std::string value;                 // what followers read (this node's id and address, JSON)
  int64_t ttl_s = 10;                // lease TTL
  absl::Duration keepalive_period = absl::Seconds(3);
  absl::Duration margin = absl::Seconds(2);  // local validity = last renewal + TTL - margin
  absl::Duration poll_period = absl::Milliseconds(500);  // followers try to win this often
  std::function<void(int64_t token)> on_elected;         // this node became the leader
  std::function<void(const std::string& why)> on_lost;   // the leadership is lost (once)
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

 private:
  void Main();
  // One step: keep the lease alive when due, campaign when a follower.
  void Step();
  void Lose(const std::string& why);

  EtcdClient* client_;
  LeaderElectionOptions options_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};

  mutable absl::Mutex mu_;
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Steady-clock times (never wall time: a clock step must not extend a lease).
  std::chrono::steady_clock::time_point lease_valid_until_ ABSL_GUARDED_BY(mu_){};
  std::chrono::steady_clock::time_point next_keepalive_ ABSL_GUARDED_BY(mu_){};
  int64_t token_ ABSL_GUARDED_BY(mu_) = 0;  // 0: not the leader
  std::string leader_value_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inac::storage::etcd
