#include "lab/lab.h"

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
#include "core/json.h"
#include "core/plan.h"
#include "core/topology.h"
#include "southbound/switch_session.h"

extern char** environ;

namespace inac::lab {

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
std::string LogTail(const std::string& path, int lines) {
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

// Runs argv (argv[0] a path; no shell) with `input` on stdin and waits for it.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const std::string& input) {
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
absl::Status Check(const std::vector<std::string>& argv, const std::string& input) {
  auto r = RunCommand(argv, input);
  if (!r.ok()) return r.status();
  if (r->exit != 0) {
    return absl::InternalError(absl::StrCat("`", CommandLine(argv), "` failed (exit ", r->exit,
                                            "): ", absl::StripAsciiWhitespace(r->output)));
  }
  return absl::OkStatus();
}

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

}  // namespace inac::lab
