// Test servers' side of P4Runtime's Write errors (tests only: inac_southbound_testing).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace inac::southbound {

// Builds the grpc::Status a spec-conformant server returns for per-update `results`: OK when all
// are OK, else UNKNOWN with one p4.v1.Error per update (the inverse of DecodeWriteStatus,
// southbound/grpc_status.h).
grpc::Status EncodeWriteStatus(const std::vector<absl::Status>& results);

}  // namespace inac::southbound
