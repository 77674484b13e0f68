// Online refit of the gradient noise scale and the rule for changing a running job's batch size
// (docs/batch-size.md "Online refit").
//
// NoiseScaleEstimator is the estimator of McCandlish et al. 2018 (arXiv 1812.06162, appendix A)
// as Pollux uses it (Qiao et al., OSDI 2021; adaptdl's goodput.py): with per-worker batch b and
// global batch B = n b (n >= 2),
//   E|g_i|^2 = |G|^2 + tr(S)/b   (a worker's local gradient)
//   E|g_bar|^2 = |G|^2 + tr(S)/B (the aggregated gradient)
// so  tr(S) = (|g_i|^2 - |g_bar|^2) · b B / (B - b)  and  |G|^2 = (B |g_bar|^2 - b |g_i|^2) / (B -
// b), and B_noise = tr(S) / |G|^2. Both are smoothed by an exponential moving average with bias
// correction (as adaptdl does) before dividing; the single-sample estimates are unbiased but very
// noisy, the ratio of the averages converges.
//
// BatchSwitchRule is the hysteresis: a new batch replaces the current one only when its predicted
// completion is better by more than `hysteresis` (relative) and at least `min_interval_ms` has
// passed since the last change.
//
// Pure and deterministic; the caller passes the clock (now_ms). Not thread-safe (a value type).
#pragma once

#include <cstdint>
#include <optional>

namespace inac::scheduler {

class NoiseScaleEstimator {
 public:
  // smoothing: weight of the history in the EMA, in [0, 1) (adaptdl uses 0.9 per report).
  explicit NoiseScaleEstimator(double smoothing = 0.9) : smoothing_(smoothing) {}

  // Adds one report. False (and nothing changes) when the sample is unusable: a statistic not
  // finite or negative, local_batch <= 0, or global_batch <= local_batch (one worker).
  bool Add(double grad_sqr_local, double grad_sqr_global, int local_batch, int global_batch);

  // tr(S) / |G|^2 of the smoothed values; nullopt before the first sample or while the smoothed
  // |G|^2 is not positive (noise dominates every sample so far).
  std::optional<double> NoiseScale() const;
  int64_t samples() const { return samples_; }
  // The smoothed (bias-corrected) |G|^2 and tr(S); 0 before the first sample.
  double grad_sqr() const;
  double grad_var() const;

  // The EMA state, to persist and restore (raw accumulators, not bias-corrected).
  struct State {
    double sqr = 0;
    double var = 0;
    double weight = 0;  // 1 - smoothing^samples
    int64_t samples = 0;
  };
  State state() const { return {sqr_, var_, weight_, samples_}; }
  void Restore(const State& s) {
    sqr_ = s.sqr;
    var_ = s.var;
    weight_ = s.weight;
    samples_ = s.samples;
  }

 private:
  double smoothing_;
  double sqr_ = 0;
  double var_ = 0;
  double weight_ = 0;
  int64_t samples_ = 0;
};

struct BatchSwitchRule {
  double hysteresis = 0.05;         // relative improvement needed, e.g. 0.05 = 5 %
  int64_t min_interval_ms = 60000;  // between two changes of one job's batch
};

// True when a job now at `current_completion_ms` (predicted, current batch) should move to a
// batch predicted at `candidate_completion_ms`: candidate < current · (1 - hysteresis) and
// (no change yet: last_change_ms < 0, or now_ms - last_change_ms >= min_interval_ms).
bool ShouldChangeBatch(const BatchSwitchRule& rule, double current_completion_ms,
                       double candidate_completion_ms, int64_t last_change_ms, int64_t now_ms);

}  // namespace inac::scheduler
