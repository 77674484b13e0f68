#include "server/cmd_lab.h"

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
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/topology.h"
#include "server/api_client.h"
#include "server/cli.h"
#include "server/cli_util.h"
#include "server/config.h"
#include "southbound/switch_session.h"

extern char** environ;

namespace inac::server {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = std::chrono::seconds(30);  // a BMv2 or the controller answering
constexpr auto kTermGrace = std::chrono::seconds(5);      // SIGTERM -> SIGKILL
constexpr auto kKillGrace = std::chrono::seconds(2);
constexpr auto kPoll = std::chrono::milliseconds(50);
constexpr const char* kNetnsDir = "/var/run/netns";  // where `ip netns` keeps names
constexpr const char* kBmv2Name = "simple_switch_grpc";

// ---- files and tools -----------------------------------------------------------------------

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string Canonical(const std::string& path) {
  std::error_code ec;
  fs::path c = fs::canonical(path, ec);
  return ec ? path : c.string();
}

std::string SelfExe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

// `name` in PATH, then (for system tools, absent from some users' PATH) the sbin folders.
std::string FindInPath(const std::string& name, bool system_tool) {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs = absl::StrSplit(path ? path : "", ':', absl::SkipEmpty());
  if (system_tool) {
    for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.push_back(d);
  }
  for (const std::string& d : dirs) {
    if (IsExecutableFile(d + "/" + name)) return d + "/" + name;
  }
  return "";
}

absl::Status WriteWholeFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// The file's bytes from `offset` on ("" when it cannot be read).
std::string ReadFrom(const std::string& path, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// The last `lines` lines of a log, indented, for an error message.
std::string LogTail(const std::string& path, int lines = 6) {
  std::string text = ReadFrom(path, 0);
  std::vector<std::string> all = absl::StrSplit(text, '\n', absl::SkipEmpty());
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    absl::StrAppend(&out, "\n    | ", all[i]);
  }
  return out;
}

std::string MacString(uint64_t mac) {
  return absl::StrFormat("%02x:%02x:%02x:%02x:%02x:%02x", (mac >> 40) & 0xff, (mac >> 32) & 0xff,
                         (mac >> 24) & 0xff, (mac >> 16) & 0xff, (mac >> 8) & 0xff, mac & 0xff);
}

// ---- commands and processes ----------------------------------------------------------------

struct Tools {
  std::string ip;
  std::string sysctl;
  std::string tc;
};

std::string CommandLine(const std::vector<std::string>& argv) { return absl::StrJoin(argv, " "); }

// Spawn attributes shared by every child: default signal mask and dispositions.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  explicit SpawnSetup(bool new_session) {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int s : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (new_session) flags |= POSIX_SPAWN_SETSID;
    posix_spawnattr_setflags(&attr, flags);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  // After the redirections: nothing else of this process leaks into the child.
  void CloseTheRest() { posix_spawn_file_actions_addclosefrom_np(&actions, 3); }
  absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
    if (rc != 0) {
      return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
    }
    return pid;
  }
};

struct CommandResult {
  int exit = -1;
  std::string output;  // stdout and stderr
};

// Runs argv (argv[0] a path; no shell) with `input` on stdin and waits for it.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& input = "") {
  int in_fd = memfd_create("inac-lab-stdin", MFD_CLOEXEC);
  if (in_fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  for (size_t done = 0; done < input.size();) {
    ssize_t n = write(in_fd, input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(in_fd);
      return absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
    }
    done += n;
  }
  lseek(in_fd, 0, SEEK_SET);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in_fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  absl::StatusOr<pid_t> pid;
  {
    SpawnSetup setup(/*new_session=*/false);
    posix_spawn_file_actions_adddup2(&setup.actions, in_fd, 0);
    posix_spawn_file_actions_adddup2(&setup.actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&setup.actions, out[1], 2);
    setup.CloseTheRest();
    pid = setup.Spawn(argv);
  }
  close(in_fd);
  close(out[1]);
  CommandResult result;
  if (!pid.ok()) {
    close(out[0]);
    return pid.status();
  }
  char buf[4096];
  for (;;) {
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, n);
  }
  close(out[0]);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// RunCommand; an error naming the command and its output unless it exits 0.
absl::Status Check(const std::vector<std::string>& argv, const std::string& input = "") {
  auto r = RunCommand(argv, input);
  if (!r.ok()) return r.status();
  if (r->exit != 0) {
    return absl::InternalError(absl::StrCat("`", CommandLine(argv), "` failed (exit ", r->exit,
                                            "): ", absl::StripAsciiWhitespace(r->output)));
  }
  return absl::OkStatus();
}

