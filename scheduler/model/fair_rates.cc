// The fair-share solvers of scheduler/model/flow_model.h: MaxMinFairRates (progressive filling
// of virtual flows) and OnOffFairRates (the same water level over the mean loads of on/off jobs).
#include <algorithm>
#include <cmath>
#include <vector>

#include "scheduler/model/flow_model.h"

namespace inac::scheduler {
namespace {

constexpr double kRelTol = 1e-9;

// OnOffFairRates' state: the jobs frozen so far, their burst caps and the mean load they fix.
class OnOffSolver {
 public:
  OnOffSolver(const std::vector<double>& capacity, const std::vector<OnOffJob>& jobs)
      : capacity_(capacity), jobs_(jobs), n_(static_cast<int>(jobs.size())) {}

  OnOffShare Run() {
    out_.rates.assign(n_, 0.0);
    out_.active_fraction.assign(n_, 0.0);
    out_.bottleneck.assign(n_, -1);
    InitCaps();
    InitFixedLoad();
    load_.assign(capacity_.size(), 0.0);
    mark_.assign(capacity_.size(), 0);
    saturated_here_.assign(capacity_.size(), 0);
    double level = 0;
    while (active_ > 0) {
      const double t_hi = TouchActive();
      const double t = LevelBelow(level, t_hi);
      Evaluate(t);
      MarkSaturated(t, t_hi);
      const int froze = Freeze(t);
      level = t;
      if (froze == 0) break;  // cannot happen: the tightest resource or a cap freezes someone
    }
    for (int j = 0; j < n_; ++j) {
      if (!frozen_[j]) out_.rates[j] = level;
    }
    ActiveFractions();
    return std::move(out_);
  }

 private:
  // Average rate at λ (per worker stream).
  double Average(int j, double lambda) const {
    if (lambda <= 0) return 0.0;
    if (std::isinf(lambda)) {
      return jobs_[j].compute_s > 0 ? jobs_[j].gradient_gbit / jobs_[j].compute_s : kUnbounded;
    }
    return jobs_[j].gradient_gbit / (jobs_[j].compute_s + jobs_[j].gradient_gbit / lambda);
  }

  // Burst caps (the job's limit, or what its tightest resource gives it alone); jobs that
  // nothing limits or that get nothing are frozen at once.
  void InitCaps() {
    frozen_.assign(n_, 0);
    cap_.assign(n_, kUnbounded);
    cap_resource_.assign(n_, -1);
    for (int j = 0; j < n_; ++j) {
      cap_[j] = jobs_[j].flow.limit;
      for (const auto& [r, c] : jobs_[j].flow.coefficients) {
        if (c <= 0) continue;
        const double alone = std::max(0.0, capacity_[r]) / c;
        if (alone < cap_[j]) {
          cap_[j] = alone;
          cap_resource_[j] = r;
        }
      }
      if (std::isinf(cap_[j])) {
        out_.rates[j] = kUnbounded;
        frozen_[j] = 1;
      } else if (cap_[j] <= 0) {
        frozen_[j] = 1;
        out_.bottleneck[j] = cap_resource_[j];
      } else {
        ++active_;
      }
    }
  }

  // Mean load of the jobs frozen by InitCaps.
  void InitFixedLoad() {
    fixed_load_.assign(capacity_.size(), 0.0);
    for (int j = 0; j < n_; ++j) {
      if (!frozen_[j] || std::isinf(out_.rates[j])) continue;
      for (const auto& [r, c] : jobs_[j].flow.coefficients)
        fixed_load_[r] += c * Average(j, out_.rates[j]);
    }
  }

  // Collects in touched_ the resources the unfrozen jobs cross; returns the least of their caps.
  double TouchActive() {
    touched_.clear();
    double t_hi = kUnbounded;
    for (int j = 0; j < n_; ++j) {
      if (frozen_[j]) continue;
      t_hi = std::min(t_hi, cap_[j]);
      for (const auto& [r, c] : jobs_[j].flow.coefficients) {
        if (!mark_[r]) {
          mark_[r] = 1;
          touched_.push_back(r);
        }
      }
    }
    for (int r : touched_) mark_[r] = 0;
    return t_hi;
  }

