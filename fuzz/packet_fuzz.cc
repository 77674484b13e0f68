// Fuzzes the INA packet decoder of agent/packet.h (every UDP payload an agent receives goes
// through it). Besides the sanitizers, it checks:
//   - DecodePacket and DecodePacketHeader accept exactly the payloads of kPacketBytes, and
//     DecodePacket's refusal is InvalidArgument naming the length;
//   - a decoded packet encodes back to the payload, byte for byte (EncodePacket, and
//     EncodePacketInto with a buffer too short is refused);
//   - DecodePacketHeader reads the same header fields and leaves the lanes alone;
//   - the lanes' helpers (LoadWireLanes, AddWireLanes, StoreWireLanes) agree with the decoder.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "absl/strings/match.h"
#include "agent/packet.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inac::agent;
  const std::span<const uint8_t> payload(data, size);
  const absl::StatusOr<InaPacket> packet = DecodePacket(payload);
  InaPacket header;
  header.lanes[0] = 12345;
  const bool header_ok = DecodePacketHeader(payload, &header);
  FUZZ_CHECK(packet.ok() == (size == kPacketBytes));
  FUZZ_CHECK(header_ok == packet.ok());
  if (!packet.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(packet.status()));
    FUZZ_CHECK(absl::StrContains(packet.status().message(), std::to_string(size)));
    return 0;
  }
  const PacketBytes bytes = EncodePacket(*packet);
  FUZZ_CHECK(std::memcmp(bytes.data(), data, kPacketBytes) == 0);
  std::array<uint8_t, kPacketBytes> short_buffer{};
  FUZZ_CHECK(
      !EncodePacketInto(*packet, std::span<uint8_t>(short_buffer).first(kPacketBytes - 1)).ok());

  FUZZ_CHECK(header.tag == packet->tag && header.chunk == packet->chunk &&
             header.slot == packet->slot && header.flags == packet->flags &&
             header.count == packet->count && header.reserved == packet->reserved &&
             header.bitmap == packet->bitmap);
  FUZZ_CHECK(header.lanes[0] == 12345);

  std::array<int32_t, kLanes> lanes{};
  LoadWireLanes(data + kHeaderBytes, kLanes, lanes.data());
  FUZZ_CHECK(lanes == packet->lanes);
  std::array<uint32_t, kLanes> sums{};
  for (int i = 0; i < kLanes; ++i) sums[i] = static_cast<uint32_t>(i);
  AddWireLanes(data + kHeaderBytes, kLanes, sums.data());
  for (int i = 0; i < kLanes; ++i) {
    FUZZ_CHECK(sums[i] == static_cast<uint32_t>(i) + static_cast<uint32_t>(lanes[i]));
  }
  std::array<uint8_t, kLanes * 4> wire{};
  StoreWireLanes(lanes.data(), kLanes, wire.data());
  FUZZ_CHECK(std::memcmp(wire.data(), data + kHeaderBytes, wire.size()) == 0);
  return 0;
}
