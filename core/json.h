// JSON codecs for the domain types: the one module of core that sees nlohmann-json. Shared by
// storage (JSON columns), server (REST bodies) and the CLI (files). Field names are snake_case;
// the formats are documented in docs/formats.md.
//
// Decoders are strict: repeated keys, unknown fields, wrong types and missing required fields are
// reported as Problems with JSON paths, never thrown; the limits on values are checked by
// core/validation.h (ParseTopology and ParseJobsFile do both). Encoders are total.
// Decode(Encode(x)) == x for every valid value (round-trip tested).
//
// Implemented by topic: the strict reader in core/json_reader.cc, the codecs in
// core/json_topology.cc, core/json_jobs.cc and core/json_plan.cc, over the field reader they share
// (core/json_fields.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"
#include "core/validation.h"

namespace inac::core {

// Insertion-ordered so documents print in their natural order (switches, hosts, links).
using Json = nlohmann::ordered_json;

// Parses text as strict JSON (RFC 8259 plus two rules the RFC leaves open): a key repeated in one
// object, at any depth, and nesting of arrays and objects deeper than kMaxJsonDepth
// (core/validation.h) are refused. Returns nullopt and appends one Problem on any refusal: a
// syntax error (path empty, message "malformed JSON: ..." with the offset; this includes numbers
// that overflow a double), a repeated key (path of the key, e.g. "links[3].gbps", message
// `duplicate key "gbps"`) or too deep a nesting (path of the container that is one too deep).
// Time and memory are linear in the text, whatever its shape.
std::optional<Json> ParseJsonText(std::string_view text, std::vector<Problem>* problems);

// --- Topology ---
Json TopologyToJson(const Topology& topology);
// Appends decoding problems; the returned value holds whatever decoded cleanly.
Topology TopologyFromJson(const Json& json, std::vector<Problem>* problems);
// Text -> decoded -> validated. nullopt if any problem was found (all appended to `problems`).
std::optional<Topology> ParseTopology(std::string_view text, std::vector<Problem>* problems);

// --- Jobs ---
Json JobSpecToJson(const JobSpec& spec);
// Decodes one job spec; `path` prefixes problem paths. A `model` fills gradient_bytes and
// compute_ms when they are absent. `allreduce` defaults to "ring" when parameter_servers is empty.
JobSpec JobSpecFromJson(const Json& json, const std::string& path, std::vector<Problem>* problems);
// A job file: {"jobs": [JobSpec...]}, 1 to kMaxJobsPerFile jobs. Validated against `topology`
// when non-null.
std::optional<std::vector<JobSpec>> ParseJobsFile(std::string_view text, const Topology* topology,
                                                  std::vector<Problem>* problems);
Json JobsFileToJson(const std::vector<JobSpec>& specs);

Json JobToJson(const Job& job);
absl::StatusOr<Job> JobFromJson(const Json& json);

// --- Plans and intents ---
Json JobPlanToJson(const JobPlan& plan);
absl::StatusOr<JobPlan> JobPlanFromJson(const Json& json);
Json PlanToJson(const Plan& plan);
absl::StatusOr<Plan> PlanFromJson(const Json& json);
Json SwitchIntentToJson(const SwitchIntent& intent);
absl::StatusOr<SwitchIntent> SwitchIntentFromJson(const Json& json);

// Enum names as they appear in files.
std::string_view AllReduceName(AllReduce mode);
std::string_view LinkStatusName(LinkStatus status);
std::optional<LinkStatus> ParseLinkStatus(std::string_view name);

}  // namespace inac::core
