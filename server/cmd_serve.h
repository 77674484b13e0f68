// `inac serve [--config FILE] [--db FILE] [--listen HOST:PORT] [--demo] ...`: the controller
// (docs/controller.md).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "core/job.h"
#include "server/controller.h"

namespace inac::server {

// Registers the verb on `app`. Its callback throws CLI::RuntimeError(code) for a non-zero exit.
void AddServeCommand(CLI::App& app);

// The production switch client factory: a P4RuntimeSwitchClient (embedded ina.p4 P4Info) per
// switch with a p4runtime endpoint, 2 s connect and 10 s RPC timeouts, and a gRPC channel whose
// reconnection backoff is capped at 1 s (the session has its own backoff on top).
SwitchClientFactory P4RuntimeSwitchClientFactory();

// The `--demo` sample jobs on the fat-tree k=4 fabric (hosts h<pod>_<edge>_<i>), as in
// examples/fat-tree-k4/jobs.json.
std::vector<core::JobSpec> DemoJobs();

}  // namespace inac::server
