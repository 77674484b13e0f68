#include "scheduler/batch/noise_scale.h"

#include <cmath>

namespace inac::scheduler {

bool NoiseScaleEstimator::Add(double grad_sqr_local, double grad_sqr_global, int local_batch,
                              int global_batch) {
  if (!std::isfinite(grad_sqr_local) || !std::isfinite(grad_sqr_global) || grad_sqr_local < 0 ||
      grad_sqr_global < 0 || local_batch <= 0 || global_batch <= local_batch) {
    return false;
  }
  const double b = local_batch;
  const double B = global_batch;
  const double var = (grad_sqr_local - grad_sqr_global) * b * B / (B - b);
  const double sqr = (B * grad_sqr_global - b * grad_sqr_local) / (B - b);
  sqr_ = smoothing_ * sqr_ + (1 - smoothing_) * sqr;
  var_ = smoothing_ * var_ + (1 - smoothing_) * var;
  weight_ = smoothing_ * weight_ + (1 - smoothing_);
  ++samples_;
  return true;
}

double NoiseScaleEstimator::grad_sqr() const { return weight_ > 0 ? sqr_ / weight_ : 0; }
double NoiseScaleEstimator::grad_var() const { return weight_ > 0 ? var_ / weight_ : 0; }

std::optional<double> NoiseScaleEstimator::NoiseScale() const {
  if (samples_ == 0 || !(sqr_ > 0)) return std::nullopt;
  // The bias corrections of numerator and denominator cancel.
  const double scale = var_ / sqr_;
  if (!std::isfinite(scale)) return std::nullopt;
  return scale < 0 ? 0.0 : scale;
}

bool ShouldChangeBatch(const BatchSwitchRule& rule, double current_completion_ms,
                       double candidate_completion_ms, int64_t last_change_ms, int64_t now_ms) {
  if (!(candidate_completion_ms < current_completion_ms * (1 - rule.hysteresis))) return false;
  if (last_change_ms >= 0 && now_ms - last_change_ms < rule.min_interval_ms) return false;
  return true;
}

}  // namespace inac::scheduler
