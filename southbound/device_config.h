// The device config of api/p4/ina.p4 for each target kind: the bytes
// SetForwardingPipelineConfig carries in ForwardingPipelineConfig.p4_device_config next to the
// P4Info (P4Runtime spec v1.3, section 14). INAC embeds p4c's output in the binary (as it embeds
// the P4Info), so `inac serve` needs no file at run time; scripts/compile-p4.sh regenerates it.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/topology.h"

namespace inac::southbound {

// p4c's BMv2 JSON of api/p4/ina.p4 (api/p4/ina.json), embedded at build time.
std::string_view EmbeddedInaBmv2Json();

// The device config to push to a target of `kind`:
//   kEmulator: empty (the emulator needs none; it stores and returns whatever it is given)
//   kBmv2:     EmbeddedInaBmv2Json()
//   kTofino:   Unimplemented (no Tofino build of ina.p4 ships with INAC)
absl::StatusOr<std::string> InaDeviceConfig(core::TargetKind kind);

}  // namespace inac::southbound
