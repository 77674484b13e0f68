// `inac db check --db FILE` and `inac db backup --db FILE --to FILE`: offline maintenance of the
// controller database (storage/maintenance.h). Both are safe against a running controller.
//
// Exit codes: 0 ok; 2 bad input (file missing, not a SQLite/INAC database, backup target exists);
// 1 the check found problems (integrity or a schema newer than this binary) or another failure.
#pragma once

#include <CLI/CLI.hpp>

namespace inac::server {

void AddDbCommand(CLI::App& app);

}  // namespace inac::server
