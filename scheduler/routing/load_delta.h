// LoadDelta: the load change per resource of one local-search move (routing_lp.cc's search after
// GRID's rounding, grid_split.cc's search over chunk ranges). A move touches a few paths' worth of
// resources, so a flat vector with a linear lookup (no allocation up to its inline size) instead
// of a tree. Iteration is in insertion order; every use is order-independent (sums per resource,
// maxima). Internal to scheduler/routing.
#pragma once

#include <utility>

#include "absl/container/inlined_vector.h"

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

}  // namespace inac::scheduler
