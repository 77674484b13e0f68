#include "cli/cmd_job.h"

#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/cmd_client.h"
#include "core/files.h"
#include "core/json.h"

namespace inac::cli {

void AddJobCommand(CLI::App& app) {
  CLI::App* job = app.add_subcommand(
      "job", "Validate job files; submit, list, show and cancel jobs on a running controller");
  job->require_subcommand(1);
  CLI::App* val = job->add_subcommand("validate", "Check a job file ({\"jobs\": [...]})");
  struct Args {
    std::string file;
    std::string topology;
  };
  auto args = std::make_shared<Args>();
  val->add_option("file", args->file, "Job JSON file")->required();
  val->add_option("--topology", args->topology,
                  "Also check that workers and parameter servers are connected hosts of it");
  val->callback([args] {
    std::optional<core::Topology> topology;
    if (!args->topology.empty()) {
      topology = LoadTopologyFile(args->topology);
      if (!topology) throw CLI::RuntimeError(kExitBadInput);
    }
    auto text = core::ReadFile(args->file);
    if (!text.ok()) {
      std::cerr << "inac: " << text.status().message() << "\n";
      throw CLI::RuntimeError(kExitBadInput);
    }
    std::vector<core::Problem> problems;
    auto specs = core::ParseJobsFile(*text, topology ? &*topology : nullptr, &problems);
    if (!specs) {
      PrintProblems(args->file, problems);
      throw CLI::RuntimeError(kExitBadInput);
    }
    int64_t workers = 0;
    for (const auto& s : *specs) workers += static_cast<int64_t>(s.workers.size());
    std::cout << args->file << ": ok: " << specs->size() << " job(s), " << workers << " workers"
              << (topology ? ", all hosts connected" : "") << "\n";
  });
  AddJobClientCommands(job);
}

}  // namespace inac::cli
