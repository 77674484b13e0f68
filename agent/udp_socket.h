// The data-plane socket of a host agent: one UDP socket bound to (address, port), by default
// 0.0.0.0:48864, from which the agent sends INA packets and on which it receives them; and the
// thread that owns it, optionally inside another network namespace.
//
// Contract:
//  - Open binds (SO_REUSEADDR off: a second agent on the same address and port fails with
//    Unavailable naming the address; with `reuse_port` several sockets of one process share it,
//    SO_REUSEPORT) and sizes both socket buffers to `buffer_bytes` (SO_RCVBUFFORCE where the
//    process may, else SO_RCVBUF, which the kernel caps at net.core.rmem_max).
//  - Two ways to send. Send puts one datagram on the wire at once (after whatever is queued).
//    Queue copies it into a pre-allocated batch that leaves on Flush, on Wait, before Next reads
//    from the kernel again, when the batch is full (kSendBatch datagrams) and when the socket is
//    destroyed: one sendmmsg per batch, and
//    within it, per destination, runs of equal-sized datagrams leave as one UDP GSO send
//    (UDP_SEGMENT, up to kMaxSegments each) when GSO applies (`gso`: kAuto uses it for
//    destinations in 127/8 only — a loopback receiver gets the segments as they are, while a
//    packet socket on a veth (BMv2) would see one unsegmented frame; kOn for every destination,
//    for real NICs; kOff never). The kernel segments a GSO send into the very datagrams that
//    would have left one by one: what a receiver or switch sees is unchanged but for timing.
//    Datagrams to one destination keep their order; a send the kernel refuses with GSO
//    (EIO/EINVAL: no checksum offload) is sent again without, and GSO stays off on the socket.
//  - Sending never blocks for long (the socket blocks only on a full send buffer); errors are
//    counted (send_errors) and returned (Send: its own; Flush: the first of the batch), never
//    fatal to the socket. The test hook drop_percent discards that share of the datagrams
//    deterministically (a hash of drop_seed and the datagram's sequence number) before they reach
//    the kernel; they count as sent and as dropped.
//  - Receiving: recvmmsg of up to kReceiveBatch messages at a time, with UDP GRO enabled where
//    the kernel offers it (a coalesced message is split back at its segment size); Next hands out
//    one datagram at a time as a view into the socket's buffers, valid until the next call of
//    Next, TryReceive, Wait or the socket's destruction; TryReceive copies one. Neither blocks.
//  - Wait flushes the queue, then returns true at once when received datagrams are buffered,
//    else waits (microsecond resolution) until one is queued in the kernel or `timeout_us` passed.
//  - RunDataPlane runs `body` on a new thread, which first enters the network namespace of
//    `netns_fd` (setns(fd, CLONE_NEWNET)) when it is >= 0, so the sockets `body` opens live
//    there while the caller's thread (and its REST calls) stays where it was. It returns what
//    `body` returned, or the setns failure.
// Not thread-safe: one socket per agent thread.
#pragma once

#include <linux/filter.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/packet.h"

namespace inac::agent {

enum class GsoMode { kOff, kAuto, kOn };

struct SocketOptions {
  uint32_t bind_address = 0;  // host byte order; 0 = 0.0.0.0
  uint16_t port = kInaUdpPort;
  double drop_percent = 0;  // test hook: share of sends discarded, deterministically
  uint64_t drop_seed = 0;
  GsoMode gso = GsoMode::kAuto;
  bool gro = true;  // ask for UDP GRO on receive (where the kernel offers it)
  int buffer_bytes = 4 << 20;
  bool reuse_port = false;
};

// Parses "off", "auto" or "on".
absl::StatusOr<GsoMode> ParseGsoMode(const std::string& text);

struct Datagram {
  uint32_t source = 0;  // host byte order
  uint16_t source_port = 0;
  size_t length = 0;
  std::array<uint8_t, 2048> bytes{};
  std::span<const uint8_t> payload() const { return {bytes.data(), length}; }
};

// A received datagram in the socket's own buffers (UdpSocket::Next).
struct DatagramView {
  uint32_t source = 0;  // host byte order
  uint16_t source_port = 0;
  std::span<const uint8_t> payload;
};

inline constexpr int kSendBatch = 256;
inline constexpr int kReceiveBatch = 32;
// The most segments of one GSO send: the kernel's UDP_MAX_SEGMENTS, 128 on recent kernels (64
// before): a send refused with more than 64 is sent again one by one, and the socket keeps to
// kMinMaxSegments from then on.
inline constexpr int kMaxSegments = 128;
inline constexpr int kMinMaxSegments = 64;

class UdpSocket {
 public:
  static absl::StatusOr<std::unique_ptr<UdpSocket>> Open(const SocketOptions& options);
  ~UdpSocket();
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  absl::Status Send(uint32_t address, uint16_t port, std::span<const uint8_t> payload);
  // Queues a copy of `payload` (at most kMaxDatagram bytes); see the contract above.
  // `group`: datagrams of different groups never share one GSO send (a receiver that spreads
  // datagrams over threads by their content sees each GSO send as one: see
  // AttachReusePortProgram).
  absl::Status Queue(uint32_t address, uint16_t port, std::span<const uint8_t> payload,
                     uint32_t group = 0);
  // Queue without the copy: `length` bytes (at most kMaxDatagram) of the batch for the caller to
  // fill before its next call on the socket.
  std::span<uint8_t> QueueInPlace(uint32_t address, uint16_t port, size_t length,
                                  uint32_t group = 0);
  // Queues the datagram queued last (by Queue, QueueInPlace or QueueCopy) once more, to
  // another destination, from the same bytes (no copy while the batch has room).
  absl::Status QueueCopy(uint32_t address, uint16_t port);
  absl::Status Flush();
  // True when a datagram is buffered or queued within `timeout_us` (0: just look).
  bool Wait(int64_t timeout_us);
  bool Next(DatagramView* out);
  // Wait also returns when `fd` (an eventfd another thread writes; -1: none) is readable.
  void set_wake_fd(int fd) { wake_fd_ = fd; }
  // A classic BPF program choosing, for every datagram arriving at the SO_REUSEPORT group this
  // socket belongs to, the group's socket by index (the order the sockets were bound; an index
  // beyond them: the kernel's hash). It sees the UDP payload (offset 0 = the INA header).
  absl::Status AttachReusePortProgram(std::span<const sock_filter> program);
  // The next datagram copied into `out`; false when none is queued.
  bool TryReceive(Datagram* out);

