// Topology generators for tests, benchmarks and demos (`inac topo generate`: the fat-trees and
// leaf-spines of the figures in docs/routing.md and docs/memory.md), in the spirit of ONOS's
// providers/null simulators. Deterministic for a given seed.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/topology.h"

namespace inac::core {

// Which switches get INA capabilities.
struct InaPlacement {
  enum class Kind { kTor, kAll, kNone, kRandom };
  Kind kind = Kind::kTor;
  // For kRandom: exactly round(fraction * number of switches) switches, chosen uniformly with the
  // generator's seed.
  double fraction = 0;
};

// Parses "tor", "all", "none" or "random:FRACTION" (0 <= FRACTION <= 1).
absl::StatusOr<InaPlacement> ParseInaPlacement(const std::string& text);

struct GeneratorOptions {
  InaPlacement ina;
  uint64_t seed = 1;
  double link_gbps = 100;
  // Processing capacity of INA switches: uniform in [lo, hi] (lo == hi for a constant).
  double processing_gbps_lo = 400;
  double processing_gbps_hi = 400;
  int64_t aggregators = 20000;
  // When > 0, every switch gets a P4Runtime endpoint 127.0.0.1:(base + position) and device id
  // position + 1.
  int p4runtime_base_port = 0;
  // The target kind of those endpoints.
  TargetKind target = TargetKind::kEmulator;
};

// Parses "G" or "lo:hi" into the processing range of `options`.
absl::Status ParseProcessingRange(const std::string& text, GeneratorOptions* options);

// Fat-tree of even k >= 2: k²/4 core (c<i>), k²/2 aggregation (a<pod>_<i>), k²/2 edge switches
// (e<pod>_<i>) and hosts_per_edge hosts per edge switch (h<pod>_<edge>_<i>); hosts_per_edge
// defaults to k/2, giving k³/4 hosts. "tor" placement makes the edge switches INA-capable.
// InvalidArgument for odd or non-positive k, or k > 64 (more hosts than a topology may have).
absl::StatusOr<Topology> GenerateFatTree(int k, const GeneratorOptions& options,
                                         int hosts_per_edge = -1);

// Leaf-spine: `spines` spines (sp<i>), `leaves` leaves (lf<i>) each linked to every spine, and
// hosts_per_leaf hosts per leaf (h<leaf>_<i>). "tor" makes the leaves INA-capable.
absl::StatusOr<Topology> GenerateLeafSpine(int leaves, int spines, int hosts_per_leaf,
                                           const GeneratorOptions& options);

// Star: one switch (s0) with `hosts` hosts (h0 .. h<hosts-1>) on it, the smallest fabric with
// in-network aggregation ("tor" or "all" make s0 INA-capable): what `inac lab` starts first.
// InvalidArgument for fewer than 1 or more than 1024 hosts.
absl::StatusOr<Topology> GenerateStar(int hosts, const GeneratorOptions& options);

}  // namespace inac::core