struct ProcessInfo {
  std::string name;  // "bmv2 <switch>" or "controller"
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22: tells the process from a reused pid
  std::string log;
  std::vector<std::string> argv;  // how it was started (`lab switch start` starts it again)
};

// State and start time of a process (/proc/PID/stat); nullopt when there is none.
std::optional<std::pair<char, uint64_t>> ProcStat(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return std::nullopt;
  std::istringstream rest(line.substr(paren + 2));
  char state = 0;
  rest >> state;  // field 3
  std::string skip;
  for (int field = 4; field < 22; ++field) rest >> skip;
  uint64_t start = 0;
  rest >> start;
  if (!rest) return std::nullopt;
  return std::make_pair(state, start);
}

// The recorded process still runs (not a zombie, not another process that reuses its pid).
bool Running(const ProcessInfo& p) {
  if (p.pid <= 0) return false;
  waitpid(p.pid, nullptr, WNOHANG);  // reaps it when it is a child of this process
  auto st = ProcStat(p.pid);
  return st.has_value() && st->first != 'Z' && st->first != 'X' &&
         (p.start_time == 0 || st->second == p.start_time);
}

// Starts argv in a session of its own (it outlives this process) with stdin from /dev/null and
// stdout and stderr appended to `log`.
absl::StatusOr<ProcessInfo> SpawnDetached(const std::string& name,
                                          const std::vector<std::string>& argv,
                                          const std::string& log) {
  int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log, ": ", std::strerror(errno)));
  }
  absl::StatusOr<pid_t> pid;
  {
    SpawnSetup setup(/*new_session=*/true);
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&setup.actions, log_fd, 1);
    posix_spawn_file_actions_adddup2(&setup.actions, log_fd, 2);
    setup.CloseTheRest();
    pid = setup.Spawn(argv);
  }
  close(log_fd);
  if (!pid.ok()) return pid.status();
  ProcessInfo p{name, *pid, 0, log, argv};
  if (auto st = ProcStat(*pid)) p.start_time = st->second;
  return p;
}

// SIGTERM to every running process (its process group: it leads a session), SIGKILL to those
// still running after kTermGrace. Returns one message per process that would not stop.
std::vector<std::string> StopProcesses(const std::vector<ProcessInfo>& processes, int* stopped) {
  auto signal_all = [&](int sig) {
    for (const ProcessInfo& p : processes) {
      if (!Running(p)) continue;
      if (sig == SIGTERM) ++*stopped;
      if (getpgid(p.pid) == p.pid) kill(-p.pid, sig);
      kill(p.pid, sig);
    }
  };
  auto wait_all = [&](std::chrono::seconds grace) {
    for (auto end = Clock::now() + grace; Clock::now() < end;) {
      bool any = false;
      for (const ProcessInfo& p : processes) any = any || Running(p);
      if (!any) return;
      std::this_thread::sleep_for(kPoll);
    }
  };
  signal_all(SIGTERM);
  wait_all(kTermGrace);
  signal_all(SIGKILL);
  wait_all(kKillGrace);
  std::vector<std::string> errors;
  for (const ProcessInfo& p : processes) {
    if (Running(p)) errors.push_back(absl::StrCat(p.name, " (pid ", p.pid, ") does not stop"));
  }
  return errors;
}

// ---- the lab -------------------------------------------------------------------------------

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

Json ProcessJson(const ProcessInfo& p) {
  return {{"name", p.name},
          {"pid", p.pid},
          {"start_time", p.start_time},
          {"log", p.log},
          {"argv", p.argv}};
}

