// Training jobs: what a launcher submits (JobSpec) and what the controller tracks (Job), with the
// one place the legal state transitions are encoded. File format: docs/formats.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace inac::core {

using JobId = int64_t;

enum class AllReduce { kPs, kRing };

struct JobSpec {
  std::string name;
  std::string tenant = "default";
  int priority = 0;                            // higher runs first when memory is contended
  std::vector<std::string> workers;            // host ids
  std::vector<std::string> parameter_servers;  // host ids; empty means ring all-reduce
  AllReduce allreduce = AllReduce::kPs;
  int64_t gradient_bytes = 0;  // per iteration, per worker
  double compute_ms = 0;       // per iteration at batch_size
  int64_t iterations = 0;
  int batch_size = 0;
  std::vector<int> batch_sizes;  // allowed choices for batch-size adjustment (InGo); may be empty
  std::optional<std::string> model;  // built-in model name (core/models.h)
  // Convergence inputs of batch-size adjustment (InGo, docs/batch-size.md); absent: defaults
  // that keep `iterations` at `batch_size`. steps_min: steps to the target at infinite batch;
  // noise_scale: gradient noise scale B_noise in samples of the global batch; or target_epochs
  // with dataset_size (samples) instead of steps_min.
  std::optional<double> steps_min;
  std::optional<double> noise_scale;
  std::optional<double> target_epochs;
  std::optional<int64_t> dataset_size;

  bool operator==(const JobSpec&) const = default;
};

enum class JobState { kPending, kScheduled, kRunning, kCompleted, kCancelled, kFailed };

std::string_view JobStateName(JobState state);
// Returns nullopt for an unknown name.
std::optional<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState state);

// The legal transitions, encoded once:
//   pending   -> scheduled | cancelled | failed
//   scheduled -> running | pending | cancelled | failed
//   running   -> completed | scheduled | pending | cancelled | failed
//   completed, cancelled, failed: terminal.
// scheduled -> pending and running -> pending happen when a re-plan can no longer place the job;
// running -> scheduled when a re-plan moves it and its switches have not all applied the change.
bool IsLegalTransition(JobState from, JobState to);
// OK, or FailedPrecondition naming both states.
absl::Status CheckTransition(JobState from, JobState to);

struct Job {
  JobId id = 0;
  JobSpec spec;
  JobState state = JobState::kPending;
  int64_t iterations_done = 0;
  std::optional<double> loss;
  std::string failure_reason;  // set when state == kFailed
  int64_t created_ms = 0;      // Unix epoch milliseconds, set by the controller
  int64_t updated_ms = 0;

  bool operator==(const Job&) const = default;
};

// Moves `job` to `to` if legal; FailedPrecondition otherwise (job unchanged).
absl::Status Transition(Job& job, JobState to);

}  // namespace inac::core
