#include "cli/cmd_lab.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/cli.h"
#include "cli/cli_util.h"
#include "cli/config.h"
#include "core/files.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/topology.h"
#include "lab/lab.h"
#include "northbound/api_client.h"
#include "scheduler/routing/routing_algorithm.h"
#include "southbound/switch_session.h"

namespace inac::cli {
namespace {

using namespace lab;  // NOLINT: the verbs are written in the lab's terms
using lab::Clock;

int LabUp(const UpArgs& args) {
  auto input = LoadLabTopology(args.topology);
  if (!input) return kExitBadInput;
  Lab lab;
  lab.dir = fs::absolute(args.dir).lexically_normal().string();
  while (lab.dir.size() > 1 && lab.dir.back() == '/') lab.dir.pop_back();
  lab.prefix = args.prefix.empty() ? DefaultPrefix(lab.dir) : args.prefix;
  if (auto problems = PlanLab(*input, args, &lab); !problems.empty()) {
    PrintProblems(args.topology, problems);
    return kExitBadInput;
  }
  auto bmv2 = FindBmv2(args.bmv2);
  if (!bmv2.ok()) {
    std::cerr << "inac: " << bmv2.status().message() << "\n";
    return kExitFailure;
  }
  if (!IsRoot("up")) return kExitFailure;
  auto tools = FindTools();
  if (!tools.ok()) {
    std::cerr << "inac: " << tools.status().message() << "\n";
    return kExitFailure;
  }
  std::error_code ec;
  fs::create_directories(lab.dir, ec);
  if (ec) {
    std::cerr << "inac: cannot create " << lab.dir << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  DirLock lock(lab.dir);
  if (!lock.Held(lab.dir)) return kExitFailure;
  if (fs::exists(lab.file())) {
    auto text = core::ReadFile(lab.file());
    Json old = Json::parse(text.ok() ? *text : "", nullptr, false);
    if (!old.is_object() || old.value("state", "") != "down") {
      std::cerr << "inac: " << lab.file() << " describes a lab that is not down; run `inac lab "
                << "down --dir " << lab.dir << "` first\n";
      return kExitFailure;
    }
  }
  std::vector<std::string> taken;
  for (const std::string& ns : lab.namespaces) {
    if (NamespaceExists(ns)) taken.push_back("network namespace " + ns);
  }
  for (const std::string& name : lab.root_interfaces) {
    if (InterfaceExists(name)) taken.push_back("interface " + name);
  }
  if (!taken.empty()) {
    std::cerr << "inac: already exist: " << absl::StrJoin(taken, ", ") << " (prefix " << lab.prefix
              << " is in use: another lab? choose another --prefix or --dir)\n";
    return kExitFailure;
  }
  lab.state = "starting";
  if (auto s = WriteLab(lab); !s.ok()) {
    std::cerr << "inac: " << s.message() << "\n";
    return kExitFailure;
  }
  if (auto s = BringUp(&lab, *input, args, *bmv2, *tools); !s.ok()) {
    std::cerr << "inac: lab up failed: " << s.message() << "\n";
    int stopped = 0, namespaces = 0, interfaces = 0;
    auto errors = Teardown(lab, *tools, &stopped, &namespaces, &interfaces);
    for (const std::string& e : errors) std::cerr << "inac: cleanup: " << e << "\n";
    lab.state = errors.empty() ? "down" : "failed";
    (void)WriteLab(lab);
    std::cerr << "inac: " << (errors.empty() ? "removed" : "tried to remove")
              << " what was created (" << stopped << " processes, " << namespaces << " namespaces, "
              << interfaces << " interfaces)\n";
    return kExitFailure;
  }
  lab.state = "up";
  if (auto s = WriteLab(lab); !s.ok()) {
    std::cerr << "inac: " << s.message() << "\n";
    return kExitFailure;
  }
  PrintSummary(lab);
  return kExitOk;
}

int LabDown(const std::string& dir_arg) {
  const std::string dir = fs::absolute(dir_arg).lexically_normal().string();
  const std::string file = dir + "/lab.json";
  if (!fs::exists(file)) {
    std::cout << "no lab in " << dir << " (no lab.json): nothing to tear down\n";
    return kExitOk;
  }
  DirLock lock(dir);
  if (!lock.Held(dir)) return kExitFailure;
  auto text = core::ReadFile(file);
  if (!text.ok()) {
    std::cerr << "inac: " << text.status().message() << "\n";
    return kExitFailure;
  }
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::cerr << "inac: " << file << ": not valid JSON\n";
    return kExitBadInput;
  }
  auto lab = LabFromJson(j, file);
  if (!lab.ok()) {
    std::cerr << "inac: " << lab.status().message() << "\n";
    return kExitBadInput;
  }
  if (!IsRoot("down")) return kExitFailure;
  auto tools = FindTools();
  if (!tools.ok()) {
    std::cerr << "inac: " << tools.status().message() << "\n";
    return kExitFailure;
  }
  int stopped = 0, namespaces = 0, interfaces = 0;
  auto errors = Teardown(*lab, *tools, &stopped, &namespaces, &interfaces);
  for (const std::string& e : errors) std::cerr << "inac: " << e << "\n";
  j["state"] = errors.empty() ? "down" : "failed";
  if (auto s = WriteWholeFile(file, j.dump(2) + "\n"); !s.ok()) {
    errors.push_back(std::string(s.message()));
    std::cerr << "inac: " << s.message() << "\n";
  }
  std::cout << "lab down (" << dir << "): stopped " << stopped << " processes, removed "
            << namespaces << " namespaces and " << interfaces << " interfaces\n";
  return errors.empty() ? kExitOk : kExitFailure;
}

// Reads DIR/lab.json for `switch` and `link`; prints the problem and sets *exit when it cannot.
std::optional<Lab> LoadRunningLab(const std::string& dir, int* exit) {
  const std::string file = dir + "/lab.json";
  *exit = kExitFailure;
  auto text = core::ReadFile(file);
  if (!text.ok()) {
    std::cerr << "inac: no lab in " << dir << ": " << text.status().message() << "\n";
    return std::nullopt;
  }
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto lab = j.is_discarded() ? absl::InvalidArgumentError(file + ": not valid JSON")
                              : LabFromJson(j, file);
  if (!lab.ok()) {
    std::cerr << "inac: " << lab.status().message() << "\n";
    *exit = kExitBadInput;
    return std::nullopt;
  }
  if (lab->state != "up") {
    std::cerr << "inac: the lab in " << dir << " is " << (lab->state.empty() ? "?" : lab->state)
              << ", not up\n";
    return std::nullopt;
  }
  lab->dir = dir;
  *exit = kExitOk;
  return *std::move(lab);
}

// `inac lab switch kill|start|restart`: a switch failure, as an operator would cause one. `kill`
// SIGKILLs the switch's BMv2 (a crash: its tables, registers and multicast groups are lost);
// `start` starts it again with the command line of `up`, empty (no pipeline), on the same
// interfaces and gRPC port, and waits until it answers; `restart` does both.
int LabSwitchVerb(const std::string& dir_arg, const std::string& op, const std::string& id) {
  const std::string dir = fs::absolute(dir_arg).lexically_normal().string();
  if (!IsRoot("switch")) return kExitFailure;
  DirLock lock(dir);
  if (!lock.Held(dir)) return kExitFailure;
  int exit = kExitOk;
  std::optional<Lab> lab = LoadRunningLab(dir, &exit);
  if (!lab) return exit;
  const LabSwitch* sw = nullptr;
  for (const LabSwitch& s : lab->switches) {
    if (s.id == id) sw = &s;
  }
  ProcessInfo* process = nullptr;
  for (ProcessInfo& p : lab->processes) {
    if (p.name == "bmv2 " + id) process = &p;
  }
  if (sw == nullptr || process == nullptr) {
    std::vector<std::string> ids;
    for (const LabSwitch& s : lab->switches) ids.push_back(s.id);
    std::cerr << "inac: no switch \"" << id
              << "\" in the lab (switches: " << absl::StrJoin(ids, ", ") << ")\n";
    return kExitBadInput;
  }
  if (op == "kill" || op == "restart") {
    if (Running(*process)) {
      kill(process->pid, SIGKILL);
      for (auto end = Clock::now() + kKillGrace; Running(*process) && Clock::now() < end;) {
        std::this_thread::sleep_for(kPoll);
      }
      if (Running(*process)) {
        std::cerr << "inac: switch " << id << ": BMv2 (pid " << process->pid
                  << ") does not die on SIGKILL\n";
        return kExitFailure;
      }
      std::cout << "switch " << id << ": killed BMv2 (pid " << process->pid << ")\n";
    } else {
      std::cout << "switch " << id << ": BMv2 was not running\n";
    }
  }
  if (op == "start" || op == "restart") {
    if (Running(*process)) {
      std::cerr << "inac: switch " << id << ": BMv2 already runs (pid " << process->pid << ")\n";
      return kExitFailure;
    }
    if (process->argv.empty()) {
      std::cerr << "inac: " << dir << "/lab.json does not record how switch " << id
                << " was started (a lab made by an older inac): take the lab down and up\n";
      return kExitFailure;
    }
    const uint64_t offset = FileSize(sw->log);
    auto started = SpawnDetached(process->name, process->argv, sw->log);
    if (!started.ok()) {
      std::cerr << "inac: switch " << id << ": " << started.status().message() << "\n";
      return kExitFailure;
    }
    *process = *started;
    if (auto s = WriteLab(*lab); !s.ok()) {
      std::cerr << "inac: " << s.message() << "\n";
      return kExitFailure;
    }
    if (auto s = AwaitBmv2(*sw, *process, offset); !s.ok()) {
      std::cerr << "inac: " << s.message() << "\n";
      return kExitFailure;
    }
    std::cout << "switch " << id << ": BMv2 started (pid " << process->pid << ", gRPC "
              << sw->address() << "), empty: the controller pushes its pipeline and entries\n";
  }
  return kExitOk;
}

// `inac lab link down|up`: cuts or restores a link (every frame sent into it is dropped, in both
// directions; see CutLink). The controller is not told: report it (PATCH /links/{id}).
int LabLinkVerb(const std::string& dir_arg, const std::string& op, const std::string& id) {
  const std::string dir = fs::absolute(dir_arg).lexically_normal().string();
  if (!IsRoot("link")) return kExitFailure;
  auto tools = FindTools();
  if (!tools.ok()) {
    std::cerr << "inac: " << tools.status().message() << "\n";
    return kExitFailure;
  }
  DirLock lock(dir);
  if (!lock.Held(dir)) return kExitFailure;
  int exit = kExitOk;
  std::optional<Lab> lab = LoadRunningLab(dir, &exit);
  if (!lab) return exit;
  const std::vector<LinkEnd> ends = LinkEnds(*lab, id);
  if (ends.empty()) {
    std::cerr << "inac: no link \"" << id << "\" in the lab (see " << dir << "/topology.json)\n";
    return kExitBadInput;
  }
  if (auto s = CutLink(*tools, ends, op == "down"); !s.ok()) {
    std::cerr << "inac: " << s.message() << "\n";
    return kExitFailure;
  }
  std::vector<std::string> names;
  for (const LinkEnd& e : ends)
    names.push_back(e.ns.empty() ? e.interface : e.ns + ":" + e.interface);
  std::cout << "link " << id << ": " << (op == "down" ? "cut" : "restored") << " ("
            << absl::StrJoin(names, ", ") << ")";
  if (!lab->controller_url.empty()) {
    std::cout << "; tell the controller: inac --server " << lab->controller_url << " topo link "
              << id << " " << op;
  }
  std::cout << "\n";
  return kExitOk;
}

}  // namespace

absl::StatusOr<std::string> FindBmv2(const std::string& explicit_path) {
  auto from = [](const std::string& v) -> std::string {
    std::error_code ec;
    if (fs::is_directory(v, ec)) {
      const std::string p = v + "/" + kBmv2Name;
      return IsExecutableFile(p) ? Canonical(p) : "";
    }
    return IsExecutableFile(v) ? Canonical(v) : "";
  };
  const std::string how =
      "install BMv2 with its P4Runtime server (simple_switch_grpc: p4lang's packages, or "
      "behavioral-model built --with-pi) and put it on PATH or in $INAC_BMV2; see README.md, "
      "section \"INAC against BMv2\"";
  if (!explicit_path.empty()) {
    if (std::string p = from(explicit_path); !p.empty()) return p;
    return absl::NotFoundError(absl::StrCat("BMv2 not found: --bmv2 ", explicit_path, " is not ",
                                            kBmv2Name, " nor a folder holding it; ", how));
  }
  std::vector<std::string> looked;
  const char* env = std::getenv("INAC_BMV2");
  if (env != nullptr && *env != '\0') {
    if (std::string p = from(env); !p.empty()) return p;
    looked.push_back(absl::StrCat("$INAC_BMV2 (", env, ")"));
  } else {
    looked.push_back("$INAC_BMV2 (unset)");
  }
  if (std::string p = FindInPath(kBmv2Name, false); !p.empty()) return Canonical(p);
  looked.push_back("PATH");
  std::error_code ec;
  bool repo = false;
  for (const fs::path& start :
       {fs::path(SelfExe()).parent_path(), fs::absolute(fs::current_path(ec))}) {
    for (fs::path a = start; !a.empty(); a = a.parent_path()) {
      if (fs::exists(a / "api/p4/ina.p4", ec)) {
        repo = true;
        const fs::path p = a.parent_path() / "shared/peers/bin" / kBmv2Name;
        if (IsExecutableFile(p.string())) return Canonical(p.string());
        looked.push_back(p.parent_path().string());
        break;
      }
      if (a == a.parent_path()) break;
    }
  }
  if (!repo) looked.push_back("../shared/peers/bin (no INAC repository above inac or here)");
  return absl::NotFoundError(absl::StrCat("BMv2 (", kBmv2Name, ") not found; looked in ",
                                          absl::StrJoin(looked, ", "), ". To fix: ", how));
}

void AddLabCommand(CLI::App& app) {
  CLI::App* lab = app.add_subcommand(
      "lab", "A BMv2 lab on this machine: host namespaces, one BMv2 per switch, a controller");
  lab->require_subcommand(1);

  auto up = std::make_shared<UpArgs>();
  CLI::App* cmd = lab->add_subcommand(
      "up", "Create the lab of a topology (needs root; docs/lab.md); prints how to use it");
  cmd->add_option("--topology", up->topology, "Topology JSON file")->required();
  cmd->add_option("--dir", up->dir,
                  "Folder for lab.json, topology.json, the logs and the controller's database "
                  "(created if missing)")
      ->required();
  cmd->add_option("--bmv2", up->bmv2,
                  "simple_switch_grpc, or its folder (default: $INAC_BMV2, PATH, "
                  "../shared/peers/bin beside the repository)");
  cmd->add_option("--grpc-base-port", up->grpc_base_port,
                  "Switch i without p4runtime.address serves gRPC on 127.0.0.1:(P+i) (default: "
                  "free ports)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--controller-port", up->controller_port,
                  "REST port of the controller on 127.0.0.1 (default: a free port)")
      ->check(CLI::Range(1, 65535));
  cmd->add_flag("--no-controller", up->no_controller, "Start no controller");
  cmd->add_option("--algorithm", up->algorithm,
                  "The controller's routing algorithm (`inac serve --algorithm`; default: its "
                  "default, trees)")
      ->check(CLI::IsMember(scheduler::RoutingAlgorithmNames()));
  cmd->add_option("--memory-policy", up->memory_policy,
                  "The controller's switch memory policy (`inac serve --memory-policy`; "
                  "default: esa)")
      ->check(CLI::IsMember({"esa", "atp", "switchml", "no_ina"}));
  cmd->add_option("--prefix", up->prefix,
                  "Name prefix of the lab's namespaces and interfaces (default: inl + 4 hex "
                  "digits of a hash of --dir)")
      ->check([](const std::string& s) -> std::string {
        bool ok = s.size() >= 2 && s.size() <= 7 && std::islower(static_cast<unsigned char>(s[0]));
        for (char c : s) {
          ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                      std::isdigit(static_cast<unsigned char>(c)));
        }
        return ok ? "" : "2 to 7 lowercase letters and digits, starting with a letter";
      });
  cmd->add_option("--bmv2-log-level", up->bmv2_log_level,
                  "BMv2 log level (trace logs every packet)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();
  cmd->callback([up] {
    int code = LabUp(*up);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });

  auto dir = std::make_shared<std::string>();
  CLI::App* down = lab->add_subcommand(
      "down", "Stop the lab's processes, delete its namespaces and interfaces (idempotent)");
  down->add_option("--dir", *dir, "The folder given to `inac lab up`")->required();
  down->callback([dir] {
    int code = LabDown(*dir);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });

  auto target = std::make_shared<std::array<std::string, 3>>();  // dir, op, id
  CLI::App* sw = lab->add_subcommand(
      "switch", "Kill, start or restart one switch's BMv2 (a crash; started empty)");
  sw->add_option("op", (*target)[1], "kill | start | restart")
      ->required()
      ->check(CLI::IsMember({"kill", "start", "restart"}));
  sw->add_option("switch", (*target)[2], "The switch id")->required();
  sw->add_option("--dir", (*target)[0], "The folder given to `inac lab up`")->required();
  sw->callback([target] {
    int code = LabSwitchVerb((*target)[0], (*target)[1], (*target)[2]);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
  CLI::App* link = lab->add_subcommand(
      "link", "Cut or restore one link (the controller is not told: PATCH /links/{id})");
  link->add_option("op", (*target)[1], "down | up")
      ->required()
      ->check(CLI::IsMember({"down", "up"}));
  link->add_option("link", (*target)[2], "The link id")->required();
  link->add_option("--dir", (*target)[0], "The folder given to `inac lab up`")->required();
  link->callback([target] {
    int code = LabLinkVerb((*target)[0], (*target)[1], (*target)[2]);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace inac::cli
