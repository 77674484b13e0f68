// Job traces for the simulator: the codec (CSV and JSON text <-> values, no I/O: the CLI reads
// the files) and the synthetic workload generator (Poisson or all-at-zero arrivals over the
// built-in model table of core/models.h). Formats in docs/memory.md ("Traces").
//
// Deterministic: the generator draws from its own 64-bit PCG-style stream seeded by the caller,
// never from std:: distributions (whose output differs between standard libraries).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/validation.h"

namespace inac::scheduler {

// One job of a trace.
struct TraceJob {
  std::string name;
  double arrival_s = 0;
  std::string model;               // built-in model name; "" when gradient and compute are given
  int64_t gradient_bytes = 0;      // per iteration and worker; from the model when 0
  double compute_ms = -1;          // per iteration; from the model when < 0
  int workers = 0;                 // worker count, placed by the simulator's rule
  std::vector<std::string> hosts;  // explicit worker hosts (then workers = size)
  std::vector<std::string> parameter_servers;  // explicit PS hosts; placed when empty
  int64_t iterations = 0;                      // to the training target at batch_size
  int priority = 0;
  // Batch-size adjustment (InGo, docs/batch-size.md): the per-worker batch the job was submitted
  // with (0: none, nothing to choose), the allowed choices, and the gradient noise scale B_noise
  // (global batch; < 0: the model's default, else the submitted global batch). The steps to the
  // target follow S(B) = S_min (1 + B_noise / B) with S(submitted) = iterations.
  int batch_size = 0;
  std::vector<int> batch_sizes;
  double noise_scale = -1;

  bool operator==(const TraceJob&) const = default;
};

// Parses a trace, detecting the format: JSON when the first non-blank character is '{' or '['
// ({"jobs": [...]} or a bare array of job objects), CSV otherwise (a header row naming the
// columns, any order: name, arrival_s, model, gradient_bytes, compute_ms, workers, hosts,
// parameter_servers, iterations, priority, batch_size, batch_sizes, noise_scale; hosts,
// parameter_servers and batch_sizes are ';'-separated; '#' starts a comment line). Model defaults
// are filled in. Every problem is appended to `problems` (path "jobs[i].field", CSV messages name
// the line); nullopt if there was any. Checks: arrival_s finite and >= 0, gradient_bytes > 0,
// compute_ms >= 0, workers >= 1 (or hosts), iterations >= 1, known model, no unknown columns or
// fields. Hosts are not checked against a topology here (the simulator does).
std::optional<std::vector<TraceJob>> ParseTrace(std::string_view text,
                                                std::vector<core::Problem>* problems);

// CSV with every column, one job per line, in the order given. ParseTrace(TraceToCsv(t)) == t
// for valid jobs whose names contain no ',' or newline.
std::string TraceToCsv(const std::vector<TraceJob>& jobs);

// Arrival process of the generator.
struct ArrivalProcess {
  enum class Kind { kPoisson, kAllAtZero };
  Kind kind = Kind::kAllAtZero;
  double rate_per_s = 0;  // kPoisson: mean arrivals per second (> 0)
};

// "poisson:RATE" (RATE > 0, jobs per second) or "all-at-zero". InvalidArgument otherwise.
absl::StatusOr<ArrivalProcess> ParseArrivalProcess(std::string_view text);

struct TraceGeneratorOptions {
  ArrivalProcess arrivals;
  int jobs = 0;
  uint64_t seed = 1;
  // Each job draws a model uniformly from `models` (empty: every built-in model) and a worker
  // count uniformly from `worker_counts`.
  std::vector<std::string> models;
  std::vector<int> worker_counts = {2, 4, 8};
  int64_t iterations = 1000;
};

// `jobs` jobs named job-0001..., arrivals sorted. InvalidArgument for jobs < 0, an unknown model,
// an empty or non-positive worker_counts, iterations < 1, or a Poisson rate <= 0.
absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const TraceGeneratorOptions& options);

// The deterministic generator used by GenerateTrace and the simulator's random placement.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

}  // namespace inac::scheduler
