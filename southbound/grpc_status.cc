#include "southbound/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/v1/p4runtime.pb.h"

namespace inac::southbound {
namespace {

absl::StatusCode ToAbslCode(int code) {
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(ToAbslCode(static_cast<int>(status.error_code())), status.error_message());
}

absl::StatusOr<std::vector<absl::Status>> DecodeWriteStatus(const grpc::Status& status,
                                                            size_t num_updates) {
  if (status.ok()) return std::vector<absl::Status>(num_updates, absl::OkStatus());
  if (!status.error_details().empty()) {
    google::rpc::Status details;
    if (details.ParseFromString(status.error_details()) &&
        static_cast<size_t>(details.details_size()) == num_updates) {
      std::vector<absl::Status> results;
      results.reserve(num_updates);
      bool all_errors = true;
      for (const auto& any : details.details()) {
        p4::v1::Error error;
        if (!any.UnpackTo(&error)) {
          all_errors = false;
          break;
        }
        results.emplace_back(ToAbslCode(error.canonical_code()), error.message());
      }
      if (all_errors) return results;
    }
  }
  if (num_updates == 1) return std::vector<absl::Status>{FromGrpcStatus(status)};
  return FromGrpcStatus(status);
}

}  // namespace inac::southbound