Json LabToJson(const Lab& lab) {
  Json hosts = Json::array(), switches = Json::array(), processes = Json::array();
  for (const LabHost& h : lab.hosts) {
    hosts.push_back({{"id", h.id},
                     {"namespace", h.ns},
                     {"interface", "eth0"},
                     {"root_interface", h.root_interface},
                     {"address", core::FormatIpv4(h.address)},
                     {"prefix_len", 8},
                     {"mac", MacString(h.mac)}});
  }
  for (const LabSwitch& s : lab.switches) {
    Json ports = Json::array();
    for (const LabPort& p : s.ports) {
      ports.push_back({{"port", p.port}, {"interface", p.interface}, {"link", p.link}});
    }
    Json sw = {{"id", s.id},   {"device_id", s.device_id}, {"grpc_address", s.address()},
               {"log", s.log}, {"ports", ports},           {"pid", nullptr}};
    for (const ProcessInfo& p : lab.processes) {
      if (p.name == "bmv2 " + s.id) sw["pid"] = p.pid;
    }
    switches.push_back(sw);
  }
  for (const ProcessInfo& p : lab.processes) processes.push_back(ProcessJson(p));
  return {{"version", 1},
          {"state", lab.state},
          {"prefix", lab.prefix},
          {"dir", lab.dir},
          {"topology", lab.dir + "/topology.json"},
          {"controller_url", lab.controller_url.empty() ? Json() : Json(lab.controller_url)},
          {"hosts", hosts},
          {"switches", switches},
          {"namespaces", lab.namespaces},
          {"root_interfaces", lab.root_interfaces},
          {"processes", processes}};
}

absl::Status WriteLab(const Lab& lab) {
  return WriteWholeFile(lab.file(), LabToJson(lab).dump(2) + "\n");
}

// What `down`, `switch` and `link` need of lab.json: namespaces, interfaces, processes,
// switches.
absl::StatusOr<Lab> LabFromJson(const Json& j, const std::string& path) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (!j.is_object()) return bad("not a lab file (a JSON object)");
  Lab lab;
  try {
    lab.prefix = j.value("prefix", "");
    lab.state = j.value("state", "");
    lab.dir = j.value("dir", "");
    lab.controller_url =
        j.value("controller_url", Json()).is_string() ? j["controller_url"].get<std::string>() : "";
    lab.namespaces = j.value("namespaces", std::vector<std::string>{});
    lab.root_interfaces = j.value("root_interfaces", std::vector<std::string>{});
    for (const Json& p : j.value("processes", Json::array())) {
      lab.processes.push_back({p.at("name").get<std::string>(), p.at("pid").get<pid_t>(),
                               p.value("start_time", uint64_t{0}), p.value("log", ""),
                               p.value("argv", std::vector<std::string>{})});
    }
    for (const Json& h : j.value("hosts", Json::array())) {
      LabHost host;
      host.id = h.at("id").get<std::string>();
      host.ns = h.at("namespace").get<std::string>();
      host.root_interface = h.value("root_interface", "");
      lab.hosts.push_back(std::move(host));
    }
    for (const Json& s : j.value("switches", Json::array())) {
      LabSwitch sw;
      sw.id = s.at("id").get<std::string>();
      sw.device_id = s.at("device_id").get<uint64_t>();
      const std::string address = s.at("grpc_address").get<std::string>();
      const size_t colon = address.rfind(':');
      if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &sw.grpc_port))
        return bad(absl::StrCat("switches: bad grpc_address \"", address, "\""));
      sw.log = s.value("log", "");
      for (const Json& port : s.value("ports", Json::array())) {
        sw.ports.push_back({port.at("port").get<uint32_t>(),
                            port.at("interface").get<std::string>(), port.value("link", "")});
      }
      lab.switches.push_back(std::move(sw));
    }
  } catch (const Json::exception& e) {
    return bad(e.what());
  }
  auto safe = [](const std::string& name) {
    return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
  };
  for (const std::string& n : lab.namespaces) {
    if (!safe(n)) return bad(absl::StrCat("namespaces: bad name \"", n, "\""));
  }
  for (const std::string& n : lab.root_interfaces) {
    if (!safe(n) || n.size() > 15)
      return bad(absl::StrCat("root_interfaces: bad name \"", n, "\""));
  }
  return lab;
}

bool NamespaceExists(const std::string& ns) { return fs::exists(fs::path(kNetnsDir) / ns); }
bool InterfaceExists(const std::string& name) { return fs::exists("/sys/class/net/" + name); }

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

// Stops the lab's processes, deletes its namespaces and root-namespace interfaces. Idempotent:
// what is already gone is skipped. Returns one message per thing it could not remove.
std::vector<std::string> Teardown(const Lab& lab, const Tools& tools, int* stopped, int* ns_removed,
                                  int* if_removed) {
  std::vector<std::string> errors = StopProcesses(lab.processes, stopped);
  for (const std::string& ns : lab.namespaces) {
    if (!NamespaceExists(ns)) continue;
    auto s = Check({tools.ip, "netns", "del", ns});
    if (s.ok()) {
      ++*ns_removed;
    } else if (NamespaceExists(ns)) {
      errors.push_back(std::string(s.message()));
    }
  }
  for (const std::string& name : lab.root_interfaces) {
    if (!InterfaceExists(name)) continue;  // deleting a veth end deletes its peer
    auto s = Check({tools.ip, "link", "del", name});
    if (s.ok()) {
      ++*if_removed;
    } else if (InterfaceExists(name)) {
      errors.push_back(std::string(s.message()));
    }
  }
  return errors;
}

