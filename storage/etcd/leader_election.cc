#include "storage/etcd/leader_election.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace inac::storage::etcd {

namespace {
using Clock = std::chrono::steady_clock;
Clock::duration ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }
}  // namespace

LeaderElection::LeaderElection(EtcdClient* client, LeaderElectionOptions options)
    : client_(client), options_(std::move(options)) {}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Main(); });
}

void LeaderElection::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  int64_t lease = 0;
  {
    absl::MutexLock l(&mu_);
    lease = lease_id_;
    lease_id_ = 0;
    token_ = 0;
  }
  if (lease != 0) (void)client_->LeaseRevoke(lease);
}

std::optional<int64_t> LeaderElection::LeaderToken() const {
  absl::MutexLock l(&mu_);
  if (token_ == 0 || lost_.load() || Clock::now() >= lease_valid_until_) return std::nullopt;
  return token_;
}

std::string LeaderElection::LeaderValue() const {
  absl::MutexLock l(&mu_);
  return leader_value_;
}

void LeaderElection::Main() {
  while (!stop_.load() && !lost_.load()) {
    Step();
    auto until = Clock::now() + ToChrono(options_.poll_period);
    while (!stop_.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void LeaderElection::Lose(const std::string& why) {
  {
    absl::MutexLock l(&mu_);
    token_ = 0;
  }
  if (!lost_.exchange(true) && options_.on_lost) options_.on_lost(why);
}

void LeaderElection::Step() {
  int64_t lease = 0;
  bool leader = false;
  bool keepalive_due = false;
  Clock::time_point valid_until;
  {
    absl::MutexLock l(&mu_);
    lease = lease_id_;
    leader = token_ != 0;
    keepalive_due = Clock::now() >= next_keepalive_;
    valid_until = lease_valid_until_;
  }
  // The local fence first: a leader whose validity passed (e.g. the process was stopped) has lost,
  // whatever etcd says now.
  if (leader && Clock::now() >= valid_until) {
    Lose("the lease could not be renewed within its TTL minus the safety margin");
    return;
  }
  // A lease: granted when none or the old one expired (followers only; a leader never replaces
  // its lease).
  if (lease == 0) {
    Clock::time_point sent = Clock::now();
    auto granted = client_->LeaseGrant(options_.ttl_s);
    if (!granted.ok()) return;
    absl::MutexLock l(&mu_);
    lease_id_ = lease = granted->id();
    lease_valid_until_ = sent + std::chrono::seconds(granted->ttl()) - ToChrono(options_.margin);
    next_keepalive_ = sent + ToChrono(options_.keepalive_period);
  } else if (keepalive_due) {
    Clock::time_point sent = Clock::now();
    auto ttl = client_->LeaseKeepAlive(lease);
    if (ttl.ok()) {
      if (*ttl <= 0) {  // expired at etcd
        if (leader) {
          Lose("etcd says the lease expired");
          return;
        }
        absl::MutexLock l(&mu_);
        lease_id_ = 0;
        return;
      }
      absl::MutexLock l(&mu_);
      lease_valid_until_ = sent + std::chrono::seconds(*ttl) - ToChrono(options_.margin);
      next_keepalive_ = sent + ToChrono(options_.keepalive_period);
    } else {
      // Retry soon (every poll) until the validity runs out.
      absl::MutexLock l(&mu_);
      next_keepalive_ = Clock::now();
    }
  }
  if (leader) return;
  {
    absl::MutexLock l(&mu_);
    // Campaign only with a lease that is locally valid for a while.
    if (Clock::now() >= lease_valid_until_) return;
  }
  // Campaign: create the leader key under our lease if there is none; else read who leads.
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(options_.key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(options_.value);
  put->set_lease(lease);
  txn.add_failure()->mutable_request_range()->set_key(options_.key);
  auto response = client_->Txn(txn);
  if (!response.ok()) return;
  if (response->succeeded()) {
    int64_t token = response->header().revision();
    {
      absl::MutexLock l(&mu_);
      token_ = token;
      leader_value_ = options_.value;
    }
    if (options_.on_elected) options_.on_elected(token);
    return;
  }
  std::string value;
  if (response->responses_size() > 0 && response->responses(0).response_range().kvs_size() > 0) {
    const auto& kv = response->responses(0).response_range().kvs(0);
    value = kv.value();
    if (kv.lease() == lease) {
      // Our own key from before (a campaign whose answer was lost): we lead with its revision.
      int64_t token = kv.create_revision();
      {
        absl::MutexLock l(&mu_);
        token_ = token;
        leader_value_ = value;
      }
      if (options_.on_elected) options_.on_elected(token);
      return;
    }
  }
  absl::MutexLock l(&mu_);
  leader_value_ = value;
}

}  // namespace inac::storage::etcd
