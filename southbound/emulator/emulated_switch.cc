#include "southbound/emulator/emulated_switch.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "southbound/emulator/switch_state.h"

namespace inac::southbound::emulator {
namespace {

using p4::v1::StreamMessageRequest;
using p4::v1::StreamMessageResponse;
using StreamRw = grpc::ServerReaderWriter<StreamMessageResponse, StreamMessageRequest>;

constexpr char kApiVersion[] = "1.3.0";
constexpr char kErrorSpace[] = "inac-emulator";
constexpr int kReadChunk = 1024;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::uint128 ToUint128(const p4::v1::Uint128& v) { return absl::MakeUint128(v.high(), v.low()); }

void SetUint128(absl::uint128 v, p4::v1::Uint128* out) {
  out->set_high(absl::Uint128High64(v));
  out->set_low(absl::Uint128Low64(v));
}

// The answer to a stream message other than arbitration: the emulated switch has no data plane.
StreamMessageResponse UnsupportedStreamMessage(const StreamMessageRequest& request) {
  StreamMessageResponse response;
  p4::v1::StreamError* error = response.mutable_error();
  error->set_canonical_code(google::rpc::UNIMPLEMENTED);
  error->set_space(kErrorSpace);
  if (request.has_packet()) {
    error->set_message("the emulated switch has no data plane: packet-out dropped");
    *error->mutable_packet_out()->mutable_packet_out() = request.packet();
  } else if (request.has_digest_ack()) {
    error->set_message("the emulated switch has no digests");
    *error->mutable_digest_list_ack()->mutable_digest_list_ack() = request.digest_ack();
  } else {
    error->set_message("unsupported stream message");
    error->mutable_other();
  }
  return response;
}

// The status for a request naming a device this server does not hold.
grpc::Status UnknownDevice(uint64_t device_id) {
  if (device_id == 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "device_id missing");
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("unknown device ", device_id));
}

}  // namespace

// One device: its pipeline, forwarding state, arbitration and write log. The RPC handlers of
// EmulatedSwitch::Router call it once they have found the device a request names.
class EmulatedSwitch::Device {
 public:
  Device(const EmulatedSwitchOptions& options, uint64_t device_id, const std::string& write_log)
      : device_id_(device_id), deviations_(options.deviations) {
    if (!write_log.empty()) write_log_ = std::fopen(write_log.c_str(), "a");
    if (options.p4info.has_value()) {
      *config_.mutable_p4info() = *options.p4info;
      has_config_ = true;
      state_ = std::make_unique<SwitchState>(config_.p4info());
    }
  }

  ~Device() {
    if (write_log_ != nullptr) std::fclose(write_log_);
  }

  uint64_t device_id() const { return device_id_; }

  // One line of the write log (see EmulatedSwitchOptions::write_log_path).
  void LogWrite(const char* rpc, bool has_election_id, absl::uint128 election_id,
                const grpc::Status& result) {
    if (write_log_ == nullptr) return;
    std::fprintf(
        write_log_, "%s election_id=%llu:%llu result=%d\n", rpc,
        has_election_id ? static_cast<unsigned long long>(absl::Uint128High64(election_id)) : 0ULL,
        has_election_id ? static_cast<unsigned long long>(absl::Uint128Low64(election_id)) : 0ULL,
        static_cast<int>(result.error_code()));
    std::fflush(write_log_);
  }

  int64_t NumTableEntries() const {
    absl::MutexLock lock(&mu_);
    return state_ == nullptr ? 0 : state_->num_table_entries();
  }

