// A small client of etcd's v3 gRPC API (api/proto/etcd/, written from etcd's public protos): the
// KV calls (Range, Txn), the Watch stream (through storage/etcd/etcd_watch.h) and the Lease calls
// (LeaseGrant, LeaseRevoke, one LeaseKeepAlive round trip) that EtcdStorage and LeaderElection
// need. Generated protobuf types stay inside storage/etcd/ (docs/architecture.md, "Shape of a
// module").
//
// Endpoints. The client holds one channel per endpoint ("http://127.0.0.1:2379" or
// "127.0.0.1:2379"; https is not supported) and uses one of them at a time. A call that fails
// with a transport error (UNAVAILABLE, DEADLINE_EXCEEDED) moves the client to the next endpoint
// for the following calls; a Range is retried on the next endpoints until one answers (a read is
// safe to repeat), a Txn never (its outcome is unknown: the caller answers Unavailable and a client
// retries with its idempotency key).
//
// Errors: gRPC status codes become the same canonical absl codes, except DEADLINE_EXCEEDED,
// which becomes Unavailable (etcd without a quorum, or unreachable). Every call has a deadline.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/etcdserverpb/rpc.pb.h"

namespace inac::storage::etcd {

struct EtcdClientOptions {
  std::vector<std::string> endpoints;              // at least one
  absl::Duration rpc_timeout = absl::Seconds(3);   // per call
  absl::Duration dial_timeout = absl::Seconds(1);  // waiting for a connection within a call
};

class EtcdClient {
 public:
  // InvalidArgument for no endpoint or an endpoint that is not [http://]host:port. Does not
  // connect (channels connect lazily).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(EtcdClientOptions options);

  // `serializable`: served by the member the client talks to without a quorum round (possibly
  // stale; the member's own applied writes are visible).
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);

  absl::StatusOr<etcdserverpb::LeaseGrantResponse> LeaseGrant(int64_t ttl_s);
  // `timeout` > 0 replaces the per-call timeout (a follower revoking a dead leader's lease while
  // etcd elects a new Raft leader retries sooner than rpc_timeout).
  absl::Status LeaseRevoke(int64_t lease_id, absl::Duration timeout = absl::ZeroDuration());
  // One keep-alive round trip (a LeaseKeepAlive stream with one request and one response).
  // Returns the lease's new TTL in seconds; <= 0 when the lease no longer exists.
  absl::StatusOr<int64_t> LeaseKeepAlive(int64_t lease_id);

  // The endpoint in use (for logs).
  std::string current_endpoint() const;

 private:
  // The stubs of one channel. A channel whose call failed with a transport error is replaced by
  // a new one (at most once a second): a gRPC channel that connected while the member was
  // starting (port bound, not serving yet) can stay stuck waiting for the HTTP/2 SETTINGS frame.
  struct Stubs {
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  friend class EtcdWatch;  // opens its streams on the endpoint in use (storage/etcd/etcd_watch.h)
  struct Endpoint {
    std::string address;
    std::shared_ptr<Stubs> stubs;  // guarded by mu_
    std::chrono::steady_clock::time_point created{};
  };
  explicit EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {}
  size_t Pick() const { return current_.load() % endpoints_.size(); }
  std::shared_ptr<Stubs> StubsOf(size_t index);
  static std::shared_ptr<Stubs> Connect(const std::string& address);
  // Converts a failed call's status; moves to the next endpoint on a transport error.
  absl::Status Failed(size_t index, const grpc::Status& status, const char* what);
  void SetDeadline(grpc::ClientContext* context,
                   absl::Duration timeout = absl::ZeroDuration()) const;

  EtcdClientOptions options_;
  absl::Mutex mu_;
  std::vector<Endpoint> endpoints_;  // the vector is fixed after Create; stubs guarded by mu_
  std::atomic<size_t> current_{0};
};

// The end of the key range holding every key with `prefix` (etcd's "prefix + 1").
std::string PrefixEnd(const std::string& prefix);

}  // namespace inac::storage::etcd
