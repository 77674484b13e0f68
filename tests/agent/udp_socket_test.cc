// The batched socket on loopback: queued datagrams leave in one sendmmsg per batch (UDP GSO runs
// per destination), arrive whole and in order per destination (GRO-coalesced messages split back
// at their segment size), whatever their sizes; Send keeps its place after what is queued; the
// drop hook applies to queued datagrams too.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "agent/clock.h"
#include "agent/udp_socket.h"
#include "agent_fixtures.h"

namespace inac::agent {
namespace {

using testing::Loopback;
using testing::PickUdpPort;

constexpr int kB = 30;  // 127.77.30.x

std::vector<uint8_t> Numbered(uint32_t n, size_t size) {
  std::vector<uint8_t> bytes(size, static_cast<uint8_t>(n));
  std::memcpy(bytes.data(), &n, sizeof(n));
  return bytes;
}

// Everything `s` receives within `ms` or until `want` arrived: each datagram's number and length.
std::vector<std::pair<uint32_t, size_t>> Drain(UdpSocket& s, size_t want, int ms = 3000) {
  std::vector<std::pair<uint32_t, size_t>> got;
  const int64_t until = NowUs() + ms * 1000;
  while (got.size() < want && NowUs() < until) {
    if (!s.Wait(10000)) continue;
    DatagramView d;
    while (s.Next(&d)) {
      uint32_t n = 0;
      std::memcpy(&n, d.payload.data(), sizeof(n));
      got.emplace_back(n, d.payload.size());
    }
  }
  return got;
}

TEST(UdpSocketTest, ABatchLeavesInFewCallsAndArrivesWholeInOrderPerDestination) {
  const uint16_t port = PickUdpPort();
  auto tx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 1), port});
  auto a = UdpSocket::Open(SocketOptions{Loopback(77, kB, 2), port});
  auto b = UdpSocket::Open(SocketOptions{Loopback(77, kB, 3), port});
  ASSERT_TRUE(tx.ok() && a.ok() && b.ok());
  // 300 datagrams, alternating destinations, sizes 272 except every 50th (100 bytes).
  for (uint32_t i = 0; i < 300; ++i) {
    const size_t size = i % 50 == 49 ? 100 : kPacketBytes;
    ASSERT_TRUE(
        (*tx)->Queue(Loopback(77, kB, 2 + static_cast<int>(i % 2)), port, Numbered(i, size)).ok());
  }
  ASSERT_TRUE((*tx)->Flush().ok());
  EXPECT_EQ((*tx)->send_calls(), 2u);  // 256, then 44: one sendmmsg each
  EXPECT_EQ((*tx)->sent(), 300u);
  for (int d = 0; d < 2; ++d) {
    auto got = Drain(d == 0 ? **a : **b, 150);
    ASSERT_EQ(got.size(), 150u) << "destination " << d;
    for (size_t k = 0; k < got.size(); ++k) {
      const uint32_t i = static_cast<uint32_t>(2 * k + d);
      EXPECT_EQ(got[k].first, i);
      EXPECT_EQ(got[k].second, i % 50 == 49 ? 100u : kPacketBytes) << i;
    }
  }
}

TEST(UdpSocketTest, SendLeavesAfterWhatIsQueuedAndQueueInPlaceIsWhatLeaves) {
  const uint16_t port = PickUdpPort();
  auto tx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 4), port});
  auto rx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 5), port});
  ASSERT_TRUE(tx.ok() && rx.ok());
  for (uint32_t i = 0; i < 3; ++i) {
    std::span<uint8_t> slot = (*tx)->QueueInPlace(Loopback(77, kB, 5), port, kPacketBytes, i);
    ASSERT_EQ(slot.size(), kPacketBytes);
    std::memcpy(slot.data(), Numbered(i, kPacketBytes).data(), kPacketBytes);
  }
  ASSERT_TRUE((*tx)->Send(Loopback(77, kB, 5), port, Numbered(3, 40)).ok());
  auto got = Drain(**rx, 4);
  ASSERT_EQ(got.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(got[i].first, i);
  EXPECT_EQ(got[3].second, 40u);
}

// A PS sends each result to every member from one copy of its bytes (QueueCopy), also across
// batch boundaries and flushes.
TEST(UdpSocketTest, QueueCopySendsTheSameBytesToAnotherDestination) {
  const uint16_t port = PickUdpPort();
  auto tx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 8), port});
  auto a = UdpSocket::Open(SocketOptions{Loopback(77, kB, 9), port});
  auto b = UdpSocket::Open(SocketOptions{Loopback(77, kB, 10), port});
  ASSERT_TRUE(tx.ok() && a.ok() && b.ok());
  EXPECT_FALSE((*tx)->QueueCopy(Loopback(77, kB, 10), port).ok());  // nothing queued yet
  for (uint32_t i = 0; i < 300; ++i) {
    ASSERT_TRUE((*tx)->Queue(Loopback(77, kB, 9), port, Numbered(i, kPacketBytes)).ok());
    if (i == 150) {
      ASSERT_TRUE((*tx)->Flush().ok());  // the copy then comes from the old bytes
    }
    ASSERT_TRUE((*tx)->QueueCopy(Loopback(77, kB, 10), port).ok());
  }
  ASSERT_TRUE((*tx)->Flush().ok());
  for (UdpSocket* rx : {a->get(), b->get()}) {
    auto got = Drain(*rx, 300);
    ASSERT_EQ(got.size(), 300u);
    for (uint32_t i = 0; i < 300; ++i) {
      EXPECT_EQ(got[i].first, i);
      EXPECT_EQ(got[i].second, kPacketBytes);
    }
  }
}

TEST(UdpSocketTest, TheDropHookDiscardsQueuedDatagramsDeterministically) {
  const uint16_t port = PickUdpPort();
  std::vector<size_t> received;
  for (int run = 0; run < 2; ++run) {
    auto tx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 6), port, 10.0, 7});
    auto rx = UdpSocket::Open(SocketOptions{Loopback(77, kB, 7), port});
    ASSERT_TRUE(tx.ok() && rx.ok());
    for (uint32_t i = 0; i < 200; ++i) {
      ASSERT_TRUE((*tx)->Queue(Loopback(77, kB, 7), port, Numbered(i, kPacketBytes)).ok());
    }
    ASSERT_TRUE((*tx)->Flush().ok());
    const size_t dropped = (*tx)->dropped();
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, 60u);
    received.push_back(Drain(**rx, 200 - dropped).size() + dropped);
  }
  EXPECT_EQ(received[0], 200u);
  EXPECT_EQ(received[1], 200u);
}

TEST(UdpSocketTest, GsoModesParse) {
  EXPECT_EQ(*ParseGsoMode("off"), GsoMode::kOff);
  EXPECT_EQ(*ParseGsoMode("auto"), GsoMode::kAuto);
  EXPECT_EQ(*ParseGsoMode("on"), GsoMode::kOn);
  auto bad = ParseGsoMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("off, auto, on"), std::string::npos);
}

}  // namespace
}  // namespace inac::agent
