// SplitPlan: the realisation of grid-split's LP for one job (scheduler/routing/grid_split.h,
// items 2 and 3): chunk ranges per shard from the LP's streams (strip or circle layout), each
// worker's aggregation node and path per range, path balancing and the local search; then the
// routed job. Internal to scheduler/routing: grid_split.cc is its one user.
//
// Contract: deterministic for its inputs (no randomness; ties to the first). The Network, the
// residual capacities and the candidates are not owned and must outlive the plan.
//
// Thread safety: one thread per plan.
#pragma once

#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/routing/routing_lp.h"
#include "scheduler/routing/search_load.h"

namespace inac::scheduler {

// A split plan of one job under construction: per shard its ranges, per (pair, range) the
// (option, path), per (switch, PS) its stream path; with the per-unit resource loads kept
// incrementally for the path balancing and the local search.
class SplitPlan {
 public:
  SplitPlan(const Network& net, const std::vector<double>& residual, const JobCandidates& c);

  // Item 2 of scheduler/routing/grid_split.h: ranges from the LP's streams, then each worker's
  // ranges.
  // `strip`: the strip layout, else the circle layout (see grid_split.h).
  void Realise(const RoutingLp::JobColumns& cols, const std::vector<double>& values, double lambda,
               bool strip, int max_ranges);

  // Every flow, then every stream, on its balanced path: the one whose arcs' convex cost
  // Σ utilisation^4 rises least (a smooth stand-in for the largest utilisation); four passes.
  void BalancePaths();

  // Increase of Σ_e (load_e / residual_e)^4 over the path's arcs when `x` is added.
  double PathCost(const Path& path, double x) const;

  // Item 3 of grid_split.h. Returns the number of moves made.
  int LocalSearch(int max_moves);

  RoutedJob ToRoutedJob() const;

 private:
  int BestLpPath(const RoutingLp::JobColumns& cols, const std::vector<double>& values, int i,
                 int o) const;
  double Length(int si, int r) const { return cuts_[si][r + 1] - cuts_[si][r]; }
  double Amount(int i, int r) const;
  int PsIndexOf(int ps_node) const;
  // The stream of (switch, PS node): Σ lengths of the ranges with at least one input, × share.
  double StreamAmount(const std::pair<int, int>& key) const;
  int StreamPath(const std::pair<int, int>& key);
  // The load change of putting (pair i, range r) on (o, p) with `sign`, into `d`; `fan` is the
  // count of inputs that (switch, PS, range) would have before the change.
  void FlowDelta(int i, int r, int o, int p, int sign, LoadDelta* d);
  int FanIn(int agg, int s, int r) const;
  void Apply(int i, int r, int sign);

  bool Step();

  // A compound move for a bottleneck at a PS: every input of one (switch a, PS s, range r) moves
  // to other switches already aggregating range r for s (within the fan-in), so a's partial sum
  // of r no longer reaches s. A single move cannot find it: the PS's load falls only when the last
  // input leaves. Streams with the fewest inputs are tried first; the first that relieves the
  // bottleneck without raising any resource to it is made. Deterministic.
  bool CloseStream(const std::vector<char>& in_b, double limit);

  const Network& net_;
  const JobCandidates& c_;
  UnitLoads loads_;
  std::vector<std::vector<double>> cuts_;                 // per PS index
  std::vector<std::vector<std::pair<int, int>>> assign_;  // per pair, per range
  std::map<std::tuple<int, int, int>, int> fan_in_;       // (switch, PS node, range) -> inputs
  std::map<std::pair<int, int>, int> stream_path_;        // (switch, PS node) -> path
};

}  // namespace inac::scheduler
