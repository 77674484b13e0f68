#include "agent/packet.h"

#include "absl/strings/str_cat.h"

namespace inac::agent {
namespace {

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void SetPacketTag(uint32_t tag, PacketBytes* bytes) { Put32(bytes->data(), tag); }

absl::Status EncodePacketInto(const InaPacket& packet, std::span<uint8_t> out) {
  if (out.size() < kPacketBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("INA packet buffer: ", out.size(), " bytes, need ", kPacketBytes));
  }
  uint8_t* p = out.data();
  Put32(p + 0, packet.tag);
  Put32(p + 4, packet.chunk);
  Put32(p + 8, packet.slot);
  p[12] = packet.flags;
  p[13] = packet.count;
  Put16(p + 14, packet.reserved);
  Put64(p + 16, packet.bitmap);
  for (int i = 0; i < kLanes; ++i) {
    Put32(p + kHeaderBytes + 4 * i, static_cast<uint32_t>(packet.lanes[i]));
  }
  return absl::OkStatus();
}

PacketBytes EncodePacket(const InaPacket& packet) {
  PacketBytes bytes{};
  (void)EncodePacketInto(packet, bytes);
  return bytes;
}

absl::StatusOr<InaPacket> DecodePacket(std::span<const uint8_t> payload) {
  if (payload.size() != kPacketBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("INA packet: ", payload.size(), " bytes, want exactly ", kPacketBytes));
  }
  const uint8_t* p = payload.data();
  InaPacket packet;
  packet.tag = Get32(p + 0);
  packet.chunk = Get32(p + 4);
  packet.slot = Get32(p + 8);
  packet.flags = p[12];
  packet.count = p[13];
  packet.reserved = Get16(p + 14);
  packet.bitmap = Get64(p + 16);
  for (int i = 0; i < kLanes; ++i) {
    packet.lanes[i] = static_cast<int32_t>(Get32(p + kHeaderBytes + 4 * i));
  }
  return packet;
}

}  // namespace inac::agent
