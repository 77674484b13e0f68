// `inac switch --listen HOST:PORT --device-id N [--p4info FILE] [--bmv2-deviations]`: runs an
// emulated INA switch (southbound/emulator/emulated_switch.h), a P4Runtime server, until SIGTERM
// or SIGINT. Prints `listening on HOST:PORT` on stdout once serving (port 0 picks a free port,
// and the line names it), then exits 0 after a clean shutdown. Exit 2 for bad arguments or an
// unreadable / invalid P4Info file, 1 when the address cannot be bound.
#pragma once

#include <CLI/CLI.hpp>

namespace inac::cli {

// Registers the verb on `app`. Its callback throws CLI::RuntimeError(code) for a non-zero exit.
void AddSwitchCommand(CLI::App& app);

}  // namespace inac::cli
