// The network INAC controls: programmable switches, hosts (workers and parameter servers) and
// full-duplex links. Plain value types plus `Graph`, an indexed view used for path finding and
// connectivity checks. File format: docs/formats.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace inac::core {

// Default size of one aggregator: k = 62 int32 lanes (docs/memory.md section 1).
inline constexpr int kDefaultAggregatorBytes = 248;

// In-network-aggregation capabilities of a switch.
struct InaConfig {
  bool capable = false;
  // Input gradient rate the switch can aggregate (C_v), Gbps. 0 when not capable.
  double processing_gbps = 0;
  // Aggregator memory (A_v), in aggregators.
  int64_t aggregators = 0;
  int aggregator_bytes = kDefaultAggregatorBytes;

  bool operator==(const InaConfig&) const = default;
};

// What kind of device serves a switch's P4Runtime endpoint. It selects the device config the
// controller pushes with the P4Info (SetForwardingPipelineConfig.p4_device_config):
//   kEmulator  `inac switch`: no device config (the emulator accepts and returns any it is given)
//   kBmv2      BMv2 simple_switch_grpc: p4c's BMv2 JSON of api/p4/ina.p4 (api/p4/ina.json)
//   kTofino    reserved: parsed, but validation refuses it until a Tofino build of ina.p4 exists
enum class TargetKind { kEmulator, kBmv2, kTofino };

// "emulator", "bmv2", "tofino".
const char* TargetKindName(TargetKind kind);
// nullopt for any other string.
std::optional<TargetKind> ParseTargetKind(const std::string& name);

// Where the switch's P4Runtime server listens. Optional: planning-only topologies omit it.
struct P4RuntimeEndpoint {
  std::string address;  // "host:port"
  uint64_t device_id = 0;
  // The device behind the endpoint. Absent in a file: kEmulator (files written before targets
  // existed addressed `inac switch` processes).
  TargetKind target = TargetKind::kEmulator;

  bool operator==(const P4RuntimeEndpoint&) const = default;
};

struct Switch {
  std::string id;
  InaConfig ina;
  std::optional<P4RuntimeEndpoint> p4runtime;

  bool operator==(const Switch&) const = default;
};

struct Host {
  std::string id;
  // Ingress capacity (B_s for a parameter server). Unset: the sum of the host's link capacities.
  std::optional<double> ingress_gbps;
  // IPv4 address in dotted form. Unset: derived from the host's position (see NodeAddress).
  std::optional<std::string> address;

  bool operator==(const Host&) const = default;
};

enum class LinkStatus { kUp, kDown };

// A full-duplex link: two directed arcs of `gbps` each.
struct Link {
  std::string id;  // default "a~b"
  std::string a;
  std::string b;
  double gbps = 0;
  std::optional<double> latency_us;
  LinkStatus status = LinkStatus::kUp;
  // Switch port numbers at each end (P4 egress ports). Unset: 1-based position of the link among
  // the links of that switch, in document order.
  std::optional<uint32_t> a_port;
  std::optional<uint32_t> b_port;

  bool operator==(const Link&) const = default;
};

struct Topology {
  std::vector<Switch> switches;
  std::vector<Host> hosts;
  std::vector<Link> links;

  bool operator==(const Topology&) const = default;

  // Lookups by id; nullptr when absent. Linear scans: use Graph for hot paths.
  const Switch* FindSwitch(const std::string& id) const;
  const Host* FindHost(const std::string& id) const;
  const Link* FindLink(const std::string& id) const;
  Link* FindLink(const std::string& id);
};

// The default id of a link between `a` and `b`.
std::string DefaultLinkId(const std::string& a, const std::string& b);

// Indexed, immutable view of a Topology. Node indices: switches first (document order), then hosts.
// Arc 2*i is link i from a to b, arc 2*i+1 is link i from b to a. Links that are down keep their
// arcs but are not in the adjacency lists. Precondition: the topology is valid (ValidateTopology
// returned no problems); an unknown endpoint is an assertion failure.
class Graph {
 public:
  explicit Graph(const Topology& topology);

  struct Arc {
    int from;
    int to;
    int link;  // index into Topology::links
    double gbps;
  };

  int num_nodes() const { return static_cast<int>(names_.size()); }
  int num_switches() const { return num_switches_; }
  int num_arcs() const { return static_cast<int>(arcs_.size()); }
  bool is_switch(int node) const { return node < num_switches_; }
  bool is_host(int node) const { return node >= num_switches_; }
  const std::string& name(int node) const { return names_[node]; }
  // -1 when unknown.
  int index(const std::string& id) const;
  const Arc& arc(int a) const { return arcs_[a]; }
  // Arcs leaving `node` over links that are up.
  const std::vector<int>& out_arcs(int node) const { return out_[node]; }
  // Arc from `from` to `to` over an up link with the highest capacity; -1 if none.
  int ArcBetween(int from, int to) const;

  // INA properties of a node (false / 0 for hosts).
  bool ina_capable(int node) const;
  double processing_gbps(int node) const;
  int64_t aggregators(int node) const;
  // Host ingress capacity: Host::ingress_gbps or the sum of its up links' capacities.
  double host_ingress_gbps(int node) const;
  // The switch a host attaches to (its first up link's other end); -1 if none.
  int tor_of(int host) const;

  // Node ids reachable from `start` over up links.
  std::vector<bool> Reachable(int start) const;

  const Topology& topology() const { return *topology_; }

 private:
  const Topology* topology_;  // Not owned; must outlive the Graph.
  int num_switches_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> index_;
  std::vector<Arc> arcs_;
  std::vector<std::vector<int>> out_;
};

// The IPv4 address (host byte order) of a node: Host::address when set, otherwise 10.0.0.0/16 +
// (host position + 1) for hosts and 10.255.0.0/16 + (switch position + 1) for switches.
// Returns 0 for an unknown id.
uint32_t NodeAddress(const Topology& topology, const std::string& node_id);

// The port number of `link` at switch `switch_id`: the explicit a_port/b_port or the default
// (1-based position among that switch's links in document order). 0 if the link does not touch the
// switch.
uint32_t PortOf(const Topology& topology, const std::string& switch_id, int link_index);

// Parses/prints dotted IPv4. Parse returns nullopt on a malformed string.
std::optional<uint32_t> ParseIpv4(const std::string& text);
std::string FormatIpv4(uint32_t address);

}  // namespace inac::core
