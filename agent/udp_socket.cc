#include "agent/udp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/mix.h"
#include "core/topology.h"

namespace inac::agent {

namespace {

// The segment size of a GRO-coalesced message (its UDP_GRO control message), or 0.
uint16_t GroSegment(msghdr* m) {
  for (cmsghdr* c = CMSG_FIRSTHDR(m); c != nullptr; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof(size));
      return static_cast<uint16_t>(size);
    }
  }
  return 0;
}

void SetBuffer(int fd, int force, int plain, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof(bytes)) != 0) {
    (void)::setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof(bytes));
  }
}

}  // namespace

absl::StatusOr<GsoMode> ParseGsoMode(const std::string& text) {
  if (text == "off") return GsoMode::kOff;
  if (text == "auto") return GsoMode::kAuto;
  if (text == "on") return GsoMode::kOn;
  return absl::InvalidArgumentError(
      absl::StrCat("--gso: '", text, "' is not one of off, auto, on"));
}

absl::StatusOr<std::unique_ptr<UdpSocket>> UdpSocket::Open(const SocketOptions& options) {
  const std::string where = absl::StrCat(core::FormatIpv4(options.bind_address), ":", options.port);
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  SetBuffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, options.buffer_bytes);
  SetBuffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, options.buffer_bytes);
  if (options.reuse_port) {
    int on = 1;
    (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
  }
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

UdpSocket::UdpSocket(int fd, const SocketOptions& options)
    : fd_(fd), options_(options), gso_(options.gso) {
  if (gso_ != GsoMode::kOff) {
    // Kernels without UDP GSO (before 4.18) refuse the option.
    int size = 0;
    socklen_t len = sizeof(size);
    if (::getsockopt(fd_, IPPROTO_UDP, UDP_SEGMENT, &size, &len) != 0) gso_ = GsoMode::kOff;
  }
  if (options_.gro) {
    int on = 1;
    gro_ = ::setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)) == 0;
  }
  send_bytes_.reset(new uint8_t[kSendBatch * kMaxDatagram]);
  queued_.reserve(kSendBatch);
  discard_.reset(new uint8_t[kMaxDatagram]);
  // A coalesced message holds up to 64 KiB; without GRO every message is one datagram.
  receive_size_ = gro_ ? 65536 : kMaxDatagram;
  receive_bytes_.reset(new uint8_t[kReceiveBatch * receive_size_]);
  receive_from_.resize(kReceiveBatch);
  receive_control_.resize(kReceiveBatch);
  receive_length_.resize(kReceiveBatch);
  receive_segment_.resize(kReceiveBatch);
}

UdpSocket::~UdpSocket() {
  (void)Flush();
  ::close(fd_);
}

bool UdpSocket::Dropped() {
  const uint64_t seq = sent_++;
  if (options_.drop_percent <= 0) return false;
  const uint64_t h = Mix64(options_.drop_seed * 0x100000001B3ull ^ seq) % 1000000;
  if (static_cast<double>(h) < options_.drop_percent * 10000) {
    ++dropped_;
    return true;
  }
  return false;
}

bool UdpSocket::UseGso(uint32_t address) const {
  if (gso_ == GsoMode::kOn) return true;
  return gso_ == GsoMode::kAuto && (address >> 24) == 127;
}

absl::Status UdpSocket::Send(uint32_t address, uint16_t port, std::span<const uint8_t> payload) {
  absl::Status flushed = Flush();
  if (Dropped()) return flushed;
  absl::Status s = SendNow(address, port, payload);
  return s.ok() ? flushed : s;
}

absl::Status UdpSocket::SendNow(uint32_t address, uint16_t port, std::span<const uint8_t> payload) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(address);
  while (true) {
    ++send_calls_;
    ssize_t n = ::sendto(fd_, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to),
                         sizeof(to));
    if (n >= 0) return absl::OkStatus();
    if (errno == EINTR) continue;
    ++send_errors_;
    return absl::UnavailableError(
        absl::StrCat("sendto ", core::FormatIpv4(address), ":", port, ": ", std::strerror(errno)));
  }
}

