// Semantic validation of topologies and jobs. Every check reports *every* problem it finds, each
// with the JSON path of the offending value (`links[3].b: unknown node "s9"`), so a user can fix a
// file in one pass. Decoding problems (wrong types, unknown fields) come from core/json.h in the
// same form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {

// ---------------------------------------------------------------------------------------------
// Input limits: every string, array and number of a topology or job spec has a bound, all of them
// here, documented in docs/formats.md ("Limits") and api/openapi.yaml. They exist so that one
// request cannot make the controller store or answer unbounded data, and so that typos
// (1e-300 Gbps, a 10^12 batch) are refused rather than planned. Sizes of strings are in bytes of
// UTF-8. The array bounds leave room for a fat-tree k = 64 (5120 switches, 65536 hosts, 196608
// links).

// JSON text (ParseJsonText): arrays and objects nested at most this deep (the document's own
// object is level 1; the deepest input, a topology, needs 4).
inline constexpr int kMaxJsonDepth = 64;

// Ids of switches, hosts and links, and the tenant, use only ASCII letters, digits and
// kIdPunctuation, and start with a letter or a digit: they appear unescaped in REST paths
// (/switches/{id}, /links/{id}), query strings, Prometheus labels and key=value log lines. No '/',
// no spaces, no control characters.
inline constexpr std::string_view kIdPunctuation = "._-~:@+";
inline constexpr size_t kMaxIdBytes = 128;  // switch and host ids (and job worker/PS references)
// A link id; room for the default "a~b" of two maximal node ids.
inline constexpr size_t kMaxLinkIdBytes = 2 * kMaxIdBytes + 1;
inline constexpr size_t kMaxTenantBytes = 63;  // a DNS label's length
// Free text: any UTF-8 but control characters (U+0000-U+001F, U+007F-U+009F).
inline constexpr size_t kMaxJobNameBytes = 256;
// switches[].p4runtime.address: "host:port" (or a gRPC target such as "unix:/run/s1.sock"),
// printable ASCII without spaces.
inline constexpr size_t kMaxAddressBytes = 255;
// hosts[].address: dotted IPv4 ("255.255.255.255"; leading zeros do not make it longer).
inline constexpr size_t kMaxIpv4Bytes = 15;

// Arrays.
inline constexpr size_t kMaxSwitches = 16384;
inline constexpr size_t kMaxHosts = 65536;
inline constexpr size_t kMaxLinks = 262144;
inline constexpr size_t kMaxWorkersPerJob = 16384;
// Parameter servers per job: kMaxParameterServersPerJob (8, core/plan.h: the tag's room).
inline constexpr size_t kMaxBatchSizeChoices = 64;
inline constexpr size_t kMaxJobsPerFile = 10000;  // {"jobs": [...]} files

// Numbers (closed ranges).
// Capacities (link gbps, host ingress_gbps, switch processing_gbps), Gbps: below 1 Mbps is a typo
// (or 1e-300), above 10^6 is not hardware. A switch that is not INA-capable may say 0.
inline constexpr double kMinGbps = 0.001;
inline constexpr double kMaxGbps = 1e6;
inline constexpr double kMaxLatencyUs = 1e7;               // links[].latency_us in [0, 10 s]
inline constexpr int64_t kMaxAggregators = 1'000'000'000;  // switches[].ina.aggregators in [0, .]
inline constexpr int kMaxAggregatorBytes = 65536;          // a positive multiple of 4
inline constexpr uint32_t kMaxPort = 511;                  // links[].a_port/b_port in [1, .]
inline constexpr int kMaxPriority = 1'000'000;             // priority in [-kMaxPriority, .]
inline constexpr int64_t kMaxGradientBytes = int64_t{1} << 42;  // gradient_bytes in [1, 4 TiB]
inline constexpr double kMaxComputeMs = 1e8;                    // compute_ms in [0, .]
inline constexpr int64_t kMaxIterations = 1'000'000'000;        // iterations in [1, .]
inline constexpr int kMaxBatchSize = 1 << 20;                   // batch_size(s) in [1, .]

// Problems reported at most by FormatProblems / ProblemsError (the rest are counted): an answer
// to a bad 1 MiB body stays small.
inline constexpr size_t kMaxReportedProblems = 100;

// Empty when `id` is a valid id of at most `max_bytes` bytes (letters, digits, kIdPunctuation,
// starting with a letter or digit), else what is wrong, e.g. "invalid character '/' at byte 3
// (ids use letters, digits and ._-~:@+, starting with a letter or digit)". For callers outside core
// that take ids or tenants (query parameters, configuration files).
std::string IdProblem(std::string_view id, size_t max_bytes);
// Empty when `text` is at most `max_bytes` bytes without control characters, else what is wrong.
// Precondition: `text` is valid UTF-8 (JSON strings are).
std::string TextProblem(std::string_view text, size_t max_bytes);
// `text` in double quotes for a message; cut to its first 64 bytes (at a UTF-8 character boundary)
// plus "..." when longer, so an answer never echoes a huge input.
std::string QuoteForMessage(std::string_view text);
// `text` safe to write into a `key=value` log line or a terminal: printable ASCII other than space,
// `\` and `"` is kept; every other byte (control characters, ESC, DEL, space, non-ASCII) becomes
// `\xHH`, and `\` and `"` become `\\` and `\"`. So a request-derived string (a path, a method, a
// token name) can neither end a log line and forge the next one, nor add a key, nor reach a
// terminal as an escape sequence. Reversible; the empty string stays empty.
std::string EscapeForLog(std::string_view text);

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
// One problem per line; beyond kMaxReportedProblems, one last line "... and N more problems".
std::string FormatProblems(const std::vector<Problem>& problems);
// InvalidArgument with FormatProblems as message and the first problem's path as its field
// (core/status.h WithField). Precondition: `problems` is not empty.
absl::Status ProblemsError(const std::vector<Problem>& problems);

// Checks ids (non-empty, unique, kMaxIdBytes / kMaxLinkIdBytes, IdProblem), references, array
// sizes (kMaxSwitches, kMaxHosts, kMaxLinks), numbers against the limits above (capacities in
// [kMinGbps, kMaxGbps]), addresses and ports, that every host has a link, and that the graph is
// connected.
std::vector<Problem> ValidateTopology(const Topology& topology);

// Checks one job spec on its own (`path` prefixes every problem, e.g. "jobs[2]"): strings, arrays
// and numbers against the limits above, worker and PS references as ids. When `topology`
// is non-null also checks that every worker and PS is a host of it and that they are connected
// over links that are up. Precondition: `topology`, if given, is valid.
std::vector<Problem> ValidateJobSpec(const JobSpec& spec, const Topology* topology,
                                     const std::string& path = "");

}  // namespace inac::core
