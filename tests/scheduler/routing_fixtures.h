// Shared helpers of the routing tests: loading the examples/ instances, GRID's setting. The sample
// jobs are in tests/fixtures/sample_jobs.h.
#pragma once

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/generators.h"
#include "core/json.h"
#include "scheduler/model/planning_input.h"
#include "tests/fixtures/sample_jobs.h"

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

// GRID's simulation setting (bench/routing_bench.cc): fat-tree k=8, 6 hosts per edge switch,
// 100 Gbps links, processing uniform in [100, 3200] Gbps, INA by `placement` ("tor",
// "random:0.2"), one job (id 1) of `workers` random hosts and a PS of 100 Gbps ingress.
inline PlanningInput GridSetting(uint64_t seed, int workers, const char* placement) {
  core::GeneratorOptions o;
  o.seed = seed;
  o.ina = *core::ParseInaPlacement(placement);
  o.link_gbps = 100;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  auto t = core::GenerateFatTree(8, o, 6);
  EXPECT_TRUE(t.ok()) << t.status();
  PlanningInput in;
  in.topology = *t;
  in.seed = seed;
  std::vector<std::string> hosts;
  for (const auto& h : in.topology.hosts) hosts.push_back(h.id);
  std::mt19937_64 rng(seed * 7919 + workers);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  std::vector<std::string> w(hosts.begin(), hosts.begin() + workers);
  for (auto& h : in.topology.hosts) {
    if (h.id == hosts[workers]) h.ingress_gbps = 100;
  }
  in.jobs.push_back(JobInput{1, fixtures::PsJobSpec("j", w, {hosts[workers]})});
  return in;
}

}  // namespace inac::scheduler::testing
