// VerifyP4Info: what the emulated switch checks of a P4Info before it realises it
// (SetForwardingPipelineConfig VERIFY*, `inac switch --p4info`).
#pragma once

#include "absl/status/status.h"
#include "p4/config/v1/p4info.pb.h"

namespace inac::southbound::emulator {

// Checks what a server must check of a P4Info before realising it: ids unique, each id carrying
// the type prefix of its object, tables referring to existing actions, match fields and params
// numbered, bitwidths positive, sizes not negative. InvalidArgument naming the first problem.
absl::Status VerifyP4Info(const p4::config::v1::P4Info& p4info);

}  // namespace inac::southbound::emulator