absl::Status UdpSocket::Queue(uint32_t address, uint16_t port, std::span<const uint8_t> payload,
                              uint32_t group) {
  if (payload.size() > kMaxDatagram) {
    return absl::InvalidArgumentError(
        absl::StrCat("datagram of ", payload.size(), " bytes: at most ", kMaxDatagram));
  }
  if (Dropped()) {
    if (payload.data() != discard_.get()) {
      std::memcpy(discard_.get(), payload.data(), payload.size());
    }
    last_bytes_ = discard_.get();
    last_length_ = payload.size();
    last_group_ = group;
    last_in_batch_ = false;
    return absl::OkStatus();
  }
  absl::Status s;
  if (queued_.size() == static_cast<size_t>(kSendBatch) ||
      send_used_ + payload.size() > kSendBatch * kMaxDatagram) {
    s = Flush();
  }
  uint8_t* at = send_bytes_.get() + send_used_;
  if (at != payload.data()) std::memmove(at, payload.data(), payload.size());
  queued_.push_back(Queued{address, port, static_cast<uint16_t>(payload.size()), group,
                           static_cast<uint32_t>(send_used_)});
  send_used_ += payload.size();
  last_bytes_ = at;
  last_length_ = payload.size();
  last_group_ = group;
  last_in_batch_ = true;
  return s;
}

std::span<uint8_t> UdpSocket::QueueInPlace(uint32_t address, uint16_t port, size_t length,
                                           uint32_t group) {
  length = std::min(length, kMaxDatagram);
  last_length_ = length;
  last_group_ = group;
  if (Dropped()) {
    last_bytes_ = discard_.get();
    last_in_batch_ = false;
    return {discard_.get(), length};
  }
  if (queued_.size() == static_cast<size_t>(kSendBatch) ||
      send_used_ + length > kSendBatch * kMaxDatagram) {
    (void)Flush();
  }
  uint8_t* at = send_bytes_.get() + send_used_;
  queued_.push_back(Queued{address, port, static_cast<uint16_t>(length), group,
                           static_cast<uint32_t>(send_used_)});
  send_used_ += length;
  last_bytes_ = at;
  last_in_batch_ = true;
  return {at, length};
}

absl::Status UdpSocket::QueueCopy(uint32_t address, uint16_t port) {
  if (last_bytes_ == nullptr) return absl::FailedPreconditionError("QueueCopy: nothing queued");
  if (!last_in_batch_ || queued_.size() == static_cast<size_t>(kSendBatch)) {
    // Its bytes are not in the batch (dropped by the hook, or about to be flushed): a copy.
    // Queue moves them into the batch first (the batch's memory survives a flush).
    return Queue(address, port, {last_bytes_, last_length_}, last_group_);
  }
  if (Dropped()) return absl::OkStatus();
  const uint32_t offset = static_cast<uint32_t>(last_bytes_ - send_bytes_.get());
  queued_.push_back(
      Queued{address, port, static_cast<uint16_t>(last_length_), last_group_, offset});
  return absl::OkStatus();
}

