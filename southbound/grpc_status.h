// The one place where gRPC / google.rpc statuses become absl::Status (docs/architecture.md,
// "Conventions": one conversion function per edge), including the per-update errors of a P4Runtime
// Write (P4Runtime spec v1.3, section 12.3 "Error Reporting Messages": top-level UNKNOWN, details =
// one p4.v1.Error per update, in order, OK for the updates that succeeded).
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"

namespace inac::southbound {

// gRPC status -> absl::Status, same canonical code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The outcome of each of the `num_updates` updates of one Write RPC:
//  - OK: every update OK.
//  - details holding `num_updates` p4.v1.Error (spec, and BMv2's top-level UNKNOWN): one status
//    per update, from the canonical code and message of its Error.
//  - no (usable) details and `num_updates == 1`: the top-level status is that update's status
//    (servers that answer a single failed update with its own code).
//  - otherwise: the RPC failed as a whole (PERMISSION_DENIED, UNAVAILABLE, ...); that error is
//    returned, and the caller must assume nothing about which updates were applied.
absl::StatusOr<std::vector<absl::Status>> DecodeWriteStatus(const grpc::Status& status,
                                                            size_t num_updates);

}  // namespace inac::southbound
