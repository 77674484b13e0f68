#include "southbound/switch_session.h"

#include <algorithm>
#include <random>
#include <sstream>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "google/rpc/code.pb.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/grpc_status.h"

namespace inac::southbound {

std::string ToString(ElectionId id) {
  std::ostringstream out;
  out << absl::MakeUint128(id.high, id.low);
  return out.str();
}

ElectionId operator+(ElectionId a, ElectionId b) {
  ElectionId sum;
  sum.low = a.low + b.low;
  sum.high = a.high + b.high + (sum.low < a.low ? 1 : 0);
  return sum;
}

namespace {

p4::v1::Uint128 ToProto(ElectionId id) {
  p4::v1::Uint128 out;
  out.set_high(id.high);
  out.set_low(id.low);
  return out;
}

ElectionId FromProto(const p4::v1::Uint128& id) { return ElectionId{id.high(), id.low()}; }

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

}  // namespace

struct SwitchSession::Rpc {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<p4::v1::P4Runtime::Stub> stub;
};

SwitchSession::SwitchSession(SessionOptions options)
    : options_(std::move(options)), rpc_(std::make_unique<Rpc>()) {
  if (options_.channel != nullptr) {
    rpc_->channel = options_.channel;
  } else {
    // gRPC's own reconnect backoff (1 s initial, up to 120 s) would stack on the session's:
    // keep it short so that the channel notices a switch that is back within ~1 s.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
    rpc_->channel =
        grpc::CreateCustomChannel(options_.address, grpc::InsecureChannelCredentials(), args);
  }
  rpc_->stub = p4::v1::P4Runtime::NewStub(rpc_->channel);
  if (options_.random) {
    random_ = options_.random;
  } else {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    random_ = [engine] { return std::uniform_real_distribution<double>(0.0, 1.0)(*engine); };
  }
  absl::MutexLock lock(&mu_);
  election_id_ = options_.election_id;
}

SwitchSession::~SwitchSession() { Disconnect(); }

absl::Status SwitchSession::Connect() {
  int64_t failed_before = 0;
  {
    absl::MutexLock lock(&mu_);
    if (connected_) return absl::OkStatus();
    if (backing_off_) {
      // The stream thread is waiting before its next attempt (it retries at once when the
      // channel becomes ready): say so rather than wait for an answer that cannot come. The
      // text stays the same from pass to pass, so callers that log changes log it once.
      return absl::Status(
          last_error_.code() == absl::StatusCode::kOk ? absl::StatusCode::kUnavailable
                                                      : last_error_.code(),
          absl::StrCat("device ", options_.device_id, " at ", options_.address, " is unreachable (",
                       last_error_.message(), "); reconnecting as soon as it accepts connections"));
    }
    failed_before = streams_failed_;
    if (!running_) {
      running_ = true;
      stopping_ = false;
      thread_ = std::thread([this] { Run(); });
    }
  }
  absl::MutexLock lock(&mu_);
  auto answered_or_failed = [this, failed_before]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return connected_ || streams_failed_ > failed_before;
  };
  mu_.AwaitWithTimeout(absl::Condition(&answered_or_failed), options_.connect_timeout);
  if (connected_) return absl::OkStatus();
  if (streams_failed_ > failed_before) {
    return absl::Status(last_error_.code(),
                        absl::StrCat("P4Runtime stream to device ", options_.device_id, " at ",
                                     options_.address, ": ", last_error_.message()));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "device ", options_.device_id, " at ", options_.address,
      " did not answer arbitration within ", absl::FormatDuration(options_.connect_timeout)));
}

void SwitchSession::Disconnect() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stopping_ = true;
    if (stream_context_ != nullptr) stream_context_->TryCancel();
    thread = std::move(thread_);
  }
  thread.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
  stopping_ = false;
  connected_ = false;
  primary_ = false;
}

bool SwitchSession::IsConnected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

bool SwitchSession::IsPrimary() const {
  absl::MutexLock lock(&mu_);
  return primary_;
}

ArbitrationState SwitchSession::state() const {
  absl::MutexLock lock(&mu_);
  return ArbitrationState{connected_,    primary_,    election_id_,
                          highest_seen_, last_error_, streams_opened_};
}

bool SwitchSession::AwaitPrimary(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&primary_), timeout);
  return primary_;
}

bool SwitchSession::AwaitNotPrimary(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto not_primary = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !primary_; };
  mu_.AwaitWithTimeout(absl::Condition(&not_primary), timeout);
  return !primary_;
}

bool SwitchSession::AwaitConnected(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&connected_), timeout);
  return connected_;
}

