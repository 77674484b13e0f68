#include "cli/cmd_switch.h"

#include <google/protobuf/text_format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "cli/cli.h"
#include "cli/cli_util.h"
#include "core/files.h"
#include "southbound/emulator/emulated_switch.h"

namespace inac::cli {
namespace {

struct SwitchArgs {
  std::string listen = "127.0.0.1:9559";
  uint64_t device_id = 1;
  int devices = 1;
  std::string p4info_file;
  bool bmv2_deviations = false;
  std::string write_log;
};

int RunSwitch(const SwitchArgs& args) {
  southbound::emulator::EmulatedSwitchOptions options;
  options.listen_address = args.listen;
  options.device_id = args.device_id;
  options.num_devices = args.devices;
  options.write_log_path = args.write_log;
  options.deviations.promote_backup_immediately = args.bmv2_deviations;
  options.deviations.get_without_pipeline_fails = args.bmv2_deviations;
  if (!args.p4info_file.empty()) {
    absl::StatusOr<std::string> text = core::ReadFile(args.p4info_file);
    if (!text.ok()) {
      std::cerr << "inac: " << text.status().message() << "\n";
      return kExitBadInput;
    }
    p4::config::v1::P4Info p4info;
    if (!google::protobuf::TextFormat::ParseFromString(*text, &p4info)) {
      std::cerr << args.p4info_file << ": not a P4Info in protobuf text format\n";
      return kExitBadInput;
    }
    options.p4info = std::move(p4info);
  }

  // SIGTERM / SIGINT are taken synchronously by this thread: block them before the server
  // starts its threads (which inherit the mask), then wait for one.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto sw = southbound::emulator::EmulatedSwitch::Start(options);
  if (!sw.ok()) {
    std::cerr << "inac: " << sw.status().message() << "\n";
    return sw.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure;
  }
  std::cout << "listening on " << (*sw)->address() << std::endl;
  if (isatty(STDERR_FILENO)) {
    // A person at a terminal: say that this blocks, and what makes it useful.
    std::cerr << "inac switch: runs until Ctrl-C or SIGTERM (start it with & or in another "
                 "terminal); a controller manages it once a topology names it with p4runtime "
                 "address "
              << (*sw)->address() << " and device_id " << args.device_id;
    if (args.devices > 1) std::cerr << " .. " << args.device_id + args.devices - 1;
    std::cerr << "\n";
  }
  spdlog::info("event=switch_started address={} device_id={} devices={} pipeline={}",
               (*sw)->address(), args.device_id, args.devices,
               options.p4info.has_value() ? args.p4info_file : "none");
  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("event=switch_stopping signal={} entries={}", signal, (*sw)->NumTableEntries());
  (*sw)->Shutdown();
  (*sw)->Wait();
  return kExitOk;
}

}  // namespace

void AddSwitchCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "switch", "Run an emulated INA switch: a P4Runtime server holding its state in memory");
  auto args = std::make_shared<SwitchArgs>();
  cmd->add_option("--listen", args->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--device-id", args->device_id,
                  "P4Runtime device id (the first one with --devices)")
      ->capture_default_str();
  cmd->add_option("--devices", args->devices,
                  "Serve this many devices behind the one listen address, device ids --device-id "
                  "onwards, each with its own state and arbitration (emulated fabrics); with "
                  "--write-log each device appends to FILE.<device id>")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--p4info", args->p4info_file,
                  "P4Info (text format) installed at start; without it the switch waits for a "
                  "controller's SetForwardingPipelineConfig");
  cmd->add_flag("--bmv2-deviations", args->bmv2_deviations,
                "Behave like BMv2's simple_switch_grpc where it departs from the spec");
  cmd->add_option("--write-log", args->write_log,
                  "Append one line per Write / SetForwardingPipelineConfig (election id, result) "
                  "to this file (tests of controller fencing)");
  cmd->callback([args] {
    int code = RunSwitch(*args);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace inac::cli
