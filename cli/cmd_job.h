// `inac job validate FILE [--topology T]`.
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers the verb on `app`. Its callbacks throw CLI::RuntimeError(code) for a non-zero exit.
void AddJobCommand(CLI::App& app);

}  // namespace inac::cli
