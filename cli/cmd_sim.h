// `inac sim`: replays a job trace (a file, or generated) through the scheduler on the flow-level
// model and reports per-job JCTs and the summary (scheduler/sim/simulator.h, docs/memory.md).
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers `inac sim`. Exit codes: 0 ok, 2 bad input (every problem on stderr), 1 other failure.
void AddSimCommand(CLI::App& app);

}  // namespace inac::cli