ElectionId SwitchSession::CurrentElectionId() const {
  absl::MutexLock lock(&mu_);
  return election_id_;
}

void SwitchSession::Run() {
  ExponentialBackoff backoff(options_.backoff, random_);
  while (true) {
    auto context = std::make_unique<grpc::ClientContext>();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      stream_context_ = context.get();
      ++streams_opened_;
    }
    auto stream = rpc_->stub->StreamChannel(context.get());
    auto send = [&](ElectionId id) {
      p4::v1::StreamMessageRequest request;
      auto* arbitration = request.mutable_arbitration();
      arbitration->set_device_id(options_.device_id);
      if (!options_.role.empty()) arbitration->mutable_role()->set_name(options_.role);
      *arbitration->mutable_election_id() = ToProto(id);
      return stream->Write(request);
    };
    bool ok = send(CurrentElectionId());
    p4::v1::StreamMessageResponse response;
    while (ok && stream->Read(&response)) {
      if (response.has_arbitration()) {
        ok = OnArbitration(response.arbitration(), send);
        backoff.Reset();
      }
      // Packet-in, digests and stream errors are not used by INAC's pipeline.
    }
    if (!ok) context->TryCancel();
    const grpc::Status status = stream->Finish();
    // Whether the transport was up when the stream ended: if it was, the switch refused or
    // closed the stream and waiting for the channel to become ready tells nothing.
    const bool channel_was_ready =
        rpc_->channel->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      stream_context_ = nullptr;
      connected_ = false;
      primary_ = false;
      ++streams_failed_;
      last_error_ = status.ok() ? absl::UnavailableError("stream closed by the switch")
                                : FromGrpcStatus(status);
      if (stopping_) break;
      // A new stream starts from the configured id; the switch re-ranks it.
      election_id_ = options_.election_id;
      delay = backoff.Next();
      backing_off_ = true;
    }
    if (options_.on_backoff) options_.on_backoff(delay);
    if (WaitBeforeRetry(delay, channel_was_ready)) backoff.Reset();
    absl::MutexLock lock(&mu_);
    backing_off_ = false;
    if (stopping_) break;
  }
  absl::MutexLock lock(&mu_);
  stream_context_ = nullptr;
}

bool SwitchSession::WaitBeforeRetry(absl::Duration delay, bool channel_was_ready) {
  const absl::Time deadline = absl::Now() + delay;
  // Slices short enough that Disconnect is honoured quickly.
  constexpr absl::Duration kSlice = absl::Milliseconds(50);
  // Once the transport has been seen down, the channel becoming READY means the switch accepts
  // connections again: retry at once, whatever the backoff says. A channel that stays READY
  // throughout (the switch refused or closed the stream) waits the full delay.
  bool seen_down = !channel_was_ready;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return false;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    const grpc_connectivity_state state = rpc_->channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) {
      if (seen_down) return true;
    } else {
      seen_down = true;
    }
    rpc_->channel->WaitForStateChange(state, absl::ToChronoTime(std::min(deadline, now + kSlice)));
  }
}

bool SwitchSession::OnArbitration(const p4::v1::MasterArbitrationUpdate& update,
                                  const std::function<bool(ElectionId)>& send) {
  std::optional<ElectionId> claim;
  {
    absl::MutexLock lock(&mu_);
    connected_ = true;
    if (update.has_election_id()) highest_seen_ = FromProto(update.election_id());
    const int code = update.status().code();
    primary_ = code == google::rpc::OK;
    if (code == google::rpc::NOT_FOUND && options_.claim_primary_when_vacant) {
      // No primary. The switch only accepts an id >= the highest it has seen.
      const ElectionId highest = highest_seen_.value_or(ElectionId{});
      ElectionId candidate = election_id_;
      if (candidate < highest) candidate = highest + options_.election_id;
      election_id_ = candidate;
      claim = candidate;
    }
  }
  if (claim.has_value()) return send(*claim);
  return true;
}

absl::StatusOr<std::vector<absl::Status>> SwitchSession::Write(
    const std::vector<p4::v1::Update>& updates, int64_t* batches) {
  std::vector<p4::v1::Update> copy = updates;
  return WriteInPlace(&copy, batches);
}

