// The driver shared by the LP-based algorithms (GRID, InArt): candidates, LP relaxation,
// randomised rounding repeated R times, local search, and the ATP floor -- the better of the
// rounded plan and single-level, single-PS ATP (RouteAllAtp: the ATP a single-level plan can
// express) is kept, so an LP-based plan is never worse than that; two-level ATP (`atp`) and ATP
// sharded over the PSs (`atp_sharded`) are not floors and can beat it. The reported
// lp_bound_gbps of a job is the optimum of its LP alone on the network (free PS shares, every
// other job absent, the floor's routes among the candidates), an upper bound on its evaluated
// rate in any single-level plan using the candidates. When the LP stops on its time limit the
// bound is the dual bound of the stopped solver (above the optimum) or absent -- never the primal
// value it had reached (JobDiagnostics::lp_bound_source).
//
// Several jobs: one joint LP when its column count is at most
// PlanningOptions::joint_lp_max_columns, maximising the smallest job rate; rounded plans are
// compared in max-min fair order of their evaluated rates. Otherwise one job at a time in
// priority order, each around the evaluated load of the jobs before it.
//
// Deterministic for PlanningInput::seed (std::mt19937_64 seeded per round).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

struct LpRoutingConfig {
  // PS shares of `job` (aligned with its parameter_servers) given the capacity left for it;
  // nullopt: shares are LP variables and the rounding uses the LP's shares.
  std::function<std::optional<std::vector<double>>(const Network&, PathCache&,
                                                   const std::vector<double>& residual, int job)>
      shares;
};

absl::StatusOr<RoutingResult> RouteWithLp(const Network& network, const LpRoutingConfig& config);

struct LpOutcome;
// JobDiagnostics::lp_bound_source of a solved one-job routing LP (LpOutcome::bound_source).
std::string BoundSource(const LpOutcome& outcome);

}  // namespace inac::scheduler
