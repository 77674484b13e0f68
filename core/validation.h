// Semantic validation of topologies and jobs. Every check reports *every* problem it finds, each
// with the JSON path of the offending value (`links[3].b: unknown node "s9"`), so a user can fix a
// file in one pass. Decoding problems (wrong types, unknown fields) come from core/json.h in the
// same form.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/job.h"
#include "core/topology.h"

namespace inac::core {

// Largest capacity accepted anywhere, Gbps: larger values are typos, not hardware.
inline constexpr double kMaxGbps = 1e6;

// What kind of problem, for callers that act on it (the controller fails a job whose hosts left
// the topology, but waits for one that is only unreachable): never parsed from the message.
enum class ProblemKind {
  kInvalid,      // the document itself is wrong
  kUnknownNode,  // it names a node the topology does not have (or a switch where a host belongs)
  kUnreachable,  // the nodes exist but are not connected over links that are up
};

struct Problem {
  std::string path;  // JSON path, e.g. "links[3].b"; empty for whole-document problems
  std::string message;
  ProblemKind kind = ProblemKind::kInvalid;

  bool operator==(const Problem&) const = default;
};

// "path: message" (or just the message when the path is empty).
std::string FormatProblem(const Problem& problem);
// One problem per line.
std::string FormatProblems(const std::vector<Problem>& problems);
// InvalidArgument with FormatProblems as message and the first problem's path as its field
// (core/status.h WithField). Precondition: `problems` is not empty.
absl::Status ProblemsError(const std::vector<Problem>& problems);

// Checks ids (non-empty, unique), references, capacities (positive, finite, <= kMaxGbps),
// addresses and ports, that every host has a link, and that the graph is connected.
std::vector<Problem> ValidateTopology(const Topology& topology);

// Checks one job spec on its own (`path` prefixes every problem, e.g. "jobs[2]"). When `topology`
// is non-null also checks that every worker and PS is a host of it and that they are connected
// over links that are up. Precondition: `topology`, if given, is valid.
std::vector<Problem> ValidateJobSpec(const JobSpec& spec, const Topology* topology,
                                     const std::string& path = "");

}  // namespace inac::core
