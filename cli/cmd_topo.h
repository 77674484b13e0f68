// `inac topo generate fat-tree|leaf-spine ...` and `inac topo validate FILE`.
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers the verb on `app`. Its callbacks throw CLI::RuntimeError(code) for a non-zero exit.
void AddTopoCommand(CLI::App& app);

}  // namespace inac::cli