absl::Status UdpSocket::Flush() {
  const size_t n = queued_.size();
  if (n == 0) return absl::OkStatus();
  // Datagrams to one destination together, each destination's in queue order: bucketed by
  // destination in order of first appearance (a batch goes to a few destinations: a worker's to
  // its PSs, a PS's to the members).
  std::array<uint16_t, kSendBatch> order;
  std::array<uint16_t, kSendBatch> bucket;  // per datagram: its destination's index
  std::array<std::pair<uint32_t, uint16_t>, kSendBatch> destinations;
  std::array<uint16_t, kSendBatch + 1> start{};
  size_t distinct = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::pair<uint32_t, uint16_t> d{queued_[i].address, queued_[i].port};
    size_t k = 0;
    // The previous datagram's destination first (runs are the common case), then the rest.
    if (i > 0 && destinations[bucket[i - 1]] == d) {
      k = bucket[i - 1];
    } else {
      for (k = 0; k < distinct && destinations[k] != d; ++k) {
      }
      if (k == distinct) destinations[distinct++] = d;
    }
    bucket[i] = static_cast<uint16_t>(k);
    ++start[k + 1];
  }
  for (size_t k = 0; k < distinct; ++k) start[k + 1] += start[k];
  for (size_t i = 0; i < n; ++i) order[start[bucket[i]]++] = static_cast<uint16_t>(i);
  std::array<iovec, kSendBatch> iov;
  std::array<mmsghdr, kSendBatch> msgs;
  std::array<sockaddr_in, kSendBatch> to;
  std::array<std::array<uint8_t, CMSG_SPACE(sizeof(uint16_t))>, kSendBatch> control;
  std::array<uint16_t, kSendBatch> first;  // per message: its first index into `order`
  std::array<uint16_t, kSendBatch> count;  // ... and its datagrams
  size_t v = 0;                            // iov entries used
  size_t m = 0;
  for (size_t i = 0; i < n;) {
    const Queued& q = queued_[order[i]];
    size_t j = i + 1;
    if (UseGso(q.address)) {
      const size_t most = std::min<size_t>(max_segments_, 65507 / std::max<size_t>(1, q.length));
      while (j < n && j - i < most) {
        const Queued& r = queued_[order[j]];
        if (r.address != q.address || r.port != q.port || r.length != q.length ||
            r.group != q.group) {
          break;
        }
        ++j;
      }
    }
    const size_t first_iov = v;
    for (size_t k = i; k < j; ++k) {
      const Queued& r = queued_[order[k]];
      uint8_t* at = send_bytes_.get() + r.offset;
      if (v > first_iov && static_cast<uint8_t*>(iov[v - 1].iov_base) + iov[v - 1].iov_len == at) {
        iov[v - 1].iov_len += r.length;  // contiguous with the previous one
      } else {
        iov[v++] = iovec{at, r.length};
      }
    }
    to[m] = sockaddr_in{};
    to[m].sin_family = AF_INET;
    to[m].sin_port = htons(q.port);
    to[m].sin_addr.s_addr = htonl(q.address);
    msghdr& h = msgs[m].msg_hdr;
    h = msghdr{};
    h.msg_name = &to[m];
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = &iov[first_iov];
    h.msg_iovlen = v - first_iov;
    count[m] = static_cast<uint16_t>(j - i);
    if (j - i > 1) {
      h.msg_control = control[m].data();
      h.msg_controllen = control[m].size();
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = IPPROTO_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t segment = q.length;
      std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
    }
    first[m] = static_cast<uint16_t>(i);
    ++m;
    i = j;
  }
  absl::Status result;
  size_t k = 0;
  while (k < m) {
    ++send_calls_;
    const int sent = ::sendmmsg(fd_, &msgs[k], static_cast<unsigned>(m - k), 0);
    if (sent > 0) {
      k += static_cast<size_t>(sent);
      continue;
    }
    const int err = errno;
    if (sent < 0 && err == EINTR) continue;
    if (count[k] > 1 && (err == EIO || err == EINVAL)) {
      // More segments than this kernel takes: fewer from now on. Else no GSO on this route (no
      // checksum offload): no GSO from now on. These datagrams one by one.
      if (err == EINVAL && count[k] > kMinMaxSegments && max_segments_ > kMinMaxSegments) {
        max_segments_ = kMinMaxSegments;
      } else {
        gso_ = GsoMode::kOff;
      }
      for (size_t x = 0; x < count[k]; ++x) {
        const Queued& r = queued_[order[first[k] + x]];
        absl::Status s = SendNow(r.address, r.port, {send_bytes_.get() + r.offset, r.length});
        if (result.ok() && !s.ok()) result = s;
      }
      ++k;
      continue;
    }
    send_errors_ += count[k];
    if (result.ok()) {
      const Queued& r = queued_[order[first[k]]];
      result = absl::UnavailableError(absl::StrCat("sendmmsg ", core::FormatIpv4(r.address), ":",
                                                   r.port, ": ", std::strerror(err)));
    }
    ++k;
  }
  queued_.clear();
  send_used_ = 0;
  last_in_batch_ = false;  // its bytes stay where they are until the next datagram is queued
  return result;
}

bool UdpSocket::Wait(int64_t timeout_us) {
  (void)Flush();
  if (receive_message_ < receive_count_) return true;
  pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  timespec ts{};
  if (timeout_us > 0) {
    ts.tv_sec = timeout_us / 1000000;
    ts.tv_nsec = (timeout_us % 1000000) * 1000;
  }
  int r = ::ppoll(p, wake_fd_ >= 0 ? 2 : 1, &ts, nullptr);
  return r > 0 && ((p[0].revents | (wake_fd_ >= 0 ? p[1].revents : 0)) & POLLIN) != 0;
}

