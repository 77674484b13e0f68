#include "southbound/testing/write_status.h"

#include <string>

#include "google/rpc/code.pb.h"
#include "google/rpc/status.pb.h"
#include "p4/v1/p4runtime.pb.h"

namespace inac::southbound {

grpc::Status EncodeWriteStatus(const std::vector<absl::Status>& results) {
  bool all_ok = true;
  for (const auto& r : results) all_ok = all_ok && r.ok();
  if (all_ok) return grpc::Status::OK;
  google::rpc::Status details;
  details.set_code(google::rpc::UNKNOWN);
  details.set_message("Write failure.");
  for (const auto& r : results) {
    p4::v1::Error error;
    error.set_canonical_code(static_cast<int>(r.code()));
    if (!r.ok()) error.set_message(std::string(r.message()));
    details.add_details()->PackFrom(error);
  }
  return grpc::Status(grpc::StatusCode::UNKNOWN, "Write failure.", details.SerializeAsString());
}

}  // namespace inac::southbound
