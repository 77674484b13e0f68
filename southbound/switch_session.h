// SwitchSession: one controller's P4Runtime session with one device (P4Runtime spec v1.3,
// sections 5 "Client Arbitration and Controller Replication", 12 Write, 13 Read, 14-15
// Set/GetForwardingPipelineConfig).
//
// - A background thread keeps the StreamChannel open: it sends MasterArbitrationUpdate (device
//   id, election id, role), tracks primary/backup from every arbitration message the switch
//   sends, and when the stream ends reconnects with exponential backoff and jitter. The backoff
//   never delays a switch that comes back: while waiting, the session watches the gRPC channel's
//   connectivity and, when the switch was unreachable and the channel becomes READY (the switch
//   accepts connections again), retries at once and starts the backoff over. A switch is thus
//   re-arbitrated within about a second of accepting connections whatever its downtime (the
//   channel's own reconnect backoff is capped at 1 s for channels the session creates).
// - When the switch reports that there is no primary (NOT_FOUND, e.g. the primary's stream
//   dropped, spec behaviour) and `claim_primary_when_vacant` is set, the session re-arbitrates
//   with election id = highest id the switch reports + its configured id (unique per controller,
//   order-preserving), so the highest-configured live controller becomes primary. Targets that
//   promote a backup at once (BMv2) simply send OK, which the session takes as is.
// - Write/Read/pipeline RPCs are unary (Read server-streaming) with a deadline.
//
// The entity-level calls (Write, Read, EnsurePipeline) are the codec edge and take the
// generated protobuf types (forward-declared here); everything else is core/absl types. Callers
// outside southbound/ use SwitchClient instead.
//
// Thread safety: all methods may be called from any thread. Write/Read/pipeline RPCs run on the
// caller's thread; the stream runs on the session's own thread.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "southbound/backoff.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace p4::v1 {
class Entity;
class Update;
class MasterArbitrationUpdate;
}  // namespace p4::v1

namespace p4::config::v1 {
class P4Info;
}  // namespace p4::config::v1

namespace inac::southbound {

// A 128-bit election id (P4Runtime Uint128), ordered as an unsigned integer.
struct ElectionId {
  uint64_t high = 0;
  uint64_t low = 0;

  auto operator<=>(const ElectionId&) const = default;
  bool operator==(const ElectionId&) const = default;
};
// 128-bit sum (wraps).
ElectionId operator+(ElectionId a, ElectionId b);
// Decimal, as the 128-bit number (e.g. "18446744073709551621" for {1, 5}).
std::string ToString(ElectionId id);

struct SessionOptions {
  std::string address;                     // "host:port"; ignored when `channel` is set
  std::shared_ptr<grpc::Channel> channel;  // optional, e.g. an in-process channel
  uint64_t device_id = 1;
  ElectionId election_id{0, 1};  // must be unique among the device's controllers
  std::string role;              // empty: the default role (full pipeline access)
  bool claim_primary_when_vacant = true;
  absl::Duration rpc_timeout = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(5);
  BackoffPolicy backoff;
  // Uniform [0, 1) source for backoff jitter; default: a generator seeded from the OS.
  std::function<double()> random;
  // Called with each backoff delay before it is waited (observability, tests).
  std::function<void(absl::Duration)> on_backoff;
  // Write batches are cut at whichever limit comes first.
  size_t max_batch_updates = 2000;
  size_t max_batch_bytes = 2 * 1024 * 1024;  // below gRPC's default 4 MiB message limit
};

// What the session knows about arbitration at one instant.
struct ArbitrationState {
  bool connected = false;  // the stream is up and the switch has answered arbitration
  bool primary = false;
  ElectionId election_id;                  // the id this session currently uses
  std::optional<ElectionId> highest_seen;  // as reported by the switch
  absl::Status last_error;                 // why the last stream ended (OK if none ended)
  int64_t streams_opened = 0;
};

class SwitchSession {
 public:
  explicit SwitchSession(SessionOptions options);
  ~SwitchSession();  // Disconnects.

  SwitchSession(const SwitchSession&) = delete;
  SwitchSession& operator=(const SwitchSession&) = delete;

