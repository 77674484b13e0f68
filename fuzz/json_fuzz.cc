// Fuzzes the strict JSON reader of core/json.h (ParseJsonText: every REST body, topology and job
// file goes through it) and the decoders behind it. Besides the sanitizers, it checks:
//   - a refusal appends exactly one Problem, with a message; an acceptance appends none;
//   - what is accepted prints (dump) and reads back to the same document;
//   - the decoders (TopologyFromJson, JobSpecFromJson, JobFromJson, JobPlanFromJson, PlanFromJson,
//     SwitchIntentFromJson) and ParseTopology / ParseJobsFile report problems and never throw
//     (an exception escaping is a crash to libFuzzer).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inac::core;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<Problem> problems;
  const std::optional<Json> json = ParseJsonText(text, &problems);
  if (!json) {
    FUZZ_CHECK(problems.size() == 1);
    FUZZ_CHECK(!problems[0].message.empty());
  } else {
    FUZZ_CHECK(problems.empty());
    const std::string printed = json->dump();
    std::vector<Problem> again;
    const std::optional<Json> back = ParseJsonText(printed, &again);
    FUZZ_CHECK(back.has_value());
    FUZZ_CHECK(*back == *json);

    std::vector<Problem> decoded;
    (void)TopologyFromJson(*json, &decoded);
    (void)JobSpecFromJson(*json, "", &decoded);
    (void)JobFromJson(*json);
    (void)JobPlanFromJson(*json);
    (void)PlanFromJson(*json);
    (void)SwitchIntentFromJson(*json);
  }
  std::vector<Problem> topology_problems;
  const std::optional<Topology> topology = ParseTopology(text, &topology_problems);
  FUZZ_CHECK(topology.has_value() == topology_problems.empty());
  std::vector<Problem> jobs_problems;
  const auto jobs = ParseJobsFile(text, topology ? &*topology : nullptr, &jobs_problems);
  FUZZ_CHECK(jobs.has_value() == jobs_problems.empty());
  return 0;
}
