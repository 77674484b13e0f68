// The data-plane socket of a host agent: one UDP socket bound to (address, port), by default
// 0.0.0.0:48864, from which the agent sends INA packets and on which it receives them; and the
// thread that owns it, optionally inside another network namespace.
//
// Contract:
//  - Open binds (SO_REUSEADDR off: a second agent on the same address and port fails with
//    Unavailable naming the address) and asks for a 4 MiB receive buffer (the kernel may cap it).
//  - Send never blocks for long (the socket blocks only on a full send buffer); errors are
//    returned and counted, never fatal to the socket. The test hook drop_percent discards that
//    share of the sends deterministically (a hash of drop_seed and the send's sequence number)
//    before they reach the kernel; they count as sent and as dropped.
//  - Wait/TryReceive are how the agent's loop polls; TryReceive never blocks.
//  - RunDataPlane runs `body` on a new thread, which first enters the network namespace of
//    `netns_fd` (setns(fd, CLONE_NEWNET)) when it is >= 0, so the sockets `body` opens live
//    there while the caller's thread (and its REST calls) stays where it was. It returns what
//    `body` returned, or the setns failure.
// Not thread-safe: one socket per agent thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "agent/packet.h"

namespace inac::agent {

struct SocketOptions {
  uint32_t bind_address = 0;  // host byte order; 0 = 0.0.0.0
  uint16_t port = kInaUdpPort;
  double drop_percent = 0;  // test hook: share of sends discarded, deterministically
  uint64_t drop_seed = 0;
};

struct Datagram {
  uint32_t source = 0;  // host byte order
  uint16_t source_port = 0;
  size_t length = 0;
  std::array<uint8_t, 2048> bytes{};
  std::span<const uint8_t> payload() const { return {bytes.data(), length}; }
};

class UdpSocket {
 public:
  static absl::StatusOr<std::unique_ptr<UdpSocket>> Open(const SocketOptions& options);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  absl::Status Send(uint32_t address, uint16_t port, std::span<const uint8_t> payload);
  // True when a datagram is queued within `timeout_us` (0: just look).
  bool Wait(int64_t timeout_us);
  // The next queued datagram into `out`; false when none is queued.
  bool TryReceive(Datagram* out);

  uint64_t sent() const { return sent_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t send_errors() const { return send_errors_; }

 private:
  UdpSocket(int fd, const SocketOptions& options) : fd_(fd), options_(options) {}
  int fd_;
  SocketOptions options_;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
  uint64_t send_errors_ = 0;
};

// Opens /var/run/netns/NAME (what `ip netns add NAME` creates); the fd, or NotFound /
// PermissionDenied naming the path. The caller closes it.
absl::StatusOr<int> OpenNetns(const std::string& name);

absl::Status RunDataPlane(int netns_fd, const std::function<absl::Status()>& body);

}  // namespace inac::agent
