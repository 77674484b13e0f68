// `inac serve [--config FILE] [--db FILE] [--listen HOST:PORT] [--demo] ...`: the controller
// (docs/controller.md).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "core/job.h"

namespace inac::cli {

// Registers the verb on `app`. Its callback throws CLI::RuntimeError(code) for a non-zero exit.
void AddServeCommand(CLI::App& app);

// The `--demo` sample jobs on the fat-tree k=4 fabric (hosts h<pod>_<edge>_<i>), as in
// examples/fat-tree-k4/jobs.json.
std::vector<core::JobSpec> DemoJobs();

}  // namespace inac::cli