  grpc::Status Write(const p4::v1::WriteRequest* request) {
    if (grpc::Status s = CheckDevice(request->device_id()); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    if (grpc::Status s = CheckPrimary(request->role(), request->has_election_id(),
                                      ToUint128(request->election_id()));
        !s.ok()) {
      LogWrite("write", request->has_election_id(), ToUint128(request->election_id()), s);
      return s;
    }
    LogWrite("write", request->has_election_id(), ToUint128(request->election_id()),
             grpc::Status::OK);
    if (state_ == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no forwarding pipeline");
    }
    if (request->atomicity() != p4::v1::WriteRequest::CONTINUE_ON_ERROR) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "only CONTINUE_ON_ERROR atomicity is supported");
    }
    std::vector<absl::Status> results;
    results.reserve(static_cast<size_t>(request->updates_size()));
    int failed = 0;
    for (const auto& update : request->updates()) {
      results.push_back(state_->Apply(update));
      if (!results.back().ok()) ++failed;
    }
    if (failed == 0) return grpc::Status::OK;
    // P4Runtime spec v1.3, section 12.3: UNKNOWN, one p4.v1.Error per update in the details.
    google::rpc::Status status;
    status.set_code(google::rpc::UNKNOWN);
    status.set_message(absl::StrCat(failed, " of ", results.size(), " updates failed"));
    for (const absl::Status& r : results) {
      p4::v1::Error error;
      error.set_canonical_code(static_cast<int32_t>(r.code()));
      if (!r.ok()) {
        error.set_message(std::string(r.message()));
        error.set_space(kErrorSpace);
      }
      status.add_details()->PackFrom(error);
    }
    return grpc::Status(grpc::StatusCode::UNKNOWN, status.message(), status.SerializeAsString());
  }

  grpc::Status Read(const p4::v1::ReadRequest* request,
                    grpc::ServerWriter<p4::v1::ReadResponse>* writer) {
    if (grpc::Status s = CheckDevice(request->device_id()); !s.ok()) return s;
    std::vector<p4::v1::Entity> entities;
    {
      absl::MutexLock lock(&mu_);
      if (state_ == nullptr) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no forwarding pipeline");
      }
      for (const auto& query : request->entities()) {
        if (absl::Status s = state_->Read(query, &entities); !s.ok()) return ToGrpc(s);
      }
    }
    size_t i = 0;
    do {
      p4::v1::ReadResponse response;
      for (size_t n = 0; n < kReadChunk && i < entities.size(); ++n, ++i) {
        *response.add_entities() = std::move(entities[i]);
      }
      if (!writer->Write(response)) break;  // the client went away
    } while (i < entities.size());
    return grpc::Status::OK;
  }

  grpc::Status SetForwardingPipelineConfig(
      const p4::v1::SetForwardingPipelineConfigRequest* request) {
    using Req = p4::v1::SetForwardingPipelineConfigRequest;
    if (grpc::Status s = CheckDevice(request->device_id()); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    if (grpc::Status s = CheckPrimary(request->role(), request->has_election_id(),
                                      ToUint128(request->election_id()));
        !s.ok()) {
      LogWrite("set_pipeline", request->has_election_id(), ToUint128(request->election_id()), s);
      return s;
    }
    LogWrite("set_pipeline", request->has_election_id(), ToUint128(request->election_id()),
             grpc::Status::OK);
    auto verify = [&]() -> absl::Status {
      if (!request->has_config()) return absl::InvalidArgumentError("no config in the request");
      if (!request->config().has_p4info())
        return absl::InvalidArgumentError("config without p4info");
      return VerifyP4Info(request->config().p4info());
    };
    switch (request->action()) {
      case Req::VERIFY:
        return ToGrpc(verify());
      case Req::VERIFY_AND_SAVE:
      case Req::VERIFY_AND_COMMIT: {
        if (absl::Status s = verify(); !s.ok()) return ToGrpc(s);
        config_ = request->config();
        has_config_ = true;
        committed_ = request->action() == Req::VERIFY_AND_COMMIT;
        state_ = std::make_unique<SwitchState>(config_.p4info());
        return grpc::Status::OK;
      }
      case Req::COMMIT:
        if (request->has_config()) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "COMMIT takes no config");
        }
        if (!has_config_ || committed_) {
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no saved config to commit");
        }
        committed_ = true;
        return grpc::Status::OK;
      case Req::RECONCILE_AND_COMMIT:
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                            "RECONCILE_AND_COMMIT is not supported");
      default:
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "pipeline action unspecified");
    }
  }

  grpc::Status GetForwardingPipelineConfig(
      const p4::v1::GetForwardingPipelineConfigRequest* request,
      p4::v1::GetForwardingPipelineConfigResponse* response) {
    using Req = p4::v1::GetForwardingPipelineConfigRequest;
    if (grpc::Status s = CheckDevice(request->device_id()); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    if (!has_config_) {
      if (deviations_.get_without_pipeline_fails) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no forwarding pipeline");
      }
      response->mutable_config();
      return grpc::Status::OK;
    }
    p4::v1::ForwardingPipelineConfig* out = response->mutable_config();
    if (config_.has_cookie()) *out->mutable_cookie() = config_.cookie();
    switch (request->response_type()) {
      case Req::ALL:
        *out = config_;
        return grpc::Status::OK;
      case Req::COOKIE_ONLY:
        return grpc::Status::OK;
      case Req::P4INFO_AND_COOKIE:
        *out->mutable_p4info() = config_.p4info();
        return grpc::Status::OK;
      case Req::DEVICE_CONFIG_AND_COOKIE:
        out->set_p4_device_config(config_.p4_device_config());
        return grpc::Status::OK;
      default:
        response->Clear();
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown response type");
    }
  }

  // Serves one stream whose first arbitration update, `first`, names this device; returns when
  // the stream ends (the status it ends with).
  grpc::Status ServeStream(StreamRw* rw, const p4::v1::MasterArbitrationUpdate& first) {
    auto stream = std::make_shared<Stream>();
    stream->rw = rw;
    {
      absl::MutexLock lock(&mu_);
      stream->serial = next_serial_++;
      streams_[stream->serial] = stream;
    }
    grpc::Status end = HandleArbitration(stream, first);
    StreamMessageRequest request;
    while (end.ok() && rw->Read(&request)) {
      if (request.has_arbitration()) {
        end = HandleArbitration(stream, request.arbitration());
        continue;
      }
      Send(*stream, UnsupportedStreamMessage(request));
    }
    CloseStream(stream);
    return end;
  }

 private:
  struct Stream {
    uint64_t serial = 0;
    StreamRw* rw = nullptr;
    absl::Mutex write_mu;
    bool open ABSL_GUARDED_BY(write_mu) = true;
    // Arbitration, guarded by Device::mu_.
    bool arbitrated = false;
    std::string role;
    bool has_election_id = false;
    absl::uint128 election_id = 0;
  };
  struct Role {
    // The highest election id ever accepted as primary for the role (spec: a client becomes
    // primary with an id >= it). None: the role never had a primary.
    std::optional<absl::uint128> accepted;
  };
  struct Notification {
    std::shared_ptr<Stream> stream;
    StreamMessageResponse message;
  };

  grpc::Status CheckDevice(uint64_t device_id) const {
    if (device_id == device_id_) return grpc::Status::OK;
    return UnknownDevice(device_id);
  }

  grpc::Status CheckPrimary(const std::string& role, bool has_election_id,
                            absl::uint128 election_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Stream* primary = Primary(role);
    if (primary == nullptr) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "there is no primary client");
    }
    if (!has_election_id || election_id != primary->election_id) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "not the primary client");
    }
    return grpc::Status::OK;
  }

  // The connected stream of `role` holding the accepted election id (nullptr: no primary).
  Stream* Primary(const std::string& role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = roles_.find(role);
    if (it == roles_.end() || !it->second.accepted.has_value()) return nullptr;
    for (const auto& [serial, s] : streams_) {
      if (s->arbitrated && s->role == role && s->has_election_id &&
          s->election_id == *it->second.accepted) {
        return s.get();
      }
    }
    return nullptr;
  }

  // The connected, arbitrated stream of `role` with the highest election id (nullptr if none).
  Stream* Highest(const std::string& role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Stream* best = nullptr;
    for (const auto& [serial, s] : streams_) {
      if (!s->arbitrated || s->role != role || !s->has_election_id) continue;
      if (best == nullptr || s->election_id > best->election_id) best = s.get();
    }
    return best;
  }

  // The answer to `s`: the role's highest accepted election id and s's standing.
  StreamMessageResponse AnswerFor(const Stream& s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    StreamMessageResponse response;
    p4::v1::MasterArbitrationUpdate* a = response.mutable_arbitration();
    a->set_device_id(device_id_);
    if (!s.role.empty()) a->mutable_role()->set_name(s.role);
    const Role& role = roles_.at(s.role);
    if (role.accepted.has_value()) SetUint128(*role.accepted, a->mutable_election_id());
    const Stream* primary = Primary(s.role);
    if (primary == &s) {
      a->mutable_status()->set_code(google::rpc::OK);
      a->mutable_status()->set_message("primary");
    } else if (primary != nullptr) {
      a->mutable_status()->set_code(google::rpc::ALREADY_EXISTS);
      a->mutable_status()->set_message("a primary client is connected");
    } else {
      a->mutable_status()->set_code(google::rpc::NOT_FOUND);
      a->mutable_status()->set_message("there is no primary client");
    }
    return response;
  }

  // Answers to every arbitrated stream of `role`.
  void NotifyRole(const std::string& role, std::vector<Notification>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [serial, s] : streams_) {
      if (s->arbitrated && s->role == role) out->push_back({s, AnswerFor(*s)});
    }
  }

  grpc::Status HandleArbitration(const std::shared_ptr<Stream>& stream,
                                 const p4::v1::MasterArbitrationUpdate& update) {
    absl::MutexLock send_lock(&send_mu_);
    std::vector<Notification> notifications;
    grpc::Status result = grpc::Status::OK;
    {
      absl::MutexLock lock(&mu_);
      const std::string& role = update.role().name();
      bool has_id = update.has_election_id();
      absl::uint128 id = ToUint128(update.election_id());
      if (grpc::Status s = CheckDevice(update.device_id()); !s.ok()) {
        result = s;
      } else if (stream->arbitrated && stream->role != role) {
        result =
            grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "a stream cannot change its role");
      } else if (has_id) {
        for (const auto& [serial, s] : streams_) {
          if (s.get() != stream.get() && s->arbitrated && s->role == role && s->has_election_id &&
              s->election_id == id) {
            result = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "election id already used by another client");
          }
        }
      }
      if (result.ok()) {
        Role& r = roles_[role];
        const bool was_primary = Primary(role) == stream.get();
        stream->arbitrated = true;
        stream->role = role;
        stream->has_election_id = has_id;
        stream->election_id = id;
        // P4Runtime spec v1.3, section 5: an id >= the highest accepted one makes the client
        // primary (the same id again re-confirms it); every client of the role is told.
        const bool is_primary = has_id && (!r.accepted.has_value() || id >= *r.accepted);
        if (is_primary) r.accepted = id;
        if (is_primary || was_primary) {
          NotifyRole(role, &notifications);
        } else {
          notifications.push_back({stream, AnswerFor(*stream)});
        }
      }
    }
    for (Notification& n : notifications) Send(*n.stream, n.message);
    return result;
  }

  void CloseStream(const std::shared_ptr<Stream>& stream) {
    absl::MutexLock send_lock(&send_mu_);
    std::vector<Notification> notifications;
    {
      absl::MutexLock lock(&mu_);
      const bool was_primary = stream->arbitrated && Primary(stream->role) == stream.get();
      streams_.erase(stream->serial);
      if (was_primary) {
        if (deviations_.promote_backup_immediately) {
          if (Stream* h = Highest(stream->role); h != nullptr) {
            roles_[stream->role].accepted = h->election_id;
          }
        }
        NotifyRole(stream->role, &notifications);
      }
    }
    {
      absl::MutexLock lock(&stream->write_mu);
      stream->open = false;
    }
    for (Notification& n : notifications) Send(*n.stream, n.message);
  }

  void Send(Stream& stream, const StreamMessageResponse& message) {
    absl::MutexLock lock(&stream.write_mu);
    if (stream.open) stream.rw->Write(message);
  }

  const uint64_t device_id_;
  const Bmv2Deviations deviations_;
  std::FILE* write_log_ = nullptr;  // guarded by mu_ (written under it)

  // Serialises arbitration decisions with the answers they cause. Order: send_mu_, mu_,
  // Stream::write_mu.
  absl::Mutex send_mu_;
  mutable absl::Mutex mu_;
  bool has_config_ ABSL_GUARDED_BY(mu_) = false;
  bool committed_ ABSL_GUARDED_BY(mu_) = true;
  p4::v1::ForwardingPipelineConfig config_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SwitchState> state_ ABSL_GUARDED_BY(mu_);
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Role> roles_ ABSL_GUARDED_BY(mu_);
};

