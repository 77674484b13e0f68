#include "core/topology.h"

#include <cassert>
#include <cstdio>
#include <deque>

namespace inac::core {

const char* TargetKindName(TargetKind kind) {
  switch (kind) {
    case TargetKind::kEmulator:
      return "emulator";
    case TargetKind::kBmv2:
      return "bmv2";
    case TargetKind::kTofino:
      return "tofino";
  }
  return "emulator";
}

std::optional<TargetKind> ParseTargetKind(const std::string& name) {
  for (TargetKind kind : {TargetKind::kEmulator, TargetKind::kBmv2, TargetKind::kTofino}) {
    if (name == TargetKindName(kind)) return kind;
  }
  return std::nullopt;
}

const Switch* Topology::FindSwitch(const std::string& id) const {
  for (const Switch& s : switches) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

const Host* Topology::FindHost(const std::string& id) const {
  for (const Host& h : hosts) {
    if (h.id == id) return &h;
  }
  return nullptr;
}

const Link* Topology::FindLink(const std::string& id) const {
  for (const Link& l : links) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

Link* Topology::FindLink(const std::string& id) {
  for (Link& l : links) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

std::string DefaultLinkId(const std::string& a, const std::string& b) { return a + "~" + b; }

Graph::Graph(const Topology& topology) : topology_(&topology) {
  num_switches_ = static_cast<int>(topology.switches.size());
  names_.reserve(topology.switches.size() + topology.hosts.size());
  for (const Switch& s : topology.switches) names_.push_back(s.id);
  for (const Host& h : topology.hosts) names_.push_back(h.id);
  index_.reserve(names_.size());
  for (int i = 0; i < static_cast<int>(names_.size()); ++i) index_.emplace(names_[i], i);
  out_.resize(names_.size());
  arcs_.reserve(topology.links.size() * 2);
  for (int i = 0; i < static_cast<int>(topology.links.size()); ++i) {
    const Link& l = topology.links[i];
    int a = index(l.a);
    int b = index(l.b);
    assert(a >= 0 && b >= 0 && "Graph built from an invalid topology");
    arcs_.push_back(Arc{a, b, i, l.gbps});
    arcs_.push_back(Arc{b, a, i, l.gbps});
    if (l.status == LinkStatus::kUp) {
      out_[a].push_back(2 * i);
      out_[b].push_back(2 * i + 1);
    }
  }
}

int Graph::index(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

int Graph::ArcBetween(int from, int to) const {
  int best = -1;
  for (int a : out_[from]) {
    if (arcs_[a].to == to && (best < 0 || arcs_[a].gbps > arcs_[best].gbps)) best = a;
  }
  return best;
}

bool Graph::ina_capable(int node) const {
  return is_switch(node) && topology_->switches[node].ina.capable;
}

double Graph::processing_gbps(int node) const {
  return ina_capable(node) ? topology_->switches[node].ina.processing_gbps : 0.0;
}

int64_t Graph::aggregators(int node) const {
  return ina_capable(node) ? topology_->switches[node].ina.aggregators : 0;
}

double Graph::host_ingress_gbps(int node) const {
  if (!is_host(node)) return 0;
  const Host& h = topology_->hosts[node - num_switches_];
  if (h.ingress_gbps) return *h.ingress_gbps;
  double sum = 0;
  for (int a : out_[node]) sum += arcs_[a].gbps;
  return sum;
}

int Graph::tor_of(int host) const {
  for (int a : out_[host]) {
    if (is_switch(arcs_[a].to)) return arcs_[a].to;
  }
  return -1;
}

std::vector<bool> Graph::Reachable(int start) const {
  std::vector<bool> seen(names_.size(), false);
  if (start < 0 || start >= num_nodes()) return seen;
  std::deque<int> queue{start};
  seen[start] = true;
  while (!queue.empty()) {
    int n = queue.front();
    queue.pop_front();
    for (int a : out_[n]) {
      int m = arcs_[a].to;
      if (!seen[m]) {
        seen[m] = true;
        queue.push_back(m);
      }
    }
  }
  return seen;
}

uint32_t NodeAddress(const Topology& topology, const std::string& node_id) {
  for (size_t i = 0; i < topology.hosts.size(); ++i) {
    const Host& h = topology.hosts[i];
    if (h.id != node_id) continue;
    if (h.address) {
      if (auto parsed = ParseIpv4(*h.address)) return *parsed;
    }
    return (10u << 24) + static_cast<uint32_t>(i + 1);
  }
  for (size_t i = 0; i < topology.switches.size(); ++i) {
    if (topology.switches[i].id == node_id) {
      return (10u << 24) + (255u << 16) + static_cast<uint32_t>(i + 1);
    }
  }
  return 0;
}

uint32_t PortOf(const Topology& topology, const std::string& switch_id, int link_index) {
  if (link_index < 0 || link_index >= static_cast<int>(topology.links.size())) return 0;
  const Link& target = topology.links[link_index];
  if (target.a == switch_id && target.a_port) return *target.a_port;
  if (target.b == switch_id && target.b_port) return *target.b_port;
  if (target.a != switch_id && target.b != switch_id) return 0;
  uint32_t position = 0;
  for (int i = 0; i <= link_index; ++i) {
    const Link& l = topology.links[i];
    if (l.a == switch_id || l.b == switch_id) ++position;
  }
  return position;
}

std::optional<uint32_t> ParseIpv4(const std::string& text) {
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return std::nullopt;
  if (a > 255 || b > 255 || c > 255 || d > 255) return std::nullopt;
  // Reject forms like "1.2.3.+4" or leading spaces that sscanf tolerates.
  for (char ch : text) {
    if (ch != '.' && (ch < '0' || ch > '9')) return std::nullopt;
  }
  return (a << 24) | (b << 16) | (c << 8) | d;
}

std::string FormatIpv4(uint32_t address) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%u.%u.%u.%u", address >> 24, (address >> 16) & 255,
                (address >> 8) & 255, address & 255);
  return buf;
}

}  // namespace inac::core
