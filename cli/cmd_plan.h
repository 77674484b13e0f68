// `inac plan`: offline planning -- topology file + jobs file -> the plan JSON the controller would
// compute (routing of scheduler/routing/), with the solve time measured here (the scheduler has
// no clock).
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers `inac plan --topology T --jobs J --algorithm A [--seed N] [--rounds R] [--paths K]`.
// Ring all-reduce jobs of the jobs file are not routed (listed under "not_planned"). Output:
// core::PlanToJson plus, per job, name, down_gbps, bottleneck, rate_over_lp_bound and planner
// diagnostics (docs/routing.md). Exit codes: 0 plan printed, 2 bad files/options (every problem
// on stderr), 1 solver failure.
void AddPlanCommand(CLI::App& app);

}  // namespace inac::cli