absl::Status UdpSocket::AttachReusePortProgram(std::span<const sock_filter> program) {
  sock_fprog f{static_cast<unsigned short>(program.size()),
               const_cast<sock_filter*>(program.data())};
  if (::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &f, sizeof(f)) != 0) {
    return absl::InternalError(absl::StrCat("SO_ATTACH_REUSEPORT_CBPF: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

bool UdpSocket::Refill() {
  (void)Flush();  // what the agent queued leaves before it reads on
  std::array<mmsghdr, kReceiveBatch> msgs;
  std::array<iovec, kReceiveBatch> iov;
  for (int i = 0; i < kReceiveBatch; ++i) {
    iov[i] = iovec{receive_bytes_.get() + static_cast<size_t>(i) * receive_size_, receive_size_};
    msghdr& h = msgs[i].msg_hdr;
    h = msghdr{};
    h.msg_name = &receive_from_[i];
    h.msg_namelen = sizeof(sockaddr_storage);
    h.msg_iov = &iov[i];
    h.msg_iovlen = 1;
    h.msg_control = receive_control_[i].data();
    h.msg_controllen = receive_control_[i].size();
  }
  while (true) {
    const int got = ::recvmmsg(fd_, msgs.data(), kReceiveBatch, MSG_DONTWAIT, nullptr);
    if (got > 0) {
      ++receive_calls_;
      for (int i = 0; i < got; ++i) {
        receive_length_[i] = msgs[i].msg_len;
        const uint16_t segment = gro_ ? GroSegment(&msgs[i].msg_hdr) : 0;
        receive_segment_[i] = segment > 0 ? segment : static_cast<uint16_t>(msgs[i].msg_len);
      }
      receive_count_ = got;
      receive_message_ = 0;
      receive_offset_ = 0;
      return true;
    }
    // ICMP errors of earlier sends (ECONNREFUSED, ...) are reported once each and carry no
    // datagram: look again. EAGAIN: nothing queued.
    if (got < 0 && (errno == EINTR || errno == ECONNREFUSED || errno == EHOSTUNREACH ||
                    errno == ENETUNREACH)) {
      continue;
    }
    receive_count_ = 0;
    receive_message_ = 0;
    return false;
  }
}

bool UdpSocket::Next(DatagramView* out) {
  while (true) {
    if (receive_message_ < receive_count_) {
      const size_t m = static_cast<size_t>(receive_message_);
      const size_t length = receive_length_[m];
      if (receive_offset_ < length || (length == 0 && receive_offset_ == 0)) {
        const size_t take =
            std::min<size_t>(std::max<size_t>(1, receive_segment_[m]), length - receive_offset_);
        const sockaddr_in* from = reinterpret_cast<const sockaddr_in*>(&receive_from_[m]);
        out->source = ntohl(from->sin_addr.s_addr);
        out->source_port = ntohs(from->sin_port);
        out->payload = {receive_bytes_.get() + m * receive_size_ + receive_offset_, take};
        receive_offset_ += std::max<size_t>(1, take);
        if (receive_offset_ >= length) {
          ++receive_message_;
          receive_offset_ = 0;
        }
        ++received_;
        return true;
      }
      ++receive_message_;
      receive_offset_ = 0;
      continue;
    }
    if (!Refill()) return false;
  }
}

bool UdpSocket::TryReceive(Datagram* out) {
  DatagramView v;
  if (!Next(&v)) return false;
  out->source = v.source;
  out->source_port = v.source_port;
  out->length = std::min(v.payload.size(), out->bytes.size());
  std::memcpy(out->bytes.data(), v.payload.data(), out->length);
  return true;
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

absl::Status RunDataPlane(int netns_fd, const std::function<absl::Status()>& body,
                          int64_t* cpu_us) {
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
    const int64_t start = ThreadCpuUs();
    result = body();
    if (cpu_us != nullptr) *cpu_us = ThreadCpuUs() - start;
  });
  t.join();
  return result;
}

}  // namespace inac::agent