  // Mean loads at level t of the resources the unfrozen jobs cross; true when one exceeds its
  // capacity by more than the tolerance.
  bool Evaluate(double t) {
    for (int r : touched_) load_[r] = fixed_load_[r];
    bool over = false;
    for (int j = 0; j < n_; ++j) {
      if (frozen_[j]) continue;
      const double x = Average(j, t);
      for (const auto& [r, c] : jobs_[j].flow.coefficients) load_[r] += c * x;
    }
    for (int r : touched_) {
      if (load_[r] > capacity_[r] * (1 + kRelTol) + 1e-12) over = true;
    }
    return over;
  }

  // The highest level in [level, t_hi] that overloads nothing (bisection when t_hi does).
  double LevelBelow(double level, double t_hi) {
    double t = t_hi;
    if (Evaluate(t_hi)) {
      double lo = level;
      double hi = t_hi;
      for (int it = 0; it < 64 && hi - lo > kRelTol * std::max(1e-9, hi); ++it) {
        const double mid = 0.5 * (lo + hi);
        if (Evaluate(mid)) {
          hi = mid;
        } else {
          lo = mid;
        }
      }
      t = lo;
    }
    return t;
  }

  // Saturated resources at t: within the tolerance of capacity (the tightest one at least).
  void MarkSaturated(double t, double t_hi) {
    for (int r : touched_) saturated_here_[r] = 0;
    int tightest = -1;
    double tightest_ratio = -1;
    for (int r : touched_) {
      const double ratio = capacity_[r] > 0 ? load_[r] / capacity_[r] : kUnbounded;
      if (ratio > tightest_ratio) {
        tightest_ratio = ratio;
        tightest = r;
      }
      if (load_[r] >= capacity_[r] * (1 - 1e-7)) saturated_here_[r] = 1;
    }
    const bool at_cap = t >= t_hi * (1 - kRelTol);
    if (!at_cap && tightest >= 0) saturated_here_[tightest] = 1;
  }

  // Freezes the jobs on a saturated resource or at their cap; returns how many.
  int Freeze(double t) {
    int froze = 0;
    for (int j = 0; j < n_; ++j) {
      if (frozen_[j]) continue;
      int via = -1;
      for (const auto& [r, c] : jobs_[j].flow.coefficients) {
        if (saturated_here_[r]) {
          via = r;
          break;
        }
      }
      const bool capped = cap_[j] <= t * (1 + kRelTol);
      if (via < 0 && !capped) continue;
      frozen_[j] = 1;
      --active_;
      ++froze;
      out_.rates[j] = capped ? cap_[j] : t;
      out_.bottleneck[j] = via >= 0 ? via : cap_resource_[j];
      const double x = Average(j, out_.rates[j]);
      for (const auto& [r, c] : jobs_[j].flow.coefficients) fixed_load_[r] += c * x;
    }
    return froze;
  }

  void ActiveFractions() {
    for (int j = 0; j < n_; ++j) {
      const double lambda = out_.rates[j];
      if (std::isinf(lambda)) {
        out_.active_fraction[j] = 0;
      } else if (lambda <= 0) {
        out_.active_fraction[j] = 1;
      } else {
        const double comm = jobs_[j].gradient_gbit / lambda;
        out_.active_fraction[j] = comm / (jobs_[j].compute_s + comm);
      }
    }
  }

  const std::vector<double>& capacity_;
  const std::vector<OnOffJob>& jobs_;
  const int n_;
  OnOffShare out_;
  std::vector<char> frozen_;
  std::vector<double> cap_;  // burst cap
  std::vector<int> cap_resource_;
  int active_ = 0;
  std::vector<double> fixed_load_;  // mean load of frozen jobs
  std::vector<double> load_;
  std::vector<int> touched_;
  std::vector<char> mark_;
  std::vector<char> saturated_here_;
};

// MaxMinFairRates' state: progressive filling, one step per loop.
class MaxMinSolver {
 public:
  MaxMinSolver(const std::vector<double>& capacity, const std::vector<VirtualFlow>& flows)
      : capacity_(capacity), flows_(flows), n_(static_cast<int>(flows.size())) {}

