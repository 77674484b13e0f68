// Audit and retention figures (docs/storage.md "Retention"), on a temporary SQLite file in $TMPDIR
// with synchronous=FULL, as the controller runs it:
//   - audit_append: durable audit appends per second and their median / p99 latency -- what the
//     audit log adds to every API write (its own transaction after the write's);
//   - prune: 50,000 finished jobs (each with an idempotency key and 2 events) among 1,000 active
//     ones, pruned by storage::PruneExpired as the controller runs it (batches of 1,000 rows, 10 ms
//     apart): total time, mean time per batch, and the latency of job submissions made
//     concurrently by another thread (how long retention holds a writer back).
// Prints one JSON line per scenario.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "storage/retention.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

int Fail(const absl::Status& status) {
  std::cerr << "retention_bench: " << status << "\n";
  return 1;
}

inac::core::JobSpec Spec(int i) {
  inac::core::JobSpec spec;
  spec.name = "job-" + std::to_string(i);
  spec.tenant = "bench";
  spec.workers = {"h0", "h1", "h2", "h3"};
  spec.parameter_servers = {"h4"};
  spec.gradient_bytes = 102'760'448;
  spec.compute_ms = 52;
  spec.iterations = 1000;
  spec.batch_size = 64;
  return spec;
}

}  // namespace

int main() {
  const std::string dir = inac::fixtures::MakeTempDir("retention-bench");
  if (dir.empty()) return Fail(absl::InternalError("mkdtemp failed"));

  // 1. Durable audit appends.
  {
    auto storage = inac::storage::SqliteStorage::Open(dir + "/audit.db");
    if (!storage.ok()) return Fail(storage.status());
    constexpr int kAppends = 300;
    std::vector<double> latencies;
    inac::core::AuditEntry e{.time_ms = 1,
                             .actor = "ops",
                             .role = "operator",
                             .remote_addr = "127.0.0.1",
                             .method = "POST",
                             .path = "/api/v1/jobs",
                             .status = 201,
                             .job_id = 1};
    const auto t0 = Clock::now();
    for (int i = 0; i < kAppends; ++i) {
      const auto a = Clock::now();
      auto seq = (*storage)->audit().Append(e);
      if (!seq.ok()) return Fail(seq.status());
      latencies.push_back(Ms(Clock::now() - a));
    }
    const double total_s = Ms(Clock::now() - t0) / 1000;
    std::cout << "{\"bench\":\"audit_append\",\"appends\":" << kAppends
              << ",\"appends_per_s\":" << static_cast<int>(kAppends / total_s)
              << ",\"median_ms\":" << Percentile(latencies, 0.5)
              << ",\"p99_ms\":" << Percentile(latencies, 0.99) << "}" << std::endl;
  }

  // 2. Pruning 50,000 finished jobs while another thread submits.
  constexpr int kFinished = 50000;
  constexpr int kActive = 1000;
  const std::string path = dir + "/prune.db";
  {
    // Bulk load without fsync per commit (setup only).
    inac::storage::SqliteOptions load;
    load.synchronous_full = false;
    auto storage = inac::storage::SqliteStorage::Open(path, load);
    if (!storage.ok()) return Fail(storage.status());
    std::vector<std::pair<inac::core::JobId, inac::core::JobUpdate>> cancel;
    for (int i = 0; i < kFinished + kActive; ++i) {
      inac::core::Event event{.time_ms = 1, .kind = "job_submitted", .message = "m"};
      auto job = (*storage)->jobs().Create(
          Spec(i), 1, inac::core::IdempotencyKey{"key-" + std::to_string(i), "h"}, {event});
      if (!job.ok()) return Fail(job.status());
      if (i >= kFinished) continue;
      inac::core::JobUpdate u;
      u.state = inac::core::JobState::kCancelled;
      cancel.push_back({job->job.id, u});
      if (cancel.size() == 1000) {
        std::vector<inac::core::Event> events;
        for (const auto& [id, update] : cancel) {
          events.push_back({.time_ms = 2, .kind = "job_state", .job_id = id, .message = "m"});
        }
        auto s = (*storage)->jobs().UpdateMany(cancel, 2, events);
        if (!s.ok()) return Fail(s);
        cancel.clear();
      }
    }
  }
  auto storage = inac::storage::SqliteStorage::Open(path);  // synchronous=FULL from here on
  if (!storage.ok()) return Fail(storage.status());
  std::atomic<bool> done{false};
  std::vector<double> writer_ms;
  std::thread writer([&] {
    int i = 0;
    while (!done.load()) {
      const auto a = Clock::now();
      auto job = (*storage)->jobs().Create(Spec(1'000'000 + i++), 3);
      if (!job.ok()) break;
      writer_ms.push_back(Ms(Clock::now() - a));
    }
  });
  // storage::PruneExpired as the controller's retention runs it: 1,000 rows per transaction,
  // 10 ms between transactions.
  inac::storage::RetentionCutoffs cutoffs;
  cutoffs.finished_jobs_before_ms = 10;
  inac::storage::RetentionResult result;
  const auto t0 = Clock::now();
  if (auto s = inac::storage::PruneExpired(**storage, cutoffs, &result); !s.ok()) return Fail(s);
  const double total_ms = Ms(Clock::now() - t0);
  done = true;
  writer.join();
  auto left = (*storage)->jobs().CountByState();
  if (!left.ok()) return Fail(left.status());
  int64_t remaining = 0;
  for (const auto& [state, n] : *left) remaining += n;
  const double batch_mean_ms =
      (total_ms - static_cast<double>(cutoffs.pause_ms) * static_cast<double>(result.batches - 1)) /
      static_cast<double>(result.batches);
  std::cout << "{\"bench\":\"prune\",\"finished_jobs\":" << kFinished
            << ",\"active_jobs\":" << kActive << ",\"pruned\":" << result.jobs
            << ",\"jobs_left\":" << remaining << ",\"batch_rows\":" << cutoffs.batch_rows
            << ",\"pause_ms\":" << cutoffs.pause_ms << ",\"batches\":" << result.batches
            << ",\"total_ms\":" << static_cast<int>(total_ms)
            << ",\"batch_mean_ms\":" << batch_mean_ms
            << ",\"concurrent_submissions\":" << writer_ms.size()
            << ",\"submission_median_ms\":" << Percentile(writer_ms, 0.5)
            << ",\"submission_p99_ms\":" << Percentile(writer_ms, 0.99)
            << ",\"submission_max_ms\":" << Percentile(writer_ms, 1.0) << "}" << std::endl;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
