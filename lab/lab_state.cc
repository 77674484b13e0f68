// The lab's state file (lab.json, docs/lab.md) and its teardown: what `inac lab up` records of
// the fabric it built (hosts, switches, namespaces, root interfaces, processes) and what `down`,
// `switch` and `link` read back. Declared in lab/lab.h; the planning and bring-up are
// lab_fabric.cc.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/topology.h"
#include "lab/lab.h"

namespace inac::lab {

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

}  // namespace inac::lab