  // Starts the stream thread (if not running) and waits up to `connect_timeout` for the switch's
  // first arbitration answer. OK when answered (primary or backup); otherwise the error that
  // ended the first attempt (Unavailable when unreachable; InvalidArgument for a duplicate
  // election id; NotFound / FailedPrecondition for a bad device id), or DeadlineExceeded. While
  // the thread waits between attempts, returns at once with the last error and when the next
  // attempt is due. The thread keeps retrying in the background in every case until Disconnect.
  absl::Status Connect();

  // Stops the stream thread and closes the stream (the switch sees the primary leave).
  void Disconnect();

  bool IsConnected() const;
  bool IsPrimary() const;
  ArbitrationState state() const;

  // Blocks until this session is primary or `timeout` passes; returns IsPrimary().
  bool AwaitPrimary(absl::Duration timeout) const;
  // Blocks until this session is not primary (the switch has told it about a higher election id,
  // or the stream ended) or `timeout` passes; returns !IsPrimary().
  bool AwaitNotPrimary(absl::Duration timeout) const;
  // Blocks until the session is connected (primary or backup) or `timeout` passes.
  bool AwaitConnected(absl::Duration timeout) const;

  // Applies `updates` in batches (size-bounded by the options), in order, one RPC per batch.
  // Returns one status per update, decoded from the p4.v1.Error details (grpc_status.h). A
  // non-OK return means a whole batch failed (e.g. PermissionDenied when not primary,
  // Unavailable); batches before it were applied. `batches`, if not null, receives the number
  // of RPCs sent.
  absl::StatusOr<std::vector<absl::Status>> Write(const std::vector<p4::v1::Update>& updates,
                                                  int64_t* batches = nullptr);
  // Write without copying: each batch's updates are moved into its request and moved back after
  // its RPC, so `*updates` holds the same updates on return (also on error).
  absl::StatusOr<std::vector<absl::Status>> WriteInPlace(std::vector<p4::v1::Update>* updates,
                                                         int64_t* batches = nullptr);

  // Reads every entity matching `filters` (wildcards per the spec: table_id only = whole
  // table, multicast group 0 = all groups, counter id 0 = all counters). The switch's error
  // otherwise (FailedPrecondition when it has no pipeline).
  absl::StatusOr<std::vector<p4::v1::Entity>> Read(const std::vector<p4::v1::Entity>& filters);

  // The cookie of the pipeline the switch runs; nullopt when it has none (spec: config unset;
  // BMv2: FAILED_PRECONDITION) or when the config carries no cookie.
  absl::StatusOr<std::optional<uint64_t>> GetPipelineCookie();

  // Pushes a pipeline (VERIFY_AND_COMMIT: the forwarding state is cleared).
  absl::Status SetPipeline(const p4::config::v1::P4Info& p4info, const std::string& device_config,
                           uint64_t cookie);

  // GetPipelineCookie, then SetPipeline when the cookie is missing or differs. Returns true
  // when it pushed.
  absl::StatusOr<bool> EnsurePipeline(const p4::config::v1::P4Info& p4info,
                                      const std::string& device_config, uint64_t cookie);

  uint64_t device_id() const { return options_.device_id; }

 private:
  struct Rpc;  // the generated stub, hidden from this header

  void Run();
  // Handles one arbitration message; may re-arbitrate on the stream. Returns false when the
  // stream write failed.
  bool OnArbitration(const p4::v1::MasterArbitrationUpdate& update,
                     const std::function<bool(ElectionId)>& send);
  ElectionId CurrentElectionId() const;
  // Waits `delay` before the next stream attempt, or less: once the channel has been seen not
  // ready (at the failure, `channel_was_ready` false, or during the wait) and it becomes READY
  // (the switch accepts connections again), returns true at once (the caller resets its
  // backoff). False after the full delay or on Disconnect.
  bool WaitBeforeRetry(absl::Duration delay, bool channel_was_ready);

  const SessionOptions options_;
  std::unique_ptr<Rpc> rpc_;
  std::function<double()> random_;

  mutable absl::Mutex mu_;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* stream_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool primary_ ABSL_GUARDED_BY(mu_) = false;
  ElectionId election_id_ ABSL_GUARDED_BY(mu_);
  std::optional<ElectionId> highest_seen_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  int64_t streams_opened_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t streams_failed_ ABSL_GUARDED_BY(mu_) = 0;
  bool backing_off_ ABSL_GUARDED_BY(mu_) = false;  // the thread waits before its next attempt
};

}  // namespace inac::southbound
