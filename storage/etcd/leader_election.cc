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
  EtcdWatchOptions watch;
  watch.key = options_.key;
  watch.on_events = [this](const std::vector<mvccpb::Event>& events, int64_t /*revision*/) {
    for (const mvccpb::Event& e : events) {
      const bool deleted = e.type() == mvccpb::Event::DELETE;
      {
        absl::MutexLock l(&mu_);
        key_changed_ = key_changed_ || token_ != 0;  // a leader re-checks its key at once
      }
      SetLeader(deleted ? "" : e.kv().value(), deleted ? 0 : e.kv().lease());
      if (deleted) wake_ = true;  // no leader: campaign now
    }
  };
  // The watch ended (compaction, or a store restored from a snapshot): campaign (which reads the
  // key) and let a leader re-check its key; the retry period covers the rest.
  watch.on_compacted = [this](int64_t) {
    {
      absl::MutexLock l(&mu_);
      key_changed_ = true;
    }
    wake_ = true;
  };
  watch_ = std::make_unique<EtcdWatch>(client_, std::move(watch));
  thread_ = std::thread([this] { Main(); });
}

void LeaderElection::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (watch_) watch_->Stop();
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

void LeaderElection::SetLeader(const std::string& value, int64_t lease) {
  bool changed = false;
  {
    absl::MutexLock l(&mu_);
    changed = value != leader_value_;
    leader_value_ = value;
    leader_lease_ = lease;
  }
  if (changed && options_.on_leader_value) options_.on_leader_value(value);
}

absl::Status LeaderElection::Republish(const std::string& value,
                                       const etcdserverpb::TxnRequest& also) {
  int64_t lease = 0, token = 0;
  {
    absl::MutexLock l(&mu_);
    lease = lease_id_;
    token = token_;
  }
  if (token == 0 || !LeaderToken()) {
    return absl::FailedPreconditionError("not the leader: nothing republished");
  }
  etcdserverpb::TxnRequest txn = also;
  auto* cmp = txn.add_compare();
  cmp->set_key(options_.key);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(token);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(options_.key);
  put->set_value(value);
  put->set_lease(lease);
  auto response = client_->Txn(txn);
  if (!response.ok()) return response.status();
  if (!response->succeeded()) {
    return absl::FailedPreconditionError("the leader key is not this node's any more");
  }
  SetLeader(value, lease);
  return absl::OkStatus();
}

