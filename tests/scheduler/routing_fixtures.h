// Shared helpers of the routing tests: loading the examples/ instances. The sample jobs are in
// tests/fixtures/sample_jobs.h.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/json.h"
#include "scheduler/model/planning_input.h"

namespace inac::scheduler::testing {

inline std::string ReadExample(const std::string& relative) {
  std::ifstream in(std::string(INAC_EXAMPLES_DIR) + "/" + relative);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The PlanningInput of examples/<folder>/{topology,jobs}.json; job ids 1, 2, ...
inline PlanningInput LoadExample(const std::string& folder) {
  PlanningInput input;
  std::vector<core::Problem> problems;
  auto topology = core::ParseTopology(ReadExample(folder + "/topology.json"), &problems);
  EXPECT_TRUE(topology.has_value()) << core::FormatProblems(problems);
  if (!topology) return input;
  input.topology = *topology;
  auto jobs = core::ParseJobsFile(ReadExample(folder + "/jobs.json"), &input.topology, &problems);
  EXPECT_TRUE(jobs.has_value()) << core::FormatProblems(problems);
  if (!jobs) return input;
  for (size_t i = 0; i < jobs->size(); ++i) {
    input.jobs.push_back(JobInput{static_cast<core::JobId>(i + 1), (*jobs)[i]});
  }
  return input;
}

}  // namespace inac::scheduler::testing
