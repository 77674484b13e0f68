// The value codecs and transaction builders of EtcdStorage (storage/etcd/etcd_storage_impl.h):
// how events, jobs and the topology are stored as JSON under their keys.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "storage/etcd/etcd_storage_impl.h"

namespace inac::storage::etcd::internal {

using etcdserverpb::Compare;
using etcdserverpb::TxnRequest;
using Json = core::Json;

std::string Seq20(int64_t n) { return absl::StrFormat("%020d", n); }

absl::StatusOr<Json> ParseStored(const std::string& text, const std::string& what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat("stored ", what, " is not JSON"));
  return j;
}

std::string EncodeEvent(const core::Event& e) {
  Json j = {{"seq", e.seq},
            {"time_ms", e.time_ms},
            {"kind", e.kind},
            {"message", e.message},
            {"data_json", e.data_json}};
  if (e.job_id) j["job_id"] = *e.job_id;
  return j.dump();
}

absl::StatusOr<core::Event> DecodeEvent(const std::string& text) {
  INAC_ASSIGN_OR_RETURN(Json j, ParseStored(text, "event"));
  try {
    core::Event e;
    e.seq = j.at("seq").get<int64_t>();
    e.time_ms = j.at("time_ms").get<int64_t>();
    e.kind = j.at("kind").get<std::string>();
    e.message = j.at("message").get<std::string>();
    e.data_json = j.at("data_json").get<std::string>();
    if (j.contains("job_id")) e.job_id = j.at("job_id").get<core::JobId>();
    return e;
  } catch (const std::exception& ex) {
    return absl::DataLossError(absl::StrCat("stored event does not decode: ", ex.what()));
  }
}

absl::StatusOr<core::Job> DecodeJob(const std::string& text) {
  INAC_ASSIGN_OR_RETURN(Json j, ParseStored(text, "job"));
  auto job = core::JobFromJson(j);
  if (!job.ok()) return absl::DataLossError(job.status().message());
  return job;
}

absl::StatusOr<core::TopologyRecord> DecodeTopology(const std::string& text) {
  INAC_ASSIGN_OR_RETURN(Json j, ParseStored(text, "topology"));
  if (!j.is_object() || !j.contains("topology") || !j.contains("version")) {
    return absl::DataLossError("stored topology lacks topology or version");
  }
  std::vector<core::Problem> problems;
  core::TopologyRecord record;
  record.topology = core::TopologyFromJson(j["topology"], &problems);
  if (!problems.empty()) return absl::DataLossError("stored topology does not decode");
  record.version = j.value("version", int64_t{0});
  record.updated_ms = j.value("updated_ms", int64_t{0});
  return record;
}

void AddPut(TxnRequest* txn, const std::string& key, const std::string& value) {
  auto* put = txn->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
}

void AddDelete(TxnRequest* txn, const std::string& key, const std::string& range_end) {
  auto* del = txn->add_success()->mutable_request_delete_range();
  del->set_key(key);
  if (!range_end.empty()) del->set_range_end(range_end);
}

void AddCompareMod(TxnRequest* txn, const std::string& key, int64_t mod_revision) {
  auto* c = txn->add_compare();
  c->set_key(key);
  c->set_target(Compare::MOD);
  c->set_result(Compare::EQUAL);
  c->set_mod_revision(mod_revision);
}

std::string PlanStamp(const std::string& value) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a offset basis
  for (unsigned char c : value) {
    h ^= c;
    h *= 1099511628211ull;  // FNV prime
  }
  return absl::StrFormat("%016x", h);
}

}  // namespace inac::storage::etcd::internal
