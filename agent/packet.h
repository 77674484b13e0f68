// The INA packet of api/p4/ina.p4 (header `ina_t`) as the hosts see it: the UDP payload of every
// packet between workers, switches and parameter servers (docs/ina-pipeline.md, "Data plane
// (contract v2)").
//
// Contract: the payload is exactly kPacketBytes (272) bytes, every field in network byte order:
//   offset  0  u32  tag       (field `job_id`: core::AggregationTag, generation * 2^30 + job * 64 +
//                              PS * 8 + range)
//   offset  4  u32  chunk     (chunk number; continues across iterations)
//   offset  8  u32  slot      (aggregator slot within the tag's region)
//   offset 12  u8   flags     (kFlagResult 1, kFlagFallback 2, kFlagAggregate 4, kFlagRetransmit 8)
//   offset 13  u8   count     (workers summed in this packet)
//   offset 14  u16  reserved  (0 when sent, ignored when received)
//   offset 16  u64  bitmap    (inputs of the sending switch the data covers)
//   offset 24  62 x i32 lanes (two's complement)
// It always travels to UDP destination port kInaUdpPort (48864, 0xBEE0): the switch parses INA
// only there, and results come back to that port too. Decode refuses any other length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"

namespace inac::agent {

inline constexpr uint16_t kInaUdpPort = 48864;
inline constexpr int kLanes = 62;  // int32 lanes per packet = one aggregator
inline constexpr size_t kHeaderBytes = 24;
inline constexpr size_t kPacketBytes = kHeaderBytes + kLanes * 4;  // 272

inline constexpr uint8_t kFlagResult = 1;
inline constexpr uint8_t kFlagFallback = 2;
inline constexpr uint8_t kFlagAggregate = 4;
inline constexpr uint8_t kFlagRetransmit = 8;

struct InaPacket {
  uint32_t tag = 0;
  uint32_t chunk = 0;
  uint32_t slot = 0;
  uint8_t flags = 0;
  uint8_t count = 0;
  uint16_t reserved = 0;
  uint64_t bitmap = 0;
  std::array<int32_t, kLanes> lanes{};

  bool operator==(const InaPacket&) const = default;
};

using PacketBytes = std::array<uint8_t, kPacketBytes>;

// The wire form of `packet` (network byte order).
PacketBytes EncodePacket(const InaPacket& packet);

// Writes the wire form into `out`; InvalidArgument if `out` is shorter than kPacketBytes.
absl::Status EncodePacketInto(const InaPacket& packet, std::span<uint8_t> out);

// Rewrites the tag of an encoded packet.
void SetPacketTag(uint32_t tag, PacketBytes* bytes);

// Parses a UDP payload; InvalidArgument (naming the length) unless it is exactly kPacketBytes.
absl::StatusOr<InaPacket> DecodePacket(std::span<const uint8_t> payload);

// Writes the header fields of `packet` (the first kHeaderBytes) into `out`, which must hold
// kPacketBytes; the lanes are the caller's (StoreWireLanes).
void EncodePacketHeader(const InaPacket& packet, uint8_t* out);

// The header fields of a UDP payload into `out` (its lanes untouched); false unless the payload is
// exactly kPacketBytes (DecodePacket says why).
bool DecodePacketHeader(std::span<const uint8_t> payload, InaPacket* out);

// The lanes' wire form without a packet around them (the agents' hot loops): `n` lanes at
// `wire` (network byte order) into `out`; `lanes` into `wire`; and `wire`'s lanes added to
// `sums` modulo 2^32. Vectorised where the CPU allows.
void LoadWireLanes(const uint8_t* wire, int n, int32_t* out);
void StoreWireLanes(const int32_t* lanes, int n, uint8_t* wire);
void AddWireLanes(const uint8_t* wire, int n, uint32_t* sums);

}  // namespace inac::agent