void LeaderElection::Main() {
  while (!stop_.load() && !lost_.load()) {
    Step();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void LeaderElection::Lose(const std::string& why) {
  {
    absl::MutexLock l(&mu_);
    token_ = 0;
  }
  if (!lost_.exchange(true) && options_.on_lost) options_.on_lost(why);
}

bool LeaderElection::KeepLease(int64_t lease, bool leader) {
  bool keepalive_due = false;
  Clock::time_point valid_until;
  {
    absl::MutexLock l(&mu_);
    keepalive_due = Clock::now() >= next_keepalive_;
    valid_until = lease_valid_until_;
  }
  // The local fence first: a leader whose validity passed (e.g. the process was stopped) has lost,
  // whatever etcd says now.
  if (leader && Clock::now() >= valid_until) {
    Lose("the lease could not be renewed within its TTL minus the safety margin");
    return false;
  }
  // A lease: granted when none or the old one expired (followers only; a leader never replaces
  // its lease).
  if (lease == 0) {
    Clock::time_point sent = Clock::now();
    auto granted = client_->LeaseGrant(options_.ttl_s);
    if (!granted.ok()) return true;
    absl::MutexLock l(&mu_);
    lease_id_ = granted->id();
    lease_valid_until_ = sent + std::chrono::seconds(granted->ttl()) - ToChrono(options_.margin);
    next_keepalive_ = sent + ToChrono(options_.keepalive_period);
    return true;
  }
  if (!keepalive_due) return true;
  Clock::time_point sent = Clock::now();
  auto ttl = client_->LeaseKeepAlive(lease);
  if (!ttl.ok()) {
    // Retry at the next step until the validity runs out.
    absl::MutexLock l(&mu_);
    next_keepalive_ = Clock::now() + std::chrono::milliseconds(50);
    return true;
  }
  if (*ttl <= 0) {  // expired at etcd
    if (leader) {
      Lose("etcd says the lease expired");
      return false;
    }
    absl::MutexLock l(&mu_);
    lease_id_ = 0;
    return true;
  }
  absl::MutexLock l(&mu_);
  lease_valid_until_ = sent + std::chrono::seconds(*ttl) - ToChrono(options_.margin);
  next_keepalive_ = sent + ToChrono(options_.keepalive_period);
  return true;
}

void LeaderElection::Step() {
  int64_t lease = 0;
  bool leader = false;
  {
    absl::MutexLock l(&mu_);
    lease = lease_id_;
    leader = token_ != 0;
  }
  if (!KeepLease(lease, leader)) return;
  if (leader) {
    CheckKey();
    return;
  }
  {
    absl::MutexLock l(&mu_);
    lease = lease_id_;
    // Campaign only with a lease that is locally valid for a while.
    if (lease == 0 || Clock::now() >= lease_valid_until_) return;
  }
  const Clock::time_point now = Clock::now();
  if (wake_.exchange(false) || now >= next_campaign_) {
    next_campaign_ = now + ToChrono(options_.retry_period);
    Campaign(lease);
    return;
  }
  if (options_.leader_gone && now >= next_probe_) {
    next_probe_ = now + ToChrono(options_.probe_period);
    ProbeLeader();
  }
}

void LeaderElection::CheckKey() {
  int64_t lease = 0, token = 0;
  {
    absl::MutexLock l(&mu_);
    const Clock::time_point now = Clock::now();
    if (!key_changed_ && now < next_key_check_) return;
    key_changed_ = false;
    next_key_check_ = now + ToChrono(options_.keepalive_period);
    lease = lease_id_;
    token = token_;
  }
  etcdserverpb::RangeRequest read;
  read.set_key(options_.key);
  auto got = client_->Range(read);
  if (!got.ok()) return;  // unknown; the lease's validity decides
  if (got->kvs_size() == 0 || got->kvs(0).create_revision() != token ||
      got->kvs(0).lease() != lease) {
    // A live lease is not enough: after etcd was restored from a snapshot, this node's lease can
    // exist while the leader key is another's (or nobody's).
    Lose("the leader key is no longer this node's (etcd restored from a snapshot?)");
  }
}

void LeaderElection::ProbeLeader() {
  std::string value;
  int64_t lease = 0;
  {
    absl::MutexLock l(&mu_);
    value = leader_value_;
    lease = leader_lease_;
    if (lease == lease_id_) return;  // our own key
  }
  if (value.empty() || lease == 0) return;
  if (!options_.leader_gone(value)) return;
  // The leader's process is gone: end its lease now rather than after its TTL. etcd deletes the
  // key, the watch wakes every follower.
  // A short deadline: while etcd itself elects a Raft leader (it may have died with ours), the
  // call cannot commit; the next probe retries, likely on another member.
  if (client_->LeaseRevoke(lease, absl::Milliseconds(300)).ok()) wake_ = true;
}

void LeaderElection::Campaign(int64_t lease) {
  // Create the leader key under our lease if there is none; else read who leads.
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
  if (!response.ok()) {
    wake_ = true;  // try again at the next step
    return;
  }
  if (response->succeeded()) {
    int64_t token = response->header().revision();
    {
      absl::MutexLock l(&mu_);
      token_ = token;
    }
    SetLeader(options_.value, lease);
    if (options_.on_elected) options_.on_elected(token);
    return;
  }
  if (response->responses_size() == 0 || response->responses(0).response_range().kvs_size() == 0) {
    wake_ = true;  // deleted in between
    return;
  }
  const auto& kv = response->responses(0).response_range().kvs(0);
  if (kv.lease() == lease) {
    // Our own key from before (a campaign whose answer was lost): we lead with its revision.
    int64_t token = kv.create_revision();
    {
      absl::MutexLock l(&mu_);
      token_ = token;
    }
    SetLeader(kv.value(), lease);
    if (options_.on_elected) options_.on_elected(token);
    return;
  }
  SetLeader(kv.value(), kv.lease());
}

}  // namespace inac::storage::etcd
