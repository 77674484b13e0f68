// `inac plan`: offline planning -- topology file + jobs file -> the plan JSON the controller would
// compute (routing of scheduler/routing/), with the solve time measured here (the scheduler has
// no clock).
#pragma once

#include <CLI/CLI.hpp>

namespace inac::server {

// Registers `inac plan --topology T --jobs J --algorithm A [--seed N] [--rounds R] [--paths K]`.
// Exit codes: 0 plan printed, 2 bad files/options (every problem on stderr), 1 solver failure.
void AddPlanCommand(CLI::App& app);

}  // namespace inac::server