  FairShare Run() {
    out_.rates.assign(n_, 0.0);
    out_.bottleneck.assign(n_, -1);
    frozen_.assign(n_, 0);
    remaining_ = capacity_;
    sum_.assign(capacity_.size(), 0.0);
    saturated_.assign(capacity_.size(), 0);
    int active = 0;
    for (int f = 0; f < n_; ++f) {
      if (flows_[f].coefficients.empty() && std::isinf(flows_[f].limit)) {
        out_.rates[f] = kUnbounded;
        frozen_[f] = 1;
      } else if (flows_[f].limit <= 0) {
        frozen_[f] = 1;
      } else {
        ++active;
      }
    }
    while (active > 0) {
      int argmin = -1;
      double delta = Step(&argmin);
      if (std::isinf(delta)) break;  // cannot happen: every active flow has a coefficient or limit
      delta = std::max(0.0, delta);
      Raise(delta, argmin);
      int froze = FreezeSaturated();
      for (int r : touched_) sum_[r] = 0;
      if (froze == 0) {
        // Numerical corner: freeze the flows on the tightest resource so the loop terminates.
        if (argmin < 0) break;
        froze = FreezeOn(argmin);
        if (froze == 0) break;
      }
      active -= froze;
    }
    return std::move(out_);
  }

 private:
  // Sums the active flows' coefficients per resource (in touched_) and returns the largest
  // common increase, with in `argmin` the resource that sets it (-1: a private limit).
  double Step(int* argmin) {
    touched_.clear();
    for (int f = 0; f < n_; ++f) {
      if (frozen_[f]) continue;
      for (const auto& [r, c] : flows_[f].coefficients) {
        if (sum_[r] == 0) touched_.push_back(r);
        sum_[r] += c;
      }
    }
    double delta = kUnbounded;
    for (int r : touched_) {
      double d = std::max(0.0, remaining_[r]) / sum_[r];
      if (d < delta) {
        delta = d;
        *argmin = r;
      }
    }
    for (int f = 0; f < n_; ++f) {
      if (!frozen_[f]) delta = std::min(delta, flows_[f].limit - out_.rates[f]);
    }
    return delta;
  }

  void Raise(double delta, int argmin) {
    for (int f = 0; f < n_; ++f) {
      if (!frozen_[f]) out_.rates[f] += delta;
    }
    for (int r : touched_) {
      const double before = remaining_[r];
      remaining_[r] -= delta * sum_[r];
      // The resource that set the step is full (no rounding residue left). Compared with what
      // is left *before* the step: a step set by a private limit leaves the tightest resource
      // part-full, and it must not freeze the flows crossing it.
      if (r == argmin && delta * sum_[r] >= before - 1e-12) remaining_[r] = 0;
      if (remaining_[r] <= kRelTol * std::max(1.0, capacity_[r])) saturated_[r] = 1;
    }
  }

  // Freezes the flows at their limit or on a saturated resource; returns how many.
  int FreezeSaturated() {
    int froze = 0;
    for (int f = 0; f < n_; ++f) {
      if (frozen_[f]) continue;
      if (out_.rates[f] >= flows_[f].limit * (1 - kRelTol)) {
        frozen_[f] = 1;
        ++froze;
        continue;
      }
      for (const auto& [r, c] : flows_[f].coefficients) {
        if (saturated_[r]) {
          frozen_[f] = 1;
          out_.bottleneck[f] = r;
          ++froze;
          break;
        }
      }
    }
    return froze;
  }

  // Saturates `argmin` and freezes the flows crossing it; returns how many.
  int FreezeOn(int argmin) {
    int froze = 0;
    saturated_[argmin] = 1;
    for (int f = 0; f < n_; ++f) {
      if (frozen_[f]) continue;
      for (const auto& [r, c] : flows_[f].coefficients) {
        if (r == argmin) {
          frozen_[f] = 1;
          out_.bottleneck[f] = r;
          ++froze;
          break;
        }
      }
    }
    return froze;
  }

  const std::vector<double>& capacity_;
  const std::vector<VirtualFlow>& flows_;
  const int n_;
  FairShare out_;
  std::vector<char> frozen_;
  std::vector<double> remaining_;
  std::vector<double> sum_;
  std::vector<char> saturated_;
  std::vector<int> touched_;
};

}  // namespace

OnOffShare OnOffFairRates(const std::vector<double>& capacity, const std::vector<OnOffJob>& jobs) {
  return OnOffSolver(capacity, jobs).Run();
}

FairShare MaxMinFairRates(const std::vector<double>& capacity,
                          const std::vector<VirtualFlow>& flows) {
  return MaxMinSolver(capacity, flows).Run();
}

}  // namespace inac::scheduler
