#include "agent/packet.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace inac::agent {
namespace {

// Network byte order <-> host, for one 32-bit word.
inline uint32_t NetToHost32(uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(v);
  return v;
}

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

// Plain loops over independent words: the compiler vectorises them (byte shuffles with SSSE3 or
// AVX2, picked at load time by target_clones; shifts on plain x86-64).
__attribute__((target_clones("avx2", "default"))) void LoadWireLanes(const uint8_t* __restrict wire,
                                                                     int n,
                                                                     int32_t* __restrict out) {
  for (int i = 0; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, wire + 4 * i, 4);
    out[i] = static_cast<int32_t>(NetToHost32(v));
  }
}

__attribute__((target_clones("avx2", "default"))) void StoreWireLanes(
    const int32_t* __restrict lanes, int n, uint8_t* __restrict wire) {
  for (int i = 0; i < n; ++i) {
    const uint32_t v = NetToHost32(static_cast<uint32_t>(lanes[i]));
    std::memcpy(wire + 4 * i, &v, 4);
  }
}

__attribute__((target_clones("avx2", "default"))) void AddWireLanes(const uint8_t* __restrict wire,
                                                                    int n,
                                                                    uint32_t* __restrict sums) {
  for (int i = 0; i < n; ++i) {
    uint32_t v;
    std::memcpy(&v, wire + 4 * i, 4);
    sums[i] += NetToHost32(v);
  }
}

void SetPacketTag(uint32_t tag, PacketBytes* bytes) { Put32(bytes->data(), tag); }

absl::Status EncodePacketInto(const InaPacket& packet, std::span<uint8_t> out) {
  if (out.size() < kPacketBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("INA packet buffer: ", out.size(), " bytes, need ", kPacketBytes));
  }
  uint8_t* p = out.data();
  EncodePacketHeader(packet, p);
  StoreWireLanes(packet.lanes.data(), kLanes, p + kHeaderBytes);
  return absl::OkStatus();
}

PacketBytes EncodePacket(const InaPacket& packet) {
  PacketBytes bytes{};
  (void)EncodePacketInto(packet, bytes);
  return bytes;
}

void EncodePacketHeader(const InaPacket& packet, uint8_t* p) {
  Put32(p + 0, packet.tag);
  Put32(p + 4, packet.chunk);
  Put32(p + 8, packet.slot);
  p[12] = packet.flags;
  p[13] = packet.count;
  Put16(p + 14, packet.reserved);
  Put64(p + 16, packet.bitmap);
}

bool DecodePacketHeader(std::span<const uint8_t> payload, InaPacket* out) {
  if (payload.size() != kPacketBytes) return false;
  const uint8_t* p = payload.data();
  out->tag = Get32(p + 0);
  out->chunk = Get32(p + 4);
  out->slot = Get32(p + 8);
  out->flags = p[12];
  out->count = p[13];
  out->reserved = Get16(p + 14);
  out->bitmap = Get64(p + 16);
  return true;
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
  LoadWireLanes(p + kHeaderBytes, kLanes, packet.lanes.data());
  return packet;
}

}  // namespace inac::agent