// The P4Runtime service: finds the device each request names (by its device_id) and hands the
// request to it. Streams name their device in their first arbitration update; messages before it
// are answered as unsupported (as a single device does).
class EmulatedSwitch::Router final : public p4::v1::P4Runtime::Service {
 public:
  // `devices` hold consecutive ids from `first_id`. Not owned; they outlive the server.
  Router(uint64_t first_id, const std::vector<std::unique_ptr<Device>>* devices)
      : first_id_(first_id), devices_(devices) {}

  grpc::Status Capabilities(grpc::ServerContext*, const p4::v1::CapabilitiesRequest*,
                            p4::v1::CapabilitiesResponse* response) override {
    response->set_p4runtime_api_version(kApiVersion);
    return grpc::Status::OK;
  }

  grpc::Status Write(grpc::ServerContext*, const p4::v1::WriteRequest* request,
                     p4::v1::WriteResponse*) override {
    Device* d = Find(request->device_id());
    return d == nullptr ? UnknownDevice(request->device_id()) : d->Write(request);
  }

  grpc::Status Read(grpc::ServerContext*, const p4::v1::ReadRequest* request,
                    grpc::ServerWriter<p4::v1::ReadResponse>* writer) override {
    Device* d = Find(request->device_id());
    return d == nullptr ? UnknownDevice(request->device_id()) : d->Read(request, writer);
  }

