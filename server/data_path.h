// How each training worker's all-reduces are carried, as the workers report it (POST
// /jobs/{id}/data-path, e.g. from libinac_client): in-network aggregation ("ina"), straight to the
// parameter servers ("ps"), or the collective fallback on another library ("fallback", with a
// reason: no grant, a timeout, the controller or a switch gone). GET /jobs/{id} answers the
// summary as `data_path` and the dashboard shows it ("INA active", "fallback: <reason>").
//
// Telemetry, like the switches' INA counters (JobService::JobCounters): DataPathBook holds the
// latest report of each (job, worker) in memory only. It is NOT persisted: a restarted controller
// (or, in cluster mode, a new leader; followers refuse writes and never hold any) knows nothing
// until the workers report again. A job's reports are dropped when it ends (completed, cancelled,
// failed) or leaves storage. Bounded: one entry per worker of the job (the caller checks that the
// worker belongs to the job), so at most the workers of the active jobs.
//
// Thread safety: DataPathBook's methods may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/job.h"

namespace inac::server {

enum class DataPathKind { kIna, kPs, kFallback };

// "ina", "ps", "fallback".
std::string_view DataPathKindName(DataPathKind kind);
// The kind named `name` (exactly as DataPathKindName writes it); nullopt otherwise.
std::optional<DataPathKind> ParseDataPathKind(std::string_view name);

// A report's `reason`: at most this many characters (Unicode code points), no control characters.
inline constexpr size_t kMaxDataPathReasonChars = 256;
// A report's counts: integers in [0, 2^53 - 1] (exact in JSON readers that use doubles).
inline constexpr int64_t kMaxDataPathCount = (int64_t{1} << 53) - 1;

// One worker's latest report.
struct DataPathReport {
  std::string worker;  // a worker of the job
  DataPathKind path = DataPathKind::kIna;
  std::string reason;      // why (may be empty)
  int64_t allreduces = 0;  // all-reduces so far, as the worker counts them
  int64_t fallbacks = 0;   // of which it fell back
  int64_t updated_ms = 0;  // when the controller received it (epoch ms)
};

// A job's data path: the summary of its workers' latest reports.
struct JobDataPath {
  // "ina", "ps" or "fallback" when every reporting worker's latest path is that one, else "mixed".
  std::string state;
  // "INA active", "PS only", "fallback: <reason>" (the reason of the most recently received
  // fallback report), or for "mixed" the count of workers per path, e.g. "mixed (1 INA,
  // 1 fallback); fallback: <reason>".
  std::string summary;
  int64_t allreduces = 0;  // sums over the reporting workers (saturated at INT64_MAX)
  int64_t fallbacks = 0;
  std::vector<DataPathReport> workers;  // by worker id
};

class DataPathBook {
 public:
  // Stores `report` as its worker's latest for `job` and returns the job's data path after it.
  JobDataPath Record(core::JobId job, DataPathReport report);
  // The job's data path; nullopt before any report (and after Drop).
  std::optional<JobDataPath> Get(core::JobId job) const;
  // Forgets the job's reports (the job ended).
  void Drop(core::JobId job);
  // Forgets the reports of every job not in `active` (the non-terminal jobs of a snapshot).
  void Retain(const std::vector<core::Job>& active);
  // Reports held, over all jobs (tests).
  size_t size() const;

 private:
  struct Entry {
    DataPathReport report;
    uint64_t seq = 0;  // receive order, for "the most recent fallback report"
  };
  static JobDataPath Summarize(const std::map<std::string, Entry>& entries);

  mutable absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<core::JobId, std::map<std::string, Entry>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inac::server