// ---- planning ------------------------------------------------------------------------------

struct UpArgs {
  std::string topology;
  std::string dir;
  std::string bmv2;
  int grpc_base_port = 0;
  int controller_port = 0;
  bool no_controller = false;
  std::string prefix;
  std::string bmv2_log_level = "info";
};

// "inl" + 4 hex digits of a hash of the lab's folder.
std::string DefaultPrefix(const std::string& dir) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : dir) h = (h ^ c) * 16777619u;
  return absl::StrFormat("inl%04x", (h ^ (h >> 16)) & 0xffff);
}

bool PlainName(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return s != "." && s != "..";
}

// What keeps a (decoded, possibly invalid) topology from being a lab: a host with more than one
// link (a host has one interface), too many links for the interface names.
std::vector<core::Problem> LabProblems(const core::Topology& t) {
  std::vector<core::Problem> problems;
  std::map<std::string, int> links_of_host;
  for (const core::Host& h : t.hosts) links_of_host[h.id] = 0;
  if (t.links.size() > 999999) problems.push_back({"links", "the lab supports < 10^6 links"});
  for (size_t j = 0; j < t.links.size(); ++j) {
    const core::Link& l = t.links[j];
    const bool a_host = links_of_host.count(l.a) > 0, b_host = links_of_host.count(l.b) > 0;
    if (a_host == b_host) continue;  // a switch-switch link, or a host-host one (validation's)
    const std::string& host = a_host ? l.a : l.b;
    if (++links_of_host[host] > 1) {
      problems.push_back(
          {absl::StrCat("links[", j, "]"),
           absl::StrCat("host \"", host,
                        "\" has a second link; the lab gives each host one interface (eth0)")});
    }
  }
  return problems;
}

// The topology of `path`; nullopt after printing every problem (decoding, validation, lab).
std::optional<core::Topology> LoadLabTopology(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    std::cerr << "inac: " << text.status().message() << "\n";
    return std::nullopt;
  }
  std::vector<core::Problem> problems;
  std::optional<core::Topology> topology = core::ParseTopology(*text, &problems);
  core::Topology decoded;
  if (topology) {
    decoded = *topology;
  } else {
    std::vector<core::Problem> ignored;  // already in `problems`
    if (auto json = core::ParseJsonText(*text, &ignored)) {
      decoded = core::TopologyFromJson(*json, &ignored);
    }
  }
  for (const core::Problem& p : LabProblems(decoded)) problems.push_back(p);
  if (!problems.empty()) {
    PrintProblems(path, problems);
    return std::nullopt;
  }
  return topology;
}

