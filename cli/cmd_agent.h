// `inac worker` and `inac ps`: the host agents of the data plane (agent/, docs/agents.md).
//
//   inac worker --job ID --worker HOST [--server URL] [--token T] [--netns NAME]
//               [--config-file F] [--size BYTES | --input FILE [--float] [--scale-bits B]]
//               [--iterations N] [--seed S] [--window W] [--timeout-ms T] [--check]
//               [--output FILE] [--json] [--bind ADDR] [--port P] [--drop-percent X]
//   inac ps --job ID --ps HOST [--server URL] [--token T] [--netns NAME] [--config-file F]
//           [--size BYTES] [--iterations N] [--duration S] [--linger-ms L] [--no-progress]
//           [--unicast-results] [--window W] [--json] [--bind ADDR] [--port P] [--drop-percent X]
//
// The job configuration comes from GET /api/v1/jobs/{id}/config (or --config-file); the data
// plane runs in its own thread, inside network namespace NAME with --netns, while the REST calls
// stay in the caller's namespace. The PS reports POST /api/v1/jobs/{id}/progress at the end.
// Exit codes: 0 ok; 1 failure (controller unreachable, bind failed, no result in time, --check
// mismatch, interrupted); 2 bad input (options, config, not a member).
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers `worker` and `ps` on `app`. Their callbacks throw CLI::RuntimeError(code) for a
// non-zero exit.
void AddAgentCommands(CLI::App& app);

}  // namespace inac::cli
