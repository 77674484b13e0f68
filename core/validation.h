// Semantic validation of topologies and jobs. Every check reports *every* problem it finds, each
// with the JSON path of the offending value (`links[3].b: unknown node "s9"`), so a user can fix a
// file in one pass. Decoding problems (wrong types, unknown fields) come from core/json.h in the
// same form.
#pragma once

#include <string>
#include <vector>

#include "core/job.h"
#include "core/topology.h"

namespace inac::core {

// Largest capacity accepted anywhere, Gbps: larger values are typos, not hardware.
inline constexpr double kMaxGbps = 1e6;

struct Problem {
  std::string path;  // JSON path, e.g. "links[3].b"; empty for whole-document problems
  std::string message;

  bool operator==(const Problem&) const = default;
};

// "path: message" (or just the message when the path is empty).
std::string FormatProblem(const Problem& problem);
// One problem per line.
std::string FormatProblems(const std::vector<Problem>& problems);

// Checks ids (non-empty, unique), references, capacities (positive, finite, <= kMaxGbps),
// addresses and ports, that every host has a link, and that the graph is connected.
std::vector<Problem> ValidateTopology(const Topology& topology);

// Checks one job spec on its own (`path` prefixes every problem, e.g. "jobs[2]"). When `topology`
// is non-null also checks that every worker and PS is a host of it and that they are connected
// over links that are up. Precondition: `topology`, if given, is valid.
std::vector<Problem> ValidateJobSpec(const JobSpec& spec, const Topology* topology,
                                     const std::string& path = "");

}  // namespace inac::core