  uint64_t sent() const { return sent_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t send_errors() const { return send_errors_; }
  uint64_t send_calls() const { return send_calls_; }        // sendto/sendmmsg system calls
  uint64_t receive_calls() const { return receive_calls_; }  // recvmmsg calls that returned data
  uint64_t received() const { return received_; }            // datagrams handed out
  bool gso_active() const { return gso_ != GsoMode::kOff; }
  bool gro_active() const { return gro_; }

  static constexpr size_t kMaxDatagram = 2048;

 private:
  UdpSocket(int fd, const SocketOptions& options);
  bool Dropped();
  bool UseGso(uint32_t address) const;
  bool Refill();
  absl::Status SendNow(uint32_t address, uint16_t port, std::span<const uint8_t> payload);

  int fd_;
  int wake_fd_ = -1;
  size_t max_segments_ = kMaxSegments;
  SocketOptions options_;
  GsoMode gso_;
  bool gro_ = false;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
  uint64_t send_errors_ = 0;
  uint64_t send_calls_ = 0;
  uint64_t receive_calls_ = 0;
  uint64_t received_ = 0;

  // The send batch: the datagrams' bytes one after the other in send_bytes_ (a run to one
  // destination in queue order is one contiguous piece for the kernel to copy), each one's
  // offset, length and address.
  struct Queued {
    uint32_t address;
    uint16_t port;
    uint16_t length;
    uint32_t group;
    uint32_t offset;
  };
  size_t send_used_ = 0;  // bytes of send_bytes_ in use
  // The datagram queued last: where its bytes are (the batch, or discard_ when the test hook
  // dropped it) and its length and group.
  const uint8_t* last_bytes_ = nullptr;
  size_t last_length_ = 0;
  uint32_t last_group_ = 0;
  bool last_in_batch_ = false;
  std::unique_ptr<uint8_t[]> send_bytes_;
  std::vector<Queued> queued_;
  std::unique_ptr<uint8_t[]> discard_;  // where a datagram the test hook drops is written

  // The receive buffers: message i in receive_bytes_[i * receive_size_], filled by recvmmsg.
  size_t receive_size_ = 0;
  std::unique_ptr<uint8_t[]> receive_bytes_;
  std::vector<sockaddr_storage> receive_from_;
  std::vector<std::array<uint8_t, 64>> receive_control_;
  std::vector<uint32_t> receive_length_;
  std::vector<uint16_t> receive_segment_;  // GRO segment size, or the whole length
  int receive_count_ = 0;                  // messages in the buffers
  int receive_message_ = 0;                // the message Next reads
  size_t receive_offset_ = 0;              // ... and the offset of its next segment
};

// Opens /var/run/netns/NAME (what `ip netns add NAME` creates); the fd, or NotFound /
// PermissionDenied naming the path. The caller closes it.
absl::StatusOr<int> OpenNetns(const std::string& name);

// `cpu_us`, when given, receives the CPU time (user + system) `body` used on that thread.
absl::Status RunDataPlane(int netns_fd, const std::function<absl::Status()>& body,
                          int64_t* cpu_us = nullptr);

}  // namespace inac::agent