// Names, addresses and ports of every host and switch; the problems that keep `topology` from
// being a lab (exit 2).
std::vector<core::Problem> PlanLab(const core::Topology& t, const UpArgs& args, Lab* lab) {
  std::vector<core::Problem> problems;
  const std::string& prefix = lab->prefix;
  std::map<std::string, int> host_index;
  for (size_t i = 0; i < t.hosts.size(); ++i) host_index[t.hosts[i].id] = static_cast<int>(i);
  std::set<std::string> switch_ids;
  for (const core::Switch& s : t.switches) switch_ids.insert(s.id);

  // Hosts: a namespace each, named after the host when every id is a plain short name.
  bool plain = true;
  for (const core::Host& h : t.hosts) plain = plain && PlainName(h.id, 24);
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    LabHost h;
    h.id = t.hosts[i].id;
    h.ns = plain ? absl::StrCat(prefix, "-", h.id) : absl::StrCat(prefix, "-h", i);
    h.address = core::NodeAddress(t, h.id);
    h.mac = core::NodeMac(t, h.id);
    lab->hosts.push_back(h);
    lab->namespaces.push_back(h.ns);
  }
  for (size_t j = 0; j < t.links.size(); ++j) {
    const core::Link& l = t.links[j];
    const std::string base = absl::StrCat(prefix, "l", j);
    const bool a_host = host_index.count(l.a) > 0, b_host = host_index.count(l.b) > 0;
    if (a_host && b_host) continue;  // refused by ValidateTopology
    if (a_host || b_host) {
      LabHost& h = lab->hosts[host_index[a_host ? l.a : l.b]];
      if (h.link >= 0) continue;  // refused by LabProblems
      h.link = static_cast<int>(j);
      h.root_interface = base;
      lab->root_interfaces.push_back(base);
    } else {
      lab->root_interfaces.push_back(base + "a");
      lab->root_interfaces.push_back(base + "b");
    }
  }

  // Switches: gRPC port from p4runtime.address, else --grpc-base-port + position, else picked.
  std::map<int, std::string> port_owner;
  std::set<std::string> logs;
  for (size_t i = 0; i < t.switches.size(); ++i) {
    const core::Switch& s = t.switches[i];
    const std::string path = absl::StrCat("switches[", i, "]");
    LabSwitch sw;
    sw.id = s.id;
    sw.device_id = s.p4runtime ? s.p4runtime->device_id : i + 1;
    if (s.p4runtime) {
      std::string host;
      if (!SplitHostPort(s.p4runtime->address, &host, &sw.grpc_port).ok()) {
        problems.push_back({path + ".p4runtime.address", "must be host:port"});
      }
    } else if (args.grpc_base_port > 0) {
      sw.grpc_port = args.grpc_base_port + static_cast<int>(i);
      if (sw.grpc_port > 65535) {
        problems.push_back({path, absl::StrCat("--grpc-base-port ", args.grpc_base_port, " + ", i,
                                               " is beyond port 65535")});
      }
    }
    if (sw.grpc_port != 0) {
      auto [it, fresh] = port_owner.emplace(sw.grpc_port, s.id);
      if (!fresh) {
        problems.push_back({path, absl::StrCat("gRPC port ", sw.grpc_port, " is also switch \"",
                                               it->second, "\"'s")});
      }
    }
    std::string file = PlainName(s.id, 64) ? s.id : absl::StrCat("switch", i);
    if (!logs.insert(file).second) file = absl::StrCat(file, "-", i);
    logs.insert(file);
    sw.log = absl::StrCat(lab->dir, "/", file, ".bmv2.log");
    for (size_t j = 0; j < t.links.size(); ++j) {
      const core::Link& l = t.links[j];
      if (l.a != s.id && l.b != s.id) continue;
      const std::string base = absl::StrCat(lab->prefix, "l", j);
      const bool host_link = host_index.count(l.a) > 0 || host_index.count(l.b) > 0;
      const std::string name = host_link ? base : base + (l.a == s.id ? "a" : "b");
      sw.ports.push_back({core::PortOf(t, s.id, static_cast<int>(j)), name, l.id});
    }
    lab->switches.push_back(sw);
  }
  return problems;
}

// Free loopback TCP ports for the switches without one (held open until all are picked).
absl::Status PickPorts(Lab* lab) {
  std::vector<int> fds;
  std::set<int> taken;
  for (const LabSwitch& s : lab->switches) taken.insert(s.grpc_port);
  absl::Status status;
  for (LabSwitch& s : lab->switches) {
    while (s.grpc_port == 0 && status.ok()) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof(addr);
      if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
          getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        status = absl::InternalError(absl::StrCat("cannot pick a free port: ", strerror(errno)));
      } else if (taken.insert(ntohs(addr.sin_port)).second) {
        s.grpc_port = ntohs(addr.sin_port);
      }
      if (fd >= 0) fds.push_back(fd);
    }
  }
  for (int fd : fds) close(fd);
  return status;
}

// ---- up ------------------------------------------------------------------------------------

absl::Status WriteProcSys(const std::string& key, const std::string& value) {
  const std::string path = "/proc/sys/" + key;
  if (!fs::exists(path)) return absl::OkStatus();  // e.g. a kernel without IPv6
  std::ofstream out(path);
  out << value;
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", value, " to ", path));
  return absl::OkStatus();
}

// The root-namespace end of a veth: no IPv6 (nothing of the kernel's own into the fabric), up.
absl::Status BringRootEndUp(const Tools& tools, const std::string& name) {
  if (auto s = WriteProcSys("net/ipv6/conf/" + name + "/disable_ipv6", "1"); !s.ok()) return s;
  return Check({tools.ip, "link", "set", name, "up"});
}

