#include "cli/cli.h"

#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/cmd_agent.h"
#include "cli/cmd_db.h"
#include "cli/cmd_job.h"
#include "cli/cmd_lab.h"
#include "cli/cmd_plan.h"
#include "cli/cmd_serve.h"
#include "cli/cmd_sim.h"
#include "cli/cmd_switch.h"
#include "cli/cmd_topo.h"

namespace inac::cli {

int Main(int argc, char** argv) {
  CLI::App app{"inac: SDN controller for in-network aggregation of distributed training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "inac 0.1.0");
  // Verbs: (one include above and one Add*Command call here per verb)
  AddTopoCommand(app);
  AddJobCommand(app);
  AddPlanCommand(app);
  AddServeCommand(app);
  AddDbCommand(app);
  AddSimCommand(app);
  AddSwitchCommand(app);
  AddLabCommand(app);
  AddAgentCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    // CLI11's own codes for usage errors are folded into kExitBadInput; RuntimeError carries the
    // verb's exit code unchanged.
    if (e.get_name() == "RuntimeError" || code == 0) return code;
    return kExitBadInput;
  }
  return kExitOk;
}

}  // namespace inac::cli