absl::StatusOr<std::vector<absl::Status>> SwitchSession::WriteInPlace(
    std::vector<p4::v1::Update>* updates, int64_t* batches) {
  std::vector<absl::Status> results;
  results.reserve(updates->size());
  int64_t rpcs = 0;
  size_t next = 0;
  const ElectionId election_id = CurrentElectionId();
  while (next < updates->size()) {
    p4::v1::WriteRequest request;
    request.set_device_id(options_.device_id);
    if (!options_.role.empty()) request.set_role(options_.role);
    *request.mutable_election_id() = ToProto(election_id);
    size_t bytes = 0;
    const size_t first = next;
    while (next < updates->size() &&
           static_cast<size_t>(request.updates_size()) < options_.max_batch_updates) {
      const size_t size = (*updates)[next].ByteSizeLong();
      if (request.updates_size() > 0 && bytes + size > options_.max_batch_bytes) break;
      // Moved into the request (no copy) and moved back after the RPC.
      request.mutable_updates()->Add(std::move((*updates)[next]));
      bytes += size;
      ++next;
    }
    grpc::ClientContext context;
    context.set_deadline(Deadline(options_.rpc_timeout));
    p4::v1::WriteResponse response;
    const grpc::Status status = rpc_->stub->Write(&context, request, &response);
    for (int i = 0; i < request.updates_size(); ++i) {
      (*updates)[first + i] = std::move(*request.mutable_updates(i));
    }
    ++rpcs;
    if (batches != nullptr) *batches = rpcs;
    auto decoded = DecodeWriteStatus(status, request.updates_size());
    if (!decoded.ok()) return decoded.status();
    for (auto& s : *decoded) results.push_back(std::move(s));
  }
  if (batches != nullptr) *batches = rpcs;
  return results;
}

absl::StatusOr<std::vector<p4::v1::Entity>> SwitchSession::Read(
    const std::vector<p4::v1::Entity>& filters) {
  p4::v1::ReadRequest request;
  request.set_device_id(options_.device_id);
  if (!options_.role.empty()) request.set_role(options_.role);
  for (const auto& filter : filters) *request.add_entities() = filter;
  grpc::ClientContext context;
  context.set_deadline(Deadline(options_.rpc_timeout));
  auto reader = rpc_->stub->Read(&context, request);
  std::vector<p4::v1::Entity> entities;
  p4::v1::ReadResponse response;
  while (reader->Read(&response)) {
    for (auto& entity : *response.mutable_entities()) entities.push_back(std::move(entity));
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return entities;
}

absl::StatusOr<std::optional<uint64_t>> SwitchSession::GetPipelineCookie() {
  p4::v1::GetForwardingPipelineConfigRequest request;
  request.set_device_id(options_.device_id);
  request.set_response_type(p4::v1::GetForwardingPipelineConfigRequest::COOKIE_ONLY);
  grpc::ClientContext context;
  context.set_deadline(Deadline(options_.rpc_timeout));
  p4::v1::GetForwardingPipelineConfigResponse response;
  const grpc::Status status = rpc_->stub->GetForwardingPipelineConfig(&context, request, &response);
  // BMv2 (PI) answers FAILED_PRECONDITION when no pipeline is set; the spec leaves config unset.
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) return std::nullopt;
  if (!status.ok()) return FromGrpcStatus(status);
  if (!response.has_config() || !response.config().has_cookie()) return std::nullopt;
  return response.config().cookie().cookie();
}

absl::Status SwitchSession::SetPipeline(const p4::config::v1::P4Info& p4info,
                                        const std::string& device_config, uint64_t cookie) {
  p4::v1::SetForwardingPipelineConfigRequest request;
  request.set_device_id(options_.device_id);
  if (!options_.role.empty()) request.set_role(options_.role);
  *request.mutable_election_id() = ToProto(CurrentElectionId());
  request.set_action(p4::v1::SetForwardingPipelineConfigRequest::VERIFY_AND_COMMIT);
  auto* config = request.mutable_config();
  *config->mutable_p4info() = p4info;
  config->set_p4_device_config(device_config);
  config->mutable_cookie()->set_cookie(cookie);
  grpc::ClientContext context;
  context.set_deadline(Deadline(options_.rpc_timeout));
  p4::v1::SetForwardingPipelineConfigResponse response;
  return FromGrpcStatus(rpc_->stub->SetForwardingPipelineConfig(&context, request, &response));
}

absl::StatusOr<bool> SwitchSession::EnsurePipeline(const p4::config::v1::P4Info& p4info,
                                                   const std::string& device_config,
                                                   uint64_t cookie) {
  auto current = GetPipelineCookie();
  if (!current.ok()) return current.status();
  if (current->has_value() && **current == cookie) return false;
  if (auto status = SetPipeline(p4info, device_config, cookie); !status.ok()) return status;
  return true;
}

}  // namespace inac::southbound
