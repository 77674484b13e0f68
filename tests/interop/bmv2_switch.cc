#include "tests/interop/bmv2_switch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/switch_session.h"

namespace inac::interop {
namespace {

constexpr int kAttempts = 3;

// True when something accepts a TCP connection on 127.0.0.1:port.
bool TcpAccepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

int PortOf(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  return atoi(address.c_str() + colon + 1);
}

}  // namespace

absl::Status AwaitP4RuntimeAnswers(const std::string& address, uint64_t device_id,
                                   absl::Duration timeout, const std::function<bool()>& alive) {
  const absl::Time deadline = absl::Now() + timeout;
  const int port = PortOf(address);
  std::string last = "never tried";
  while (true) {
    if (alive && !alive()) {
      return absl::UnavailableError(absl::StrCat(address, ": the process exited (", last, ")"));
    }
    if (port != 0 && !TcpAccepts(port)) {
      last = "connection refused";
    } else {
      // A fresh channel per attempt, with its own subchannel pool: a channel that failed once
      // would otherwise wait out gRPC's reconnect backoff.
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
      auto stub = p4::v1::P4Runtime::NewStub(channel);
      p4::v1::GetForwardingPipelineConfigRequest request;
      request.set_device_id(device_id);
      request.set_response_type(p4::v1::GetForwardingPipelineConfigRequest::COOKIE_ONLY);
      p4::v1::GetForwardingPipelineConfigResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      grpc::Status status = stub->GetForwardingPipelineConfig(&context, request, &response);
      if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
          status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        return absl::OkStatus();
      }
      last = absl::StrCat("GetForwardingPipelineConfig: ", status.error_message());
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(address, " did not answer P4Runtime within ",
                                                      absl::FormatDuration(timeout), " (", last,
                                                      ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::Status AwaitPipeline(const std::string& address, uint64_t device_id, absl::Duration timeout) {
  southbound::SessionOptions options;
  options.address = address;
  options.device_id = device_id;
  options.rpc_timeout = absl::Seconds(2);
  southbound::SwitchSession session(options);  // no stream: GetForwardingPipelineConfig only
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "never tried";
  while (true) {
    auto cookie = session.GetPipelineCookie();
    if (cookie.ok() && cookie->has_value()) return absl::OkStatus();
    last = cookie.ok() ? "no pipeline" : cookie.status().ToString();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          address, " has no pipeline after ", absl::FormatDuration(timeout), " (", last, ")"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

absl::StatusOr<std::unique_ptr<Bmv2Switch>> Bmv2Switch::Start(Bmv2Options options) {
  if (options.binary.empty()) return absl::FailedPreconditionError("no BMv2 binary given");
  std::unique_ptr<Bmv2Switch> sw(new Bmv2Switch(std::move(options)));
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (absl::Status s = sw->Reserve(); !s.ok()) return s;
    last = sw->Launch();
    if (last.ok()) return sw;
    sw->Kill();
  }
  return last;
}

Bmv2Switch::~Bmv2Switch() {
  Kill();
  if (reservation_fd_ >= 0) close(reservation_fd_);
}

absl::Status Bmv2Switch::Reserve() {
  if (reservation_fd_ >= 0) close(reservation_fd_);
  reservation_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (reservation_fd_ < 0) return absl::InternalError("socket() failed");
  int one = 1;
  setsockopt(reservation_fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(reservation_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(reservation_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("cannot reserve a port: ", strerror(errno)));
  }
  port_ = ntohs(addr.sin_port);
  address_ = absl::StrCat("127.0.0.1:", port_);
  return absl::OkStatus();
}

absl::Status Bmv2Switch::Launch() {
  std::vector<std::string> args = {"--device-id", std::to_string(options_.device_id), "--no-p4"};
  if (options_.log) {
    std::string level = options_.log_level;
    if (level.empty()) {
      const char* env = getenv("INAC_BMV2_LOG_LEVEL");
      level = env != nullptr && *env != '\0' ? env : "warn";
    }
    // spdlog appends ".txt" to the name it is given.
    args.insert(args.end(), {"--log-file", absl::StrCat(options_.dir, "/", options_.name, "-bmv2"),
                             "--log-flush", "-L", level});
  }
  args.insert(args.end(), {"--", "--grpc-server-addr", address_});
  auto p = systest::ChildProcess::StartProgram(
      options_.binary, args, absl::StrCat(options_.dir, "/", options_.name, ".out"));
  if (!p.ok()) return p.status();
  process_ = std::move(*p);
  systest::ChildProcess* child = process_.get();
  absl::Status ready = AwaitP4RuntimeAnswers(address_, options_.device_id, options_.start_timeout,
                                             [child] { return !child->Exited(); });
  if (!ready.ok()) {
    return absl::UnavailableError(absl::StrCat("BMv2 ", options_.name, " at ", address_, ": ",
                                               ready.message(), "\n", Logs()));
  }
  return absl::OkStatus();
}

void Bmv2Switch::Kill() {
  if (!process_) return;
  process_->Signal(SIGKILL);
  process_->Wait();
  process_.reset();
}

absl::Status Bmv2Switch::Restart() {
  Kill();
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    last = Launch();
    if (last.ok()) return last;
    Kill();
  }
  return last;
}

std::string Bmv2Switch::Logs(size_t max_bytes) const {
  std::string out =
      absl::StrCat("--- ", options_.name, ".out:\n",
                   systest::LogTail(options_.dir + "/" + options_.name + ".out", max_bytes));
  if (options_.log) {
    absl::StrAppend(&out, "\n--- ", options_.name, "-bmv2.txt:\n",
                    systest::LogTail(options_.dir + "/" + options_.name + "-bmv2.txt", max_bytes));
  }
  return out;
}

absl::Status Bmv2Fabric::Start(core::Topology* topology, const std::string& dir,
                               const std::string& binary) {
  for (size_t i = 0; i < topology->switches.size(); ++i) {
    core::Switch& s = topology->switches[i];
    Bmv2Options options;
    options.binary = binary;
    options.device_id = i + 1;
    options.dir = dir;
    options.name = absl::StrCat("bmv2-", s.id);
    auto sw = Bmv2Switch::Start(options);
    if (!sw.ok()) return sw.status();
    s.p4runtime =
        core::P4RuntimeEndpoint{(*sw)->address(), (*sw)->device_id(), core::TargetKind::kBmv2};
    switches_[s.id] = std::move(*sw);
  }
  return absl::OkStatus();
}

absl::Status Bmv2Fabric::KillAndRestart(const std::string& switch_id) {
  Bmv2Switch* sw = at(switch_id);
  if (sw == nullptr) return absl::NotFoundError(switch_id);
  return sw->Restart();
}

Bmv2Switch* Bmv2Fabric::at(const std::string& switch_id) {
  auto it = switches_.find(switch_id);
  return it == switches_.end() ? nullptr : it->second.get();
}

std::string Bmv2Fabric::Logs() const {
  std::string out;
  for (const auto& [id, sw] : switches_) absl::StrAppend(&out, sw->Logs(1500), "\n");
  return out;
}

std::string InaBmv2Json() {
#ifdef INAC_P4_DIR
  std::ifstream in(std::string(INAC_P4_DIR) + "/ina.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
#else
  return "";
#endif
}

}  // namespace inac::interop
