#include "server/cluster_node.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/files.h"
#include "core/json.h"
#include "southbound/switch_client.h"
#include "spdlog/spdlog.h"

namespace inac::server {

namespace {

// A switch client that refuses to start any switch write, and arbitration, unless `fence`
// answers the leader's token (FailedPrecondition "fenced"). Reads pass.
class FencedSwitchClient final : public southbound::SwitchClient {
 public:
  FencedSwitchClient(std::unique_ptr<southbound::SwitchClient> inner,
                     std::function<std::optional<int64_t>()> fence, int64_t token)
      : inner_(std::move(inner)), fence_(std::move(fence)), token_(token) {}
  const std::string& switch_id() const override { return inner_->switch_id(); }
  absl::Status Connect() override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->Connect();
  }
  bool IsConnected() const override { return inner_->IsConnected(); }
  bool IsPrimary() const override { return inner_->IsPrimary(); }
  absl::StatusOr<bool> EnsurePipeline() override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->EnsurePipeline();
  }
  absl::StatusOr<southbound::ReconcileStats> Reconcile(const core::SwitchIntent& intent) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    return inner_->Reconcile(intent);
  }
  absl::StatusOr<std::vector<southbound::AggregationCounters>> ReadCounters(
      const core::SwitchIntent& intent) override {
    return inner_->ReadCounters(intent);
  }
  void Disconnect() override { inner_->Disconnect(); }

 private:
  absl::Status Check() const {
    std::optional<int64_t> token = fence_();
    if (!token || *token != token_) {
      return absl::FailedPreconditionError(
          "fenced: this controller is no longer the cluster leader; it writes no switch");
    }
    return absl::OkStatus();
  }
  std::unique_ptr<southbound::SwitchClient> inner_;
  std::function<std::optional<int64_t>()> fence_;
  int64_t token_;
};

// The mirror file: {"epoch": N}. 0 when absent or unreadable.
int64_t ReadEpochFile(const std::string& path) {
  if (path.empty()) return 0;
  auto text = core::ReadFile(path);
  if (!text.ok()) return 0;
  core::Json j = core::Json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("epoch") || !j["epoch"].is_number_integer()) return 0;
  return j["epoch"].get<int64_t>();
}

// Writes the mirror durably (a temporary file, fsync, rename).
void WriteEpochFile(const std::string& path, int64_t epoch) {
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    spdlog::warn("event=cluster_epoch_mirror_failed path={} errno={}", path, errno);
    return;
  }
  std::string text = core::Json({{"epoch", epoch}}).dump() + "\n";
  bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    spdlog::warn("event=cluster_epoch_mirror_failed path={} errno={}", path, errno);
  }
}

