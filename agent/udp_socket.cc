#include "agent/udp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/mix.h"
#include "core/topology.h"

namespace inac::agent {

absl::StatusOr<std::unique_ptr<UdpSocket>> UdpSocket::Open(const SocketOptions& options) {
  const std::string where = absl::StrCat(core::FormatIpv4(options.bind_address), ":", options.port);
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  int size = 4 << 20;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options.port);
  addr.sin_addr.s_addr = htonl(options.bind_address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("bind UDP ", where, ": ", std::strerror(err)));
  }
  return std::unique_ptr<UdpSocket>(new UdpSocket(fd, options));
}

UdpSocket::~UdpSocket() { ::close(fd_); }

absl::Status UdpSocket::Send(uint32_t address, uint16_t port, std::span<const uint8_t> payload) {
  const uint64_t seq = sent_++;
  if (options_.drop_percent > 0) {
    const uint64_t h = Mix64(options_.drop_seed * 0x100000001B3ull ^ seq) % 1000000;
    if (static_cast<double>(h) < options_.drop_percent * 10000) {
      ++dropped_;
      return absl::OkStatus();
    }
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(address);
  while (true) {
    ssize_t n = ::sendto(fd_, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to),
                         sizeof(to));
    if (n >= 0) return absl::OkStatus();
    if (errno == EINTR) continue;
    ++send_errors_;
    return absl::UnavailableError(
        absl::StrCat("sendto ", core::FormatIpv4(address), ":", port, ": ", std::strerror(errno)));
  }
}

bool UdpSocket::Wait(int64_t timeout_us) {
  pollfd p{fd_, POLLIN, 0};
  timespec ts{};
  if (timeout_us > 0) {
    ts.tv_sec = timeout_us / 1000000;
    ts.tv_nsec = (timeout_us % 1000000) * 1000;
  }
  int r = ::ppoll(&p, 1, &ts, nullptr);
  return r > 0 && (p.revents & POLLIN) != 0;
}

bool UdpSocket::TryReceive(Datagram* out) {
  sockaddr_in from{};
  socklen_t len = sizeof(from);
  while (true) {
    ssize_t n = ::recvfrom(fd_, out->bytes.data(), out->bytes.size(), MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &len);
    if (n >= 0) {
      out->length = static_cast<size_t>(n);
      out->source = ntohl(from.sin_addr.s_addr);
      out->source_port = ntohs(from.sin_port);
      return true;
    }
    // ICMP errors of earlier sends (ECONNREFUSED, ...) are reported once each and carry no
    // datagram: look again. EAGAIN: nothing queued.
    if (errno == EINTR || errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH) {
      continue;
    }
    return false;
  }
}

absl::StatusOr<int> OpenNetns(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("--netns: not a namespace name: '", name, "'"));
  }
  const std::string path = "/var/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  return fd;
}

absl::Status RunDataPlane(int netns_fd, const std::function<absl::Status()>& body) {
  absl::Status result;
  std::thread t([&] {
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) {
      const int err = errno;
      result = (err == EPERM ? absl::PermissionDeniedError("setns(CLONE_NEWNET): ")
                             : absl::InternalError("setns(CLONE_NEWNET): "));
      result =
          absl::Status(result.code(), absl::StrCat(result.message(), std::strerror(err),
                                                   err == EPERM ? " (needs CAP_SYS_ADMIN)" : ""));
      return;
    }
    result = body();
  });
  t.join();
  return result;
}

}  // namespace inac::agent