  grpc::Status SetForwardingPipelineConfig(
      grpc::ServerContext*, const p4::v1::SetForwardingPipelineConfigRequest* request,
      p4::v1::SetForwardingPipelineConfigResponse*) override {
    Device* d = Find(request->device_id());
    return d == nullptr ? UnknownDevice(request->device_id())
                        : d->SetForwardingPipelineConfig(request);
  }

  grpc::Status GetForwardingPipelineConfig(
      grpc::ServerContext*, const p4::v1::GetForwardingPipelineConfigRequest* request,
      p4::v1::GetForwardingPipelineConfigResponse* response) override {
    Device* d = Find(request->device_id());
    return d == nullptr ? UnknownDevice(request->device_id())
                        : d->GetForwardingPipelineConfig(request, response);
  }

  grpc::Status StreamChannel(grpc::ServerContext*, StreamRw* rw) override {
    StreamMessageRequest request;
    while (rw->Read(&request)) {
      if (request.has_arbitration()) {
        Device* d = Find(request.arbitration().device_id());
        if (d == nullptr) return UnknownDevice(request.arbitration().device_id());
        return d->ServeStream(rw, request.arbitration());
      }
      // No device yet, no other writer on this stream.
      rw->Write(UnsupportedStreamMessage(request));
    }
    return grpc::Status::OK;
  }

