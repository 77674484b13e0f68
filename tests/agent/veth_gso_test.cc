// The batched socket across a veth pair between two network namespaces, as BMv2's ports are:
// what leaves the sender's veth, seen by a packet socket on the peer (what BMv2 reads), and what a
// UDP socket there receives. With --gso auto (the default) a veth destination gets one frame per
// datagram; with --gso on the frames may be GSO super-frames (why auto keeps GSO to loopback),
// yet a UDP receiver still gets every datagram whole. Needs root and `ip`; skips otherwise.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/clock.h"
#include "agent/packet.h"
#include "agent/udp_socket.h"

namespace inac::agent {
namespace {

bool Sh(const std::string& command) { return std::system((command + " 2>/dev/null").c_str()) == 0; }

class VethGsoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces and a veth pair)";
    if (!Sh("ip -V >/dev/null")) GTEST_SKIP() << "needs iproute2's ip";
    const std::string id = std::to_string(::getpid() % 100000);
    a_ = "inac-gsoa-" + id;
    b_ = "inac-gsob-" + id;
    Cleanup();
    ASSERT_TRUE(Sh(absl::StrCat("ip netns add ", a_)) && Sh(absl::StrCat("ip netns add ", b_)));
    ASSERT_TRUE(
        Sh(absl::StrCat("ip link add va netns ", a_, " type veth peer name vb netns ", b_)));
    ASSERT_TRUE(Sh(absl::StrCat("ip -n ", a_, " addr add 10.213.0.1/30 dev va")));
    ASSERT_TRUE(Sh(absl::StrCat("ip -n ", b_, " addr add 10.213.0.2/30 dev vb")));
    ASSERT_TRUE(Sh(absl::StrCat("ip -n ", a_, " link set va up")));
    ASSERT_TRUE(Sh(absl::StrCat("ip -n ", b_, " link set vb up")));
  }
  void TearDown() override { Cleanup(); }
  void Cleanup() {
    if (a_.empty()) return;
    Sh(absl::StrCat("ip netns del ", a_));
    Sh(absl::StrCat("ip netns del ", b_));
  }

  struct Seen {
    int frames = 0;      // UDP frames to the port on vb (packet socket)
    size_t largest = 0;  // bytes of the largest such frame
    int datagrams = 0;   // datagrams the UDP socket received
    int whole = 0;       // ... of exactly kPacketBytes with the chunk number sent
  };

  // Sends `count` queued datagrams from va to vb's UDP socket with `mode`; what vb saw.
  Seen SendAcross(GsoMode mode, int count) {
    Seen seen;
    auto ns_b = OpenNetns(b_);
    auto ns_a = OpenNetns(a_);
    EXPECT_TRUE(ns_a.ok() && ns_b.ok());
    if (!ns_a.ok() || !ns_b.ok()) return seen;
    const uint16_t port = 48864;
    int capture = -1;
    std::unique_ptr<UdpSocket> receiver;
    EXPECT_TRUE(RunDataPlane(*ns_b, [&]() -> absl::Status {
                  capture = ::socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));  // from the IP header
                  if (capture < 0) return absl::InternalError("AF_PACKET socket");
                  sockaddr_ll ll{};
                  ll.sll_family = AF_PACKET;
                  ll.sll_protocol = htons(ETH_P_IP);
                  ll.sll_ifindex = static_cast<int>(::if_nametoindex("vb"));
                  if (::bind(capture, reinterpret_cast<sockaddr*>(&ll), sizeof(ll)) != 0) {
                    return absl::InternalError("bind AF_PACKET");
                  }
                  auto r = UdpSocket::Open(SocketOptions{0x0AD50002, port});
                  if (!r.ok()) return r.status();
                  receiver = std::move(*r);
                  return absl::OkStatus();
                }).ok());
    EXPECT_TRUE(RunDataPlane(*ns_a, [&]() -> absl::Status {
                  SocketOptions o{0x0AD50001, port};
                  o.gso = mode;
                  auto s = UdpSocket::Open(o);
                  if (!s.ok()) return s.status();
                  for (int k = 0; k < count; ++k) {
                    InaPacket p;
                    p.chunk = static_cast<uint32_t>(k);
                    (void)(*s)->Queue(0x0AD50002, port, EncodePacket(p));
                  }
                  return (*s)->Flush();
                }).ok());
    ::close(*ns_a);
    ::close(*ns_b);
    if (capture < 0 || receiver == nullptr) return seen;
    std::vector<uint8_t> frame(70000);
    const int64_t until = NowUs() + 2000000;
    while (seen.datagrams < count && NowUs() < until) {
      receiver->Wait(10000);
      Datagram d;
      while (receiver->TryReceive(&d)) {
        ++seen.datagrams;
        auto p = DecodePacket(d.payload());
        if (p.ok() && p->chunk == static_cast<uint32_t>(seen.whole)) ++seen.whole;
      }
    }
    while (true) {
      const ssize_t n = ::recv(capture, frame.data(), frame.size(), MSG_DONTWAIT);
      if (n <= 0) break;
      // IPv4 (no options) + UDP to `port`.
      if (n >= 28 && frame[9] == 17 && ((frame[22] << 8) | frame[23]) == port) {
        ++seen.frames;
        seen.largest = std::max(seen.largest, static_cast<size_t>(n));
      }
    }
    ::close(capture);
    return seen;
  }

  std::string a_, b_;
};

TEST_F(VethGsoTest, AutoSendsOneFramePerDatagramToAVeth) {
  const Seen s = SendAcross(GsoMode::kAuto, 64);
  EXPECT_EQ(s.datagrams, 64);
  EXPECT_EQ(s.whole, 64);
  EXPECT_EQ(s.frames, 64);
  EXPECT_EQ(s.largest, kPacketBytes + 28);  // IPv4 + UDP headers, no more
}

TEST_F(VethGsoTest, OnMaySendSuperFramesYetEveryDatagramArrivesWhole) {
  const Seen s = SendAcross(GsoMode::kOn, 64);
  EXPECT_EQ(s.datagrams, 64);
  EXPECT_EQ(s.whole, 64);
  std::printf("[ info ] --gso on across a veth: %d frames for 64 datagrams, largest %zu bytes\n",
              s.frames, s.largest);
  EXPECT_GE(s.frames, 1);
}

}  // namespace
}  // namespace inac::agent
