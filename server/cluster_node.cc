#include "server/cluster_node.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "southbound/switch_client.h"

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
  return node;
}

ClusterNode::~ClusterNode() { Stop(); }

void ClusterNode::Start(const std::string& url, std::function<void(int64_t token)> on_elected,
                        std::function<void(const std::string& why)> on_lost) {
  if (election_ != nullptr) return;
  storage::etcd::LeaderElectionOptions election;
  election.key = config_.prefix + "leader";
  election.value = core::Json({{"node_id", config_.node_id}, {"url", url}}).dump();
  election.ttl_s = config_.lease_ttl_s;
  election.keepalive_period = absl::Milliseconds(config_.lease_ttl_s * 1000 / 3);
  election.margin = std::max(absl::Seconds(1), absl::Milliseconds(config_.lease_ttl_s * 200));
  election.on_elected = [this, on_elected = std::move(on_elected)](int64_t token) {
    leading_ = true;
    if (on_elected) on_elected(token);
  };
  election.on_lost = std::move(on_lost);
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
  return [inner = std::move(inner), this](const core::Switch& sw, uint64_t /*election_id*/)
             -> absl::StatusOr<std::unique_ptr<southbound::SwitchClient>> {
    std::optional<int64_t> token = LeaderToken();
    if (!token) {
      return absl::FailedPreconditionError(
          "fenced: this controller is not the cluster leader; it connects to no switch");
    }
    auto client = inner(sw, static_cast<uint64_t>(*token));
    if (!client.ok()) return client.status();
    return std::unique_ptr<southbound::SwitchClient>(std::make_unique<FencedSwitchClient>(
        std::move(*client), [this] { return LeaderToken(); }, *token));
  };
}

}  // namespace inac::server
