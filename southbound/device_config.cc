#include "southbound/device_config.h"

#include "absl/status/status.h"

namespace inac::southbound {

absl::StatusOr<std::string> InaDeviceConfig(core::TargetKind kind) {
  switch (kind) {
    case core::TargetKind::kEmulator:
      return std::string();
    case core::TargetKind::kBmv2:
      return std::string(EmbeddedInaBmv2Json());
    case core::TargetKind::kTofino:
      break;
  }
  return absl::UnimplementedError(
      "target tofino: no Tofino build of ina.p4 ships with INAC (targets: emulator, bmv2)");
}

}  // namespace inac::southbound
