// The pieces of `inac lab` (cli/cmd_lab.cc, docs/lab.md), split by what they do:
// lab_process.cc runs commands and keeps detached processes (BMv2s, the controller) by pid and
// start time; lab_fabric.cc is the lab itself: its state file (lab.json), the namespaces, veths
// and qdiscs it creates, the BMv2s and the controller it starts, and how it tears them down.
// Internal to the `inac lab` verbs: not a library for other code. Needs root where it touches
// namespaces and interfaces; every failure is a Status naming the command and its output.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/topology.h"
#include "core/validation.h"

namespace inac::lab {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline constexpr auto kStartTimeout = std::chrono::seconds(30);  // a BMv2 or the controller
inline constexpr auto kTermGrace = std::chrono::seconds(5);      // SIGTERM -> SIGKILL
inline constexpr auto kKillGrace = std::chrono::seconds(2);
inline constexpr auto kPoll = std::chrono::milliseconds(50);
inline constexpr const char* kNetnsDir = "/var/run/netns";  // where `ip netns` keeps names
inline constexpr const char* kBmv2Name = "simple_switch_grpc";

// ---- files, commands and processes (lab_process.cc) ----

struct Tools {
  std::string ip;
  std::string sysctl;
  std::string tc;
};

struct CommandResult {
  int exit = -1;
  std::string output;  // stdout and stderr
};

struct ProcessInfo {
  std::string name;  // "bmv2 <switch>" or "controller"
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22: tells the process from a reused pid
  std::string log;
  std::vector<std::string> argv;  // how it was started (`lab switch start` starts it again)
};

bool IsExecutableFile(const std::string& path);
std::string Canonical(const std::string& path);
std::string SelfExe();
std::string FindInPath(const std::string& name, bool system_tool);
absl::Status WriteWholeFile(const std::string& path, const std::string& text);
std::string ReadFrom(const std::string& path, uint64_t offset);
uint64_t FileSize(const std::string& path);
std::string LogTail(const std::string& path, int lines = 6);
std::string MacString(uint64_t mac);
std::string CommandLine(const std::vector<std::string>& argv);
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& input = "");
absl::Status Check(const std::vector<std::string>& argv, const std::string& input = "");
std::optional<std::pair<char, uint64_t>> ProcStat(pid_t pid);
bool Running(const ProcessInfo& p);
absl::StatusOr<ProcessInfo> SpawnDetached(const std::string& name,
                                          const std::vector<std::string>& argv,
                                          const std::string& log);
std::vector<std::string> StopProcesses(const std::vector<ProcessInfo>& processes, int* stopped);

// ---- the lab (lab_fabric.cc) ----

struct LabHost {
  std::string id;
  std::string ns;
  std::string root_interface;  // the switch's end of the host's veth
  int link = -1;
  uint32_t address = 0;
  uint64_t mac = 0;
};

struct LabPort {
  uint32_t port = 0;
  std::string interface;
  std::string link;
};

struct LabSwitch {
  std::string id;
  uint64_t device_id = 0;
  int grpc_port = 0;  // 0 until picked
  std::string log;
  std::vector<LabPort> ports;
  std::string address() const { return absl::StrCat("127.0.0.1:", grpc_port); }
};

struct Lab {
  std::string prefix;
  std::string dir;
  std::string state;  // starting | up | down | failed
  std::vector<LabHost> hosts;
  std::vector<LabSwitch> switches;
  std::vector<std::string> namespaces;
  std::vector<std::string> root_interfaces;
  std::vector<ProcessInfo> processes;
  std::string controller_url;  // "" without a controller
  std::string file() const { return dir + "/lab.json"; }
};

// An exclusive lock on DIR/lab.lock for one `up` or `down` (closed, so released, on destruction).
class DirLock {
 public:
  explicit DirLock(const std::string& dir) {
    fd_ = open((dir + "/lab.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    locked_ = fd_ >= 0 && flock(fd_, LOCK_EX | LOCK_NB) == 0;
  }
  ~DirLock() {
    if (fd_ >= 0) close(fd_);
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  // False (and a message on stderr) when another `inac lab` holds the folder.
  bool Held(const std::string& dir) const {
    if (!locked_) {
      std::cerr << "inac: another `inac lab up|down` is running on " << dir << " (" << dir
                << "/lab.lock is locked)\n";
    }
    return locked_;
  }

 private:
  int fd_ = -1;
  bool locked_ = false;
};

struct UpArgs {
  std::string topology;
  std::string dir;
  std::string bmv2;
  int grpc_base_port = 0;
  int controller_port = 0;
  bool no_controller = false;
  std::string algorithm;      // the controller's routing algorithm ("": its default)
  std::string memory_policy;  // the controller's memory policy ("": its default, esa)
  std::string prefix;
  std::string bmv2_log_level = "info";
};

// One end of a link: an interface, in a host's namespace or (ns empty) the root namespace.
struct LinkEnd {
  std::string ns;
  std::string interface;
};

Json ProcessJson(const ProcessInfo& p);
Json LabToJson(const Lab& lab);
absl::Status WriteLab(const Lab& lab);
absl::StatusOr<Lab> LabFromJson(const Json& j, const std::string& path);
bool NamespaceExists(const std::string& ns);
bool InterfaceExists(const std::string& name);
std::vector<std::string> Teardown(const Lab& lab, const Tools& tools, int* stopped, int* ns_removed,
                                  int* if_removed);
std::string DefaultPrefix(const std::string& dir);
bool PlainName(const std::string& s, size_t max);
std::vector<core::Problem> LabProblems(const core::Topology& t);
std::optional<core::Topology> LoadLabTopology(const std::string& path);
std::vector<core::Problem> PlanLab(const core::Topology& t, const UpArgs& args, Lab* lab);
absl::Status PickPorts(Lab* lab);
absl::Status WriteProcSys(const std::string& key, const std::string& value);
absl::Status BringRootEndUp(const Tools& tools, const std::string& name);
absl::Status BuildNetwork(const Lab& lab, const core::Topology& t, const Tools& tools);
absl::Status AwaitBmv2(const LabSwitch& sw, const ProcessInfo& process, uint64_t log_offset);
absl::Status StartController(Lab* lab, const core::Topology& topology, const UpArgs& args);
std::vector<LinkEnd> LinkEnds(const Lab& lab, const std::string& id);
absl::Status CutLink(const Tools& tools, const std::vector<LinkEnd>& ends, bool down);
absl::Status BringUp(Lab* lab, const core::Topology& input, const UpArgs& args,
                     const std::string& bmv2, const Tools& tools);
void PrintSummary(const Lab& lab);
absl::StatusOr<Tools> FindTools();
bool IsRoot(const char* verb);

}  // namespace inac::lab
