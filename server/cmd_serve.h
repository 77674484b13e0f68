// `inac serve [--config FILE] [--db FILE] [--listen HOST:PORT] [--demo] ...`: the controller.
#pragma once

#include <CLI/CLI.hpp>

namespace inac::server {

// Registers the verb on `app`. Its callback throws CLI::RuntimeError(code) for a non-zero exit.
void AddServeCommand(CLI::App& app);

}  // namespace inac::server