 private:
  Device* Find(uint64_t device_id) const {
    if (device_id < first_id_ || device_id - first_id_ >= devices_->size()) return nullptr;
    return (*devices_)[device_id - first_id_].get();
  }

  const uint64_t first_id_;
  const std::vector<std::unique_ptr<Device>>* devices_;
};

absl::StatusOr<std::unique_ptr<EmulatedSwitch>> EmulatedSwitch::Start(
    EmulatedSwitchOptions options) {
  if (options.p4info.has_value()) {
    if (absl::Status s = VerifyP4Info(*options.p4info); !s.ok()) return s;
  }
  if (options.num_devices < 1) {
    return absl::InvalidArgumentError("an emulated switch serves at least one device");
  }
  std::unique_ptr<EmulatedSwitch> sw(new EmulatedSwitch());
  size_t colon = options.listen_address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", options.listen_address, "' is not host:port"));
  }
  sw->host_ = options.listen_address.substr(0, colon);
  sw->first_device_id_ = options.device_id;
  for (int i = 0; i < options.num_devices; ++i) {
    const uint64_t id = options.device_id + static_cast<uint64_t>(i);
    std::string log = options.write_log_path;
    if (!log.empty() && options.num_devices > 1) absl::StrAppend(&log, ".", id);
    sw->devices_.push_back(std::make_unique<Device>(options, id, log));
  }
  sw->router_ = std::make_unique<Router>(options.device_id, &sw->devices_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(), &sw->port_);
  builder.RegisterService(sw->router_.get());
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  sw->server_ = builder.BuildAndStart();
  if (sw->server_ == nullptr || sw->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address));
  }
  return sw;
}

// server_ is declared after the devices and the router: it is destroyed (and waits for its
// handlers) before them.
EmulatedSwitch::~EmulatedSwitch() { Shutdown(); }

std::string EmulatedSwitch::address() const { return absl::StrCat(host_, ":", port_); }

int EmulatedSwitch::num_devices() const { return static_cast<int>(devices_.size()); }

int64_t EmulatedSwitch::NumTableEntries() const {
  int64_t n = 0;
  for (const auto& d : devices_) n += d->NumTableEntries();
  return n;
}

int64_t EmulatedSwitch::NumTableEntries(uint64_t device_id) const {
  if (device_id < first_device_id_ || device_id - first_device_id_ >= devices_.size()) return 0;
  return devices_[device_id - first_device_id_]->NumTableEntries();
}

void EmulatedSwitch::Shutdown() {
  // A deadline in the past cancels the open streams at once instead of waiting for clients.
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

void EmulatedSwitch::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace inac::southbound::emulator