// The "epoch" of a leader key's value (0 when none).
int64_t EpochOf(const std::string& value) {
  core::Json j = core::Json::parse(value, nullptr, false);
  if (!j.is_object() || !j.contains("epoch") || !j["epoch"].is_number_integer()) return 0;
  return j["epoch"].get<int64_t>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Create(
    const ClusterConfig& config, std::unique_ptr<core::Storage> local) {
  if (config.node_id.empty()) {
    return absl::InvalidArgumentError("cluster mode needs --node-id (this controller's name)");
  }
  if (config.lease_ttl_s < 2) return absl::InvalidArgumentError("lease TTL must be >= 2 s");
  std::unique_ptr<ClusterNode> node(new ClusterNode());
  node->config_ = config;
  auto client = storage::etcd::EtcdClient::Create({config.endpoints});
  if (!client.ok()) return client.status();
  node->client_ = std::move(*client);
  storage::etcd::EtcdStorageOptions options;
  options.prefix = config.prefix;
  options.leader_key = config.prefix + "leader";
  ClusterNode* self = node.get();
  options.leader_token = [self] { return self->LeaderToken(); };
  node->storage_ =
      std::make_unique<storage::etcd::EtcdStorage>(node->client_.get(), std::move(local), options);
  node->seen_epoch_ = ReadEpochFile(config.state_file);
  return node;
}

ClusterNode::~ClusterNode() { Stop(); }

void ClusterNode::Start(const std::string& url,
                        std::function<void(southbound::ElectionId election_id)> on_elected,
                        std::function<void(const std::string& why)> on_lost) {
  if (election_ != nullptr) return;
  storage::etcd::LeaderElectionOptions election;
  election.key = config_.prefix + "leader";
  election.value = core::Json({{"node_id", config_.node_id}, {"url", url}}).dump();
  election.ttl_s = config_.lease_ttl_s;
  // Renew four times per TTL; stop writing a quarter TTL before etcd could expire the lease.
  election.keepalive_period = absl::Milliseconds(config_.lease_ttl_s * 250);
  election.margin = absl::Milliseconds(config_.lease_ttl_s * 250);
  election.on_elected = [this, url, on_elected = std::move(on_elected), on_lost](int64_t token) {
    absl::StatusOr<int64_t> epoch = TakeEpoch(url);
    if (!epoch.ok()) {
      if (on_lost) on_lost(absl::StrCat("elected, but no epoch taken: ", epoch.status().message()));
      return;
    }
    southbound::ElectionId id{static_cast<uint64_t>(*epoch), static_cast<uint64_t>(token)};
    {
      absl::MutexLock l(&mu_);
      election_id_ = id;
    }
    leading_ = true;
    if (on_elected) on_elected(id);
  };
  election.on_lost = std::move(on_lost);
  election.on_leader_value = [this](const std::string& value) { SeeEpoch(EpochOf(value)); };
  if (config_.probe_leader) {
    election.leader_gone = [this](const std::string& value) {
      if (!probe_.Gone(value)) return false;
      core::Json j = core::Json::parse(value, nullptr, false);
      spdlog::warn("event=cluster_leader_gone node={} leader={} action=revoke_lease",
                   config_.node_id, j.is_object() ? j.value("node_id", std::string()) : "");
      return true;
    };
  }
  election_ = std::make_unique<storage::etcd::LeaderElection>(client_.get(), std::move(election));
  election_ptr_.store(election_.get());
  election_->Start();
}

void ClusterNode::Stop() {
  if (election_) election_->Stop();
}

bool ClusterNode::campaigning() const {
  storage::etcd::LeaderElection* e = election_ptr_.load();
  return e != nullptr && !e->lost();
}

bool ClusterHealthService::LoopAlive() {
  if (node_->leading()) return controller_->LoopAlive();
  return node_->campaigning();
}

absl::Status ClusterHealthService::Ready() {
  if (node_->leading()) return controller_->Ready();
  if (!node_->campaigning()) return absl::UnavailableError("cluster election not running");
  if (absl::Status s = node_->storage()->Health(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("etcd: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ClusterNode::TakeEpoch(const std::string& url) {
  const std::string key = config_.prefix + "meta/epoch";
  etcdserverpb::RangeRequest read;
  read.set_key(key);  // linearizable: the newest epoch, not a member's possibly stale copy
  auto got = client_->Range(read);
  if (!got.ok()) return got.status();
  int64_t stored = 0;
  if (got->kvs_size() > 0 && !absl::SimpleAtoi(got->kvs(0).value(), &stored)) {
    return absl::DataLossError(absl::StrCat(key, " is not a number"));
  }
  const int64_t epoch = std::max(stored, seen_epoch()) + 1;
  etcdserverpb::TxnRequest also;
  auto* put = also.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(absl::StrCat(epoch));
  std::string value =
      core::Json({{"node_id", config_.node_id}, {"url", url}, {"epoch", epoch}}).dump();
  if (absl::Status s = election_->Republish(value, also); !s.ok()) return s;
  SeeEpoch(epoch);
  spdlog::info("event=cluster_epoch node={} epoch={} etcd_epoch={}", config_.node_id, epoch,
               stored);
  return epoch;
}

void ClusterNode::SeeEpoch(int64_t epoch) {
  {
    absl::MutexLock l(&mu_);
    if (epoch <= seen_epoch_) return;
    seen_epoch_ = epoch;
  }
  WriteEpochFile(config_.state_file, epoch);
}

int64_t ClusterNode::seen_epoch() const {
  absl::MutexLock l(&mu_);
  return seen_epoch_;
}

southbound::ElectionId ClusterNode::election_id() const {
  absl::MutexLock l(&mu_);
  return election_id_;
}

std::optional<int64_t> ClusterNode::LeaderToken() const {
  storage::etcd::LeaderElection* e = election_ptr_.load();
  return e ? e->LeaderToken() : std::nullopt;
}

std::optional<std::string> ClusterNode::NotLeader() const {
  storage::etcd::LeaderElection* e = election_ptr_.load();
  if (e == nullptr) return std::string();
  if (e->LeaderToken()) return std::nullopt;
  std::string value = e->LeaderValue();
  if (value.empty()) return std::string();
  core::Json j = core::Json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::string();
  return j.value("url", std::string());
}

SwitchClientFactory ClusterNode::FencedFactory(SwitchClientFactory inner) {
  return [inner = std::move(inner), this](
             const core::Switch& sw,
             southbound::ElectionId) -> absl::StatusOr<std::unique_ptr<southbound::SwitchClient>> {
    std::optional<int64_t> token = LeaderToken();
    if (!token || !leading_.load()) {
      return absl::FailedPreconditionError(
          "fenced: this controller is not the cluster leader; it connects to no switch");
    }
    auto client = inner(sw, election_id());
    if (!client.ok()) return client.status();
    return std::unique_ptr<southbound::SwitchClient>(std::make_unique<FencedSwitchClient>(
        std::move(*client), [this] { return LeaderToken(); }, *token));
  };
}

}  // namespace inac::server
