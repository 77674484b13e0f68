#include "cli/cmd_topo.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/cmd_client.h"
#include "core/generators.h"
#include "core/json.h"

namespace inac::cli {

namespace {

struct GenerateArgs {
  int k = 4;
  int hosts_per_edge = -1;
  int leaves = 4;
  int spines = 2;
  int hosts_per_leaf = 4;
  int hosts = 5;  // star
  std::string ina = "tor";
  uint64_t seed = 1;
  double link_gbps = 100;
  std::string processing = "400";
  int64_t aggregators = 20000;
  int p4runtime_base_port = 0;
  std::string target = "emulator";
  bool compact = false;
  std::string out;  // --out FILE: write there instead of stdout
};

void AddCommonOptions(CLI::App* cmd, GenerateArgs* a) {
  cmd->add_option("--ina", a->ina, "INA-capable switches: tor|all|none|random:FRACTION")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed for random placement and capacities")
      ->capture_default_str();
  cmd->add_option("--link-gbps", a->link_gbps, "Capacity of every link")->capture_default_str();
  cmd->add_option("--processing-gbps", a->processing,
                  "INA processing capacity: G or lo:hi (uniform)")
      ->capture_default_str();
  cmd->add_option("--aggregators", a->aggregators, "Aggregators per INA switch")
      ->capture_default_str();
  cmd->add_option("--p4runtime-base-port", a->p4runtime_base_port,
                  "Give switch i the endpoint 127.0.0.1:(PORT+i), device id i+1")
      ->capture_default_str();
  cmd->add_option("--target", a->target,
                  "Target kind of those endpoints: emulator (inac switch) | bmv2")
      ->capture_default_str();
  cmd->add_flag("--compact", a->compact, "Print JSON on one line");
  cmd->add_option("--out", a->out,
                  "Write the JSON to this file and print a one-line summary instead (large "
                  "fabrics print tens of KB)");
}

absl::StatusOr<core::GeneratorOptions> Options(const GenerateArgs& a) {
  core::GeneratorOptions o;
  auto placement = core::ParseInaPlacement(a.ina);
  if (!placement.ok()) return placement.status();
  o.ina = *placement;
  o.seed = a.seed;
  o.link_gbps = a.link_gbps;
  if (auto s = core::ParseProcessingRange(a.processing, &o); !s.ok()) return s;
  o.aggregators = a.aggregators;
  o.p4runtime_base_port = a.p4runtime_base_port;
  auto target = core::ParseTargetKind(a.target);
  if (!target.has_value() || *target == core::TargetKind::kTofino) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target: must be emulator or bmv2, got \"", a.target, "\""));
  }
  o.target = *target;
  return o;
}

void Emit(const absl::StatusOr<core::Topology>& t, const GenerateArgs& a) {
  if (!t.ok()) {
    std::cerr << "inac: " << t.status().message() << "\n";
    throw CLI::RuntimeError(kExitBadInput);
  }
  const std::string json = core::TopologyToJson(*t).dump(a.compact ? -1 : 2) + "\n";
  if (a.out.empty()) {
    std::cout << json;
    return;
  }
  std::ofstream file(a.out, std::ios::binary | std::ios::trunc);
  file << json;
  file.close();
  if (!file) {
    std::cerr << "inac: cannot write " << a.out << ": " << std::strerror(errno) << "\n";
    throw CLI::RuntimeError(kExitFailure);
  }
  std::cout << a.out << ": " << t->switches.size() << " switches, " << t->hosts.size() << " hosts, "
            << t->links.size() << " links\n";
}

}  // namespace

void AddTopoCommand(CLI::App& app) {
  CLI::App* topo = app.add_subcommand(
      "topo", "Generate and validate topology files; apply or show a running controller's");
  topo->require_subcommand(1);
  CLI::App* gen = topo->add_subcommand("generate", "Print a generated topology as JSON");
  gen->require_subcommand(1);
  auto args = std::make_shared<GenerateArgs>();

  CLI::App* fat =
      gen->add_subcommand("fat-tree", "Fat-tree: k²/4 core, k²/2 aggregation, k²/2 edge");
  fat->add_option("--k", args->k, "Even arity k")->required();
  fat->add_option("--hosts-per-edge", args->hosts_per_edge, "Hosts per edge switch (default k/2)");
  AddCommonOptions(fat, args.get());
  fat->callback([args] {
    auto o = Options(*args);
    if (!o.ok()) return Emit(o.status(), *args);
    Emit(core::GenerateFatTree(args->k, *o, args->hosts_per_edge), *args);
  });

  CLI::App* ls = gen->add_subcommand("leaf-spine", "Leaf-spine: every leaf linked to every spine");
  ls->add_option("--leaves", args->leaves, "Leaf switches")->required();
  ls->add_option("--spines", args->spines, "Spine switches")->required();
  ls->add_option("--hosts-per-leaf", args->hosts_per_leaf, "Hosts per leaf")->required();
  AddCommonOptions(ls, args.get());
  ls->callback([args] {
    auto o = Options(*args);
    if (!o.ok()) return Emit(o.status(), *args);
    Emit(core::GenerateLeafSpine(args->leaves, args->spines, args->hosts_per_leaf, *o), *args);
  });

  CLI::App* star =
      gen->add_subcommand("star", "Star: one switch s0 and its hosts h0..h<N-1> (the lab's first)");
  star->add_option("--hosts", args->hosts, "Hosts on the switch")->required();
  AddCommonOptions(star, args.get());
  star->callback([args] {
    auto o = Options(*args);
    if (!o.ok()) return Emit(o.status(), *args);
    Emit(core::GenerateStar(args->hosts, *o), *args);
  });

  CLI::App* val =
      topo->add_subcommand("validate", "Check a topology file; every problem on stderr");
  auto file = std::make_shared<std::string>();
  val->add_option("file", *file, "Topology JSON file")->required();
  val->callback([file] {
    auto t = LoadTopologyFile(*file);
    if (!t) throw CLI::RuntimeError(kExitBadInput);
    int ina = 0;
    for (const auto& s : t->switches) ina += s.ina.capable ? 1 : 0;
    int down = 0;
    for (const auto& l : t->links) down += l.status == core::LinkStatus::kDown ? 1 : 0;
    std::cout << *file << ": ok: " << t->switches.size() << " switches (" << ina
              << " INA-capable), " << t->hosts.size() << " hosts, " << t->links.size() << " links ("
              << down << " down)\n";
  });
  AddTopoClientCommands(topo);
}

}  // namespace inac::cli
