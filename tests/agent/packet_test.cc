// The INA packet codec against api/p4/ina.p4's ina_t: every field's offset and byte order.
#include <gtest/gtest.h>

#include <vector>

#include "agent/packet.h"

namespace inac::agent {
namespace {

InaPacket Sample() {
  InaPacket p;
  p.tag = 0x01020304;
  p.chunk = 0x05060708;
  p.slot = 0x090A0B0C;
  p.flags = kFlagFallback | kFlagRetransmit;
  p.count = 0x0D;
  p.reserved = 0x0E0F;
  p.bitmap = 0x1112131415161718ull;
  for (int i = 0; i < kLanes; ++i) p.lanes[i] = (i % 2 == 0 ? 1 : -1) * (0x01000000 * i + i);
  return p;
}

TEST(PacketTest, SizeMatchesInaP4Header) {
  // 32 + 32 + 32 + 8 + 8 + 16 + 64 bits of header, 62 lanes of 32 bits.
  EXPECT_EQ(kHeaderBytes, 24u);
  EXPECT_EQ(kPacketBytes, 272u);
  EXPECT_EQ(kInaUdpPort, 0xBEE0);
  EXPECT_EQ(kFlagResult, 1);
  EXPECT_EQ(kFlagFallback, 2);
  EXPECT_EQ(kFlagAggregate, 4);
  EXPECT_EQ(kFlagRetransmit, 8);
}

TEST(PacketTest, FieldOffsetsInNetworkOrder) {
  const PacketBytes b = EncodePacket(Sample());
  const std::vector<uint8_t> head(b.begin(), b.begin() + 24);
  const std::vector<uint8_t> want = {0x01, 0x02, 0x03, 0x04,                           // tag
                                     0x05, 0x06, 0x07, 0x08,                           // chunk
                                     0x09, 0x0A, 0x0B, 0x0C,                           // slot
                                     0x0A,                                             // flags
                                     0x0D,                                             // count
                                     0x0E, 0x0F,                                       // reserved
                                     0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};  // bitmap
  EXPECT_EQ(head, want);
  // Lane i at 24 + 4 i, big-endian two's complement.
  for (int i = 0; i < kLanes; ++i) {
    const uint32_t u = static_cast<uint32_t>(Sample().lanes[i]);
    const size_t at = 24 + 4 * static_cast<size_t>(i);
    EXPECT_EQ(b[at], static_cast<uint8_t>(u >> 24)) << i;
    EXPECT_EQ(b[at + 1], static_cast<uint8_t>(u >> 16)) << i;
    EXPECT_EQ(b[at + 2], static_cast<uint8_t>(u >> 8)) << i;
    EXPECT_EQ(b[at + 3], static_cast<uint8_t>(u)) << i;
  }
  // Lane 1 is negative: -(0x01000001) = 0xFEFFFFFF.
  EXPECT_EQ(b[28], 0xFE);
  EXPECT_EQ(b[31], 0xFF);
  EXPECT_EQ(b[271], static_cast<uint8_t>(static_cast<uint32_t>(Sample().lanes[61])));
}

TEST(PacketTest, RoundTrip) {
  const InaPacket p = Sample();
  const PacketBytes b = EncodePacket(p);
  auto back = DecodePacket(b);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, p);

  InaPacket extremes;
  extremes.tag = 0xFFFFFFFF;
  extremes.chunk = 0;
  extremes.bitmap = ~0ull;
  extremes.lanes.fill(INT32_MIN);
  extremes.lanes[61] = INT32_MAX;
  auto again = DecodePacket(EncodePacket(extremes));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, extremes);
}

TEST(PacketTest, DecodeRefusesOtherLengths) {
  std::vector<uint8_t> bytes(kPacketBytes + 1, 0);
  for (size_t n : {size_t{0}, size_t{24}, kPacketBytes - 1, kPacketBytes + 1}) {
    auto p = DecodePacket(std::span<const uint8_t>(bytes.data(), n));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  std::vector<uint8_t> small(10);
  EXPECT_FALSE(EncodePacketInto(Sample(), small).ok());
  std::vector<uint8_t> big(300, 0xAA);
  ASSERT_TRUE(EncodePacketInto(Sample(), big).ok());
  EXPECT_EQ(big[272], 0xAA);  // nothing written past the packet
}

}  // namespace
}  // namespace inac::agent
