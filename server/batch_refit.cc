#include "server/batch_refit.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "nlohmann/json.hpp"

namespace inac::server {

absl::StatusOr<bool> BatchRefit::Add(const core::Job& job, int batch, double grad_sqr_local,
                                     double grad_sqr_global) {
  for (const auto& [name, v] : {std::pair{"grad_sqr_local", grad_sqr_local},
                                std::pair{"grad_sqr_global", grad_sqr_global}}) {
    if (!std::isfinite(v) || v < 0) {
      return core::WithField(
          absl::InvalidArgumentError(absl::StrCat(name, ": must be a finite number >= 0")), name);
    }
  }
  const int workers = static_cast<int>(job.spec.workers.size());
  if (workers < 2 || batch <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id, ": the noise scale needs at least two workers (local vs aggregated)"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, added] = estimators_.try_emplace(job.id, smoothing_);
  it->second.Add(grad_sqr_local, grad_sqr_global, batch, batch * workers);
  const std::optional<double> estimate = it->second.NoiseScale();
  if (!estimate) return false;
  auto p = published_.find(job.id);
  const double reference = p != published_.end() ? p->second : job.spec.noise_scale.value_or(-1.0);
  if (reference > 0 && std::abs(*estimate - reference) <= publish_threshold_ * reference) {
    return false;
  }
  published_[job.id] = *estimate;
  return true;
}

void BatchRefit::Apply(std::vector<core::Job>* jobs) const {
  absl::MutexLock lock(&mu_);
  for (core::Job& job : *jobs) {
    auto it = published_.find(job.id);
    if (it == published_.end()) continue;
    bool choices = false;
    for (int b : job.spec.batch_sizes) choices = choices || b != job.spec.batch_size;
    if (choices) job.spec.noise_scale = it->second;
  }
}

std::optional<double> BatchRefit::Published(core::JobId id) const {
  absl::MutexLock lock(&mu_);
  auto it = published_.find(id);
  if (it == published_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<core::JobId, std::string>> BatchRefit::NoteBatchChanges(
    const core::Plan* previous, const core::Plan& plan, int64_t now_ms) {
  std::vector<std::pair<core::JobId, std::string>> out;
  if (previous == nullptr) return out;
  absl::MutexLock lock(&mu_);
  for (const core::JobPlan& jp : plan.jobs) {
    const core::JobPlan* before = previous->FindJob(jp.job_id);
    if (before == nullptr || before->batch_size == jp.batch_size) continue;
    changed_ms_[jp.job_id] = now_ms;
    out.emplace_back(jp.job_id, absl::StrCat("batch size ", before->batch_size, " -> ",
                                             jp.batch_size, " per worker"));
  }
  return out;
}

std::map<core::JobId, int64_t> BatchRefit::ChangedMs() const {
  absl::MutexLock lock(&mu_);
  return changed_ms_;
}

void BatchRefit::Restore(const std::vector<core::Event>& events) {
  absl::MutexLock lock(&mu_);
  for (const core::Event& e : events) {
    if (!e.job_id) continue;
    if (e.kind == "job_batch_size") {
      changed_ms_[*e.job_id] = e.time_ms;
    } else if (e.kind == "noise_scale_refit") {
      const auto data = nlohmann::json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
      if (!data.is_object() || !data.contains("noise_scale")) continue;
      const nlohmann::json& v = data["noise_scale"];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) continue;
      published_[*e.job_id] = v.get<double>();
    }
  }
}

}  // namespace inac::server
