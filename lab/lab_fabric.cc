// `inac lab` (lab/lab.h): planning a fabric from a topology (names, addresses, ports) and bringing
// it up (network namespaces, veth links, BMv2 switches, the controller). The state file and the
// teardown are lab_state.cc, the processes lab_process.cc.
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
#include "core/files.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/topology.h"
#include "http/address.h"
#include "northbound/api_client.h"
#include "southbound/switch_session.h"

namespace inac::lab {

// ---- planning ------------------------------------------------------------------------------

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
  auto text = core::ReadFile(path);
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
    for (const core::Problem& p : problems) {
      std::cerr << path << ": " << core::FormatProblem(p) << "\n";
    }
    return std::nullopt;
  }
  return topology;
}

// Names, addresses and ports of every host and switch; the problems that keep `topology` from
// being a lab (exit 2). About 80 lines: the host and switch halves share host_index and the
// <prefix>l<link> interface names, which must agree on both ends of every link.
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
      if (!http::SplitHostPort(s.p4runtime->address, &host, &sw.grpc_port).ok()) {
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
  std::vector<std::string> argv = {SelfExe(),  "serve",
                                   "--db",     lab->dir + "/inac.db",
                                   "--listen", absl::StrCat("127.0.0.1:", args.controller_port)};
  if (!args.algorithm.empty()) {
    argv.push_back("--algorithm");
    argv.push_back(args.algorithm);
  }
  if (!args.memory_policy.empty()) {
    argv.push_back("--memory-policy");
    argv.push_back(args.memory_policy);
  }
  auto process = SpawnDetached("controller", argv, log);
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
  auto client =
      northbound::ApiClient::Create(northbound::ApiClientOptions{lab->controller_url, "", 20000});
  if (!client.ok()) return client.status();
  auto reply = (*client)->Call("PUT", "/topology", core::TopologyToJson(topology));
  if (!reply.ok()) {
    return absl::Status(
        reply.status().code(),
        absl::StrCat("PUT ", lab->controller_url, "/api/v1/topology: ", reply.status().message()));
  }
  return absl::OkStatus();
}

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

}  // namespace inac::lab
