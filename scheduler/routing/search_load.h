// The load bookkeeping of the two per-job local searches of scheduler/routing: routing_lp.cc's
// search after GRID's rounding (LocalSearch, routing_lp.h) and grid_split.cc's search over chunk
// ranges (split_plan.h). Internal to scheduler/routing.
//
// Contract:
//  - LoadDelta is the load change per resource of one move. A move touches a few paths' worth of
//    resources, so a flat vector with a linear lookup (no allocation up to its inline size)
//    instead of a tree. Iteration is in insertion order; every use is order-independent (sums per
//    resource, maxima).
//  - UnitLoads is the load per unit of the job's rate on every resource of a Network, against the
//    residual capacities the job is planned on. A resource's ratio is its load over its residual
//    capacity (0 without load, kUnbounded with load and no residual capacity); the search lowers
//    the largest ratio, the job's bottleneck. Deterministic: no randomness, ties to the first.
//
// Thread safety: one search per thread; the residual capacities must outlive the UnitLoads.
#pragma once

#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"

namespace inac::scheduler {

class LoadDelta {
 public:
  // The entry of resource `r`, created at 0 on first use.
  double& operator[](int r) {
    for (auto& e : entries_) {
      if (e.first == r) return e.second;
    }
    entries_.emplace_back(r, 0.0);
    return entries_.back().second;
  }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  absl::InlinedVector<std::pair<int, double>, 32> entries_;
};

class UnitLoads {
 public:
  // All loads 0 over `resources` resources; `residual` (per resource, not owned) has as many.
  UnitLoads(const std::vector<double>& residual, size_t resources)
      : res_(residual), unit_(resources, 0.0) {}

  double load(int r) const { return unit_[r]; }

  // Ratio of resource r at load u: 0 for u <= 1e-15, kUnbounded without residual capacity.
  double Ratio(int r, double u) const;
  // Adds x to the load of r (a load within 1e-12 of 0 becomes 0).
  void Bump(int r, double x);

  // The largest ratio over the loaded resources, and how many resources are within 1e-9 of it.
  double MaxRatio(int* count_at_max) const;

  // The bottleneck set of the current loads: false when nothing can be relieved (no load, or a
  // load on a resource without capacity). Otherwise `top` is the largest ratio, `limit` is
  // top·(1 − 1e-9) and `in_b` marks the resources at or above limit (sized to every resource).
  bool Bottleneck(double* top, double* limit, std::vector<char>* in_b) const;

  // A move improves if every resource it raises stays below `limit` and it lowers some resource
  // of the bottleneck set below `limit`. `score`: the largest ratio among raised resources.
  bool Improves(const LoadDelta& d, const std::vector<char>& in_b, double limit,
                double* score) const;

  // One stream (`x` per unit on the path `paths[*q]`) that crosses the bottleneck set, moved to
  // the path of `paths` that improves (Improves) with the least score, loads updated; false, and
  // nothing changed, when it crosses no bottleneck resource or no other path improves.
  bool MoveStream(const Network& net, const std::vector<Path>& paths, double x,
                  const std::vector<char>& in_b, double limit, int* q);

 private:
  const std::vector<double>& res_;
  std::vector<double> unit_;
  std::vector<int> touched_;  // resources ever loaded, in order of their first load
};

}  // namespace inac::scheduler