// Namespaces, veths, addresses and neighbour entries.
absl::Status BuildNetwork(const Lab& lab, const core::Topology& t, const Tools& tools) {
  for (const LabHost& h : lab.hosts) {
    if (auto s = Check({tools.ip, "netns", "add", h.ns}); !s.ok()) return s;
    // Before eth0 exists, so that it inherits the defaults.
    if (auto s = Check({tools.ip, "netns", "exec", h.ns, tools.sysctl, "-q", "-w",
                        "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                        "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"});
        !s.ok()) {
      return s;
    }
  }
  for (size_t j = 0; j < t.links.size(); ++j) {
    const std::string base = absl::StrCat(lab.prefix, "l", j);
    const LabHost* host = nullptr;
    for (const LabHost& h : lab.hosts) {
      if (h.link == static_cast<int>(j)) host = &h;
    }
    if (host != nullptr) {
      if (auto s = Check({tools.ip, "link", "add", base, "type", "veth", "peer", "name", "eth0",
                          "address", MacString(host->mac), "netns", host->ns});
          !s.ok()) {
        return s;
      }
      if (auto s = BringRootEndUp(tools, base); !s.ok()) return s;
    } else {
      if (auto s = Check(
              {tools.ip, "link", "add", base + "a", "type", "veth", "peer", "name", base + "b"});
          !s.ok()) {
        return s;
      }
      if (auto s = BringRootEndUp(tools, base + "a"); !s.ok()) return s;
      if (auto s = BringRootEndUp(tools, base + "b"); !s.ok()) return s;
    }
  }
  // Inside each host: address, lo and eth0 up, a permanent neighbour entry for every other host
  // and every switch (the fabric carries no ARP), a route for any address off the host's /8.
  std::vector<std::pair<uint32_t, uint64_t>> peers;
  for (const LabHost& h : lab.hosts) peers.emplace_back(h.address, h.mac);
  for (const core::Switch& s : t.switches) {
    peers.emplace_back(core::NodeAddress(t, s.id), core::NodeMac(t, s.id));
  }
  for (const LabHost& h : lab.hosts) {
    std::string batch = absl::StrCat("address add ", core::FormatIpv4(h.address),
                                     "/8 dev eth0\nlink set lo up\nlink set eth0 up\n");
    for (const auto& [address, mac] : peers) {
      if (address == h.address) continue;
      if ((address >> 24) != (h.address >> 24)) {
        absl::StrAppend(&batch, "route replace ", core::FormatIpv4(address), "/32 dev eth0\n");
      }
      absl::StrAppend(&batch, "neigh replace ", core::FormatIpv4(address), " lladdr ",
                      MacString(mac), " dev eth0 nud permanent\n");
    }
    if (auto s = Check({tools.ip, "-n", h.ns, "-batch", "-"}, batch); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Polls until the BMv2 answers GetForwardingPipelineConfig (OK, or FAILED_PRECONDITION: up
// without a pipeline).
absl::Status AwaitBmv2(const LabSwitch& sw, const ProcessInfo& process, uint64_t log_offset) {
  southbound::SessionOptions options;
  options.address = sw.address();
  options.device_id = sw.device_id;
  options.rpc_timeout = absl::Seconds(1);
  southbound::SwitchSession session(options);
  absl::Status last;
  for (auto end = Clock::now() + kStartTimeout; Clock::now() < end;) {
    if (!Running(process)) {
      return absl::InternalError(absl::StrCat("switch ", sw.id,
                                              ": BMv2 exited before answering on ", sw.address(),
                                              "; its log ", sw.log, ":", LogTail(sw.log)));
    }
    // BMv2 keeps running when its gRPC server cannot bind; gRPC says so in the log.
    if (ReadFrom(sw.log, log_offset).find("No address added") != std::string::npos) {
      return absl::InternalError(absl::StrCat("switch ", sw.id, ": BMv2 cannot serve gRPC on ",
                                              sw.address(), " (port in use?); its log ", sw.log,
                                              ":", LogTail(sw.log, 2)));
    }
    auto cookie = session.GetPipelineCookie();
    if (cookie.ok()) return absl::OkStatus();
    last = cookie.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("switch ", sw.id, ": BMv2 (pid ", process.pid, ") did not answer on gRPC ",
                   sw.address(), " within ", kStartTimeout.count(), " s (last: ", last.ToString(),
                   "); its log ", sw.log, ":", LogTail(sw.log)));
}

// Starts `inac serve`, waits for its `listening on` line, PUTs the lab topology.
absl::Status StartController(Lab* lab, const core::Topology& topology, const UpArgs& args) {
  const std::string log = lab->dir + "/serve.log";
  const uint64_t offset = FileSize(log);  // the log is appended to: skip earlier runs
  auto process = SpawnDetached("controller",
                               {SelfExe(), "serve", "--db", lab->dir + "/inac.db", "--listen",
                                absl::StrCat("127.0.0.1:", args.controller_port)},
                               log);
  if (!process.ok()) return process.status();
  lab->processes.push_back(*process);
  if (auto s = WriteLab(*lab); !s.ok()) return s;
  std::string host_port;
  for (auto end = Clock::now() + kStartTimeout; host_port.empty();) {
    const std::string text = ReadFrom(log, offset);
    if (size_t at = text.find("listening on "); at != std::string::npos) {
      size_t eol = text.find('\n', at);
      if (eol != std::string::npos) host_port = text.substr(at + 13, eol - at - 13);
      continue;
    }
    if (!Running(*process) || Clock::now() > end) {
      return absl::InternalError(
          absl::StrCat("the controller (`inac serve`, pid ", process->pid, ") ",
                       Running(*process) ? "did not print `listening on` in time" : "exited",
                       "; its log ", log, ":", LogTail(log)));
    }
    std::this_thread::sleep_for(kPoll);
  }
  lab->controller_url = "http://" + host_port;
  auto client = ApiClient::Create(ApiClientOptions{lab->controller_url, "", 20000});
  if (!client.ok()) return client.status();
  auto reply = (*client)->Call("PUT", "/topology", core::TopologyToJson(topology));
  if (!reply.ok()) {
    return absl::Status(
        reply.status().code(),
        absl::StrCat("PUT ", lab->controller_url, "/api/v1/topology: ", reply.status().message()));
  }
  return absl::OkStatus();
}

// One end of a link: an interface, in a host's namespace or (ns empty) the root namespace.
struct LinkEnd {
  std::string ns;
  std::string interface;
};

// The ends of link `id` (both switch ports of a switch link; the switch port and the host's
// eth0 of a host link). Empty when the lab has no such link.
std::vector<LinkEnd> LinkEnds(const Lab& lab, const std::string& id) {
  std::vector<LinkEnd> ends;
  for (const LabSwitch& s : lab.switches) {
    for (const LabPort& p : s.ports) {
      if (p.link != id) continue;
      ends.push_back({"", p.interface});
      for (const LabHost& h : lab.hosts) {
        if (h.root_interface == p.interface) ends.push_back({h.ns, "eth0"});
      }
    }
  }
  return ends;
}

// Cuts (`down`) or restores a link. A cut link keeps its interfaces up and drops every frame sent
// into it, at both ends (a root qdisc `pfifo limit 0`): BMv2 stops receiving on *all* its ports
// once one of its interfaces goes down (libpcap reports an error and its receive loop ends), so
// `ip link set down` would take the whole switch with it.
absl::Status CutLink(const Tools& tools, const std::vector<LinkEnd>& ends, bool down) {
  for (const LinkEnd& end : ends) {
    std::vector<std::string> argv = {tools.tc};
    if (!end.ns.empty()) argv.insert(argv.end(), {"-n", end.ns});
    if (down) {
      argv.insert(argv.end(),
                  {"qdisc", "replace", "dev", end.interface, "root", "pfifo", "limit", "0"});
      if (auto s = Check(argv); !s.ok()) return s;
    } else {
      argv.insert(argv.end(), {"qdisc", "del", "dev", end.interface, "root"});
      auto r = RunCommand(argv);
      if (!r.ok()) return r.status();
      // Deleting the default qdisc of an interface that was never cut fails harmlessly.
      if (r->exit != 0 &&
          r->output.find("Cannot delete qdisc with handle of zero") == std::string::npos &&
          r->output.find("No such file or directory") == std::string::npos) {
        return absl::InternalError(absl::StrCat("`", CommandLine(argv), "` failed (exit ", r->exit,
                                                "): ", absl::StripAsciiWhitespace(r->output)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status BringUp(Lab* lab, const core::Topology& input, const UpArgs& args,
                     const std::string& bmv2, const Tools& tools) {
  if (auto s = BuildNetwork(*lab, input, tools); !s.ok()) return s;
  if (auto s = PickPorts(lab); !s.ok()) return s;
  std::vector<ProcessInfo> bmv2s;
  std::vector<uint64_t> log_offsets;  // logs are appended to: read only this run's part
  for (const LabSwitch& sw : lab->switches) {
    std::vector<std::string> argv = {bmv2, "--device-id", absl::StrCat(sw.device_id), "--no-p4"};
    for (const LabPort& p : sw.ports) {
      argv.push_back("-i");
      argv.push_back(absl::StrCat(p.port, "@", p.interface));
    }
    // --log-console: BMv2 appends ".txt" to a --log-file name; its stdout is the log instead.
    for (const std::string& a :
         {std::string("--log-console"), std::string("--log-level"), args.bmv2_log_level,
          std::string("--"), std::string("--grpc-server-addr"), sw.address()}) {
      argv.push_back(a);
    }
    log_offsets.push_back(FileSize(sw.log));
    auto process = SpawnDetached("bmv2 " + sw.id, argv, sw.log);
    if (!process.ok()) return process.status();
    lab->processes.push_back(*process);
    bmv2s.push_back(*process);
    if (auto s = WriteLab(*lab); !s.ok()) return s;
  }
  for (size_t i = 0; i < lab->switches.size(); ++i) {
    if (auto s = AwaitBmv2(lab->switches[i], bmv2s[i], log_offsets[i]); !s.ok()) return s;
  }
  // Links that are down in the topology: cut (their interfaces stay up, see CutLink).
  for (const core::Link& link : input.links) {
    if (link.status != core::LinkStatus::kDown) continue;
    if (auto s = CutLink(tools, LinkEnds(*lab, link.id), /*down=*/true); !s.ok()) return s;
  }
  core::Topology topology = input;
  for (size_t i = 0; i < topology.switches.size(); ++i) {
    topology.switches[i].p4runtime = core::P4RuntimeEndpoint{
        lab->switches[i].address(), lab->switches[i].device_id, core::TargetKind::kBmv2};
  }
  for (size_t i = 0; i < topology.hosts.size(); ++i) {
    topology.hosts[i].address = core::FormatIpv4(lab->hosts[i].address);
  }
  if (auto s = WriteWholeFile(lab->dir + "/topology.json",
                              core::TopologyToJson(topology).dump(2) + "\n");
      !s.ok()) {
    return s;
  }
  if (!args.no_controller) return StartController(lab, topology, args);
  return absl::OkStatus();
}

void PrintSummary(const Lab& lab) {
  std::cout << "lab up: " << lab.hosts.size() << " hosts, " << lab.switches.size()
            << " BMv2 switches (prefix " << lab.prefix << ", state " << lab.file() << ")\n";
  std::cout << "hosts (interface eth0):\n";
  for (const LabHost& h : lab.hosts) {
    std::cout << absl::StrFormat("  %-12s netns %-20s %-15s %s\n", h.id, h.ns,
                                 core::FormatIpv4(h.address) + "/8", MacString(h.mac));
  }
  std::cout << "switches:\n";
  for (const LabSwitch& s : lab.switches) {
    std::cout << absl::StrFormat("  %-12s grpc %-21s device %-4d log %s\n", s.id, s.address(),
                                 s.device_id, s.log);
  }
  std::cout << "topology: " << lab.dir << "/topology.json\n";
  if (!lab.controller_url.empty()) {
    std::cout << "controller: " << lab.controller_url << "/api/v1 (log " << lab.dir
              << "/serve.log)\n"
              << "  export INAC_SERVER=" << lab.controller_url << "\n";
  } else {
    std::cout << "controller: none (--no-controller); start one with\n  inac serve --db " << lab.dir
              << "/inac.db & inac topo apply " << lab.dir << "/topology.json\n";
  }
  if (!lab.hosts.empty()) {
    std::cout << "run in a host: ip netns exec " << lab.hosts[0].ns << " COMMAND...\n";
  }
  std::cout << "tear down:     inac lab down --dir " << lab.dir << "\n";
}

absl::StatusOr<Tools> FindTools() {
  Tools tools{FindInPath("ip", true), FindInPath("sysctl", true), FindInPath("tc", true)};
  if (tools.ip.empty()) return absl::NotFoundError("`ip` (iproute2) not found");
  if (tools.tc.empty()) return absl::NotFoundError("`tc` (iproute2) not found");
  if (tools.sysctl.empty()) return absl::NotFoundError("`sysctl` (procps) not found");
  return tools;
}

bool IsRoot(const char* verb) {
  if (geteuid() == 0) return true;
  std::cerr << "inac: lab " << verb
            << " needs root: it manages network namespaces and veth interfaces\n";
  return false;
}

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
    auto text = ReadFile(lab.file());
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
  auto text = ReadFile(file);
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
  auto text = ReadFile(file);
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

}  // namespace inac::server
