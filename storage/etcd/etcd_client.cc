#include "storage/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inac::storage::etcd {

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(EtcdClientOptions options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd: at least one endpoint is needed");
  }
  std::unique_ptr<EtcdClient> client(new EtcdClient(options));
  for (const std::string& endpoint : options.endpoints) {
    std::string address = endpoint;
    if (absl::StartsWith(address, "https://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint \"", endpoint, "\": https is not supported; use http://"));
    }
    if (absl::StartsWith(address, "http://")) address = address.substr(7);
    while (!address.empty() && address.back() == '/') address.pop_back();
    size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint \"", endpoint,
                       "\" is not [http://]host:port (e.g. http://127.0.0.1:2379)"));
    }
    client->endpoints_.push_back(
        Endpoint{address, Connect(address), std::chrono::steady_clock::now()});
  }
  return client;
}

std::shared_ptr<EtcdClient::Stubs> EtcdClient::Connect(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a replaced channel never shares one
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  auto stubs = std::make_shared<Stubs>();
  stubs->kv = etcdserverpb::KV::NewStub(channel);
  stubs->lease = etcdserverpb::Lease::NewStub(channel);
  stubs->watch = etcdserverpb::Watch::NewStub(channel);
  return stubs;
}

std::shared_ptr<EtcdClient::Stubs> EtcdClient::StubsOf(size_t index) {
  absl::MutexLock l(&mu_);
  return endpoints_[index].stubs;
}

std::string EtcdClient::current_endpoint() const { return endpoints_[Pick()].address; }

void EtcdClient::SetDeadline(grpc::ClientContext* context, absl::Duration timeout) const {
  if (timeout <= absl::ZeroDuration()) timeout = options_.rpc_timeout;
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  // Fail fast on a member that is down instead of waiting out the deadline for a connection...
  // but give a restarting member the dial timeout.
  context->set_wait_for_ready(false);
}

absl::Status EtcdClient::Failed(size_t index, const grpc::Status& status, const char* what) {
  const auto code = status.error_code();
  if (code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED) {
    size_t expected = current_.load();
    if (expected % endpoints_.size() == index)
      current_.compare_exchange_strong(expected, index + 1);
    {
      absl::MutexLock l(&mu_);
      Endpoint& e = endpoints_[index];
      auto now = std::chrono::steady_clock::now();
      if (now - e.created > std::chrono::seconds(1)) {
        e.stubs = Connect(e.address);
        e.created = now;
      }
    }
    return absl::UnavailableError(absl::StrCat("etcd ", what, " at ", endpoints_[index].address,
                                               ": ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("etcd ", what, ": ", status.error_message()));
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request) {
  absl::Status last;
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    size_t index = Pick();
    grpc::ClientContext context;
    SetDeadline(&context);
    etcdserverpb::RangeResponse response;
    grpc::Status status = StubsOf(index)->kv->Range(&context, request, &response);
    if (status.ok()) return response;
    last = Failed(index, status, "range");
    if (!absl::IsUnavailable(last) || endpoints_.size() == 1) break;
  }
  return last;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request) {
  size_t index = Pick();
  grpc::ClientContext context;
  SetDeadline(&context);
  etcdserverpb::TxnResponse response;
  grpc::Status status = StubsOf(index)->kv->Txn(&context, request, &response);
  if (status.ok()) return response;
  return Failed(index, status, "txn");
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::LeaseGrant(int64_t ttl_s) {
  size_t index = Pick();
  grpc::ClientContext context;
  SetDeadline(&context);
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse response;
  grpc::Status status = StubsOf(index)->lease->LeaseGrant(&context, request, &response);
  if (!status.ok()) return Failed(index, status, "lease grant");
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd lease grant: ", response.error()));
  }
  return response;
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease_id, absl::Duration timeout) {
  size_t index = Pick();
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::Status status = StubsOf(index)->lease->LeaseRevoke(&context, request, &response);
  if (!status.ok()) return Failed(index, status, "lease revoke");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease_id) {
  size_t index = Pick();
  grpc::ClientContext context;
  SetDeadline(&context);
  std::shared_ptr<Stubs> stubs = StubsOf(index);  // outlives the stream
  auto stream = stubs->lease->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease_id);
  etcdserverpb::LeaseKeepAliveResponse response;
  bool ok = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  if (ok) {
    context.TryCancel();  // one round trip is all we wanted
    (void)stream->Finish();
    return response.ttl();
  }
  grpc::Status status = stream->Finish();
  if (status.ok()) status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream closed");
  return Failed(index, status, "lease keep-alive");
}

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  for (int i = static_cast<int>(end.size()) - 1; i >= 0; --i) {
    if (static_cast<unsigned char>(end[i]) < 0xff) {
      end[i] = static_cast<char>(static_cast<unsigned char>(end[i]) + 1);
      end.resize(i + 1);
      return end;
    }
  }
  return std::string(1, '\0');  // every key
}

}  // namespace inac::storage::etcd
