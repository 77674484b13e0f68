// Helpers for the storage tests: a temporary directory removed at the end of the test, sample
// domain values, and whole-file reads for "the file was not modified" checks.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"
#include "tests/fixtures/temp_dir.h"

namespace inac::storage::testing {

using fixtures::TempDir;  // tests/fixtures/temp_dir.h

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline core::JobSpec SampleSpec(const std::string& name, const std::string& tenant = "default") {
  core::JobSpec spec;
  spec.name = name;
  spec.tenant = tenant;
  spec.priority = 3;
  spec.workers = {"h0_0_0", "h0_0_1", "h0_1_0"};
  spec.parameter_servers = {"h1_0_0"};
  spec.allreduce = core::AllReduce::kPs;
  spec.gradient_bytes = 102'760'448;
  spec.compute_ms = 52.5;
  spec.iterations = 1000;
  spec.batch_size = 64;
  spec.batch_sizes = {32, 64, 128};
  return spec;
}

inline core::Topology SampleTopology() {
  core::Topology t;
  core::Switch s;
  s.id = "s1";
  s.ina.capable = true;
  s.ina.processing_gbps = 400;
  s.ina.aggregators = 20000;
  t.switches.push_back(s);
  core::Host h1;
  h1.id = "h1";
  core::Host h2;
  h2.id = "h2";
  h2.ingress_gbps = 50.0;
  h2.address = "10.0.0.9";
  t.hosts = {h1, h2};
  core::Link l1;
  l1.id = "h1~s1";
  l1.a = "h1";
  l1.b = "s1";
  l1.gbps = 100;
  core::Link l2 = l1;
  l2.id = "h2~s1";
  l2.a = "h2";
  t.links = {l1, l2};
  return t;
}

inline core::Plan SamplePlan(core::JobId job_id) {
  core::Plan plan;
  plan.algorithm = "grid";
  plan.solve_ms = 1.5;
  core::JobPlan jp;
  jp.job_id = job_id;
  jp.ps_shares = {{"h2", 1.0}};
  core::FlowPlan flow;
  flow.worker = "h1";
  flow.ps = "h2";
  flow.aggregation_node = "s1";
  flow.path = {"h1", "s1"};
  jp.flows.push_back(flow);
  core::AggregatorPlan aggregator;
  aggregator.switch_id = "s1";
  aggregator.ps = "h2";
  aggregator.path = {"s1", "h2"};
  jp.aggregator_paths.push_back(aggregator);
  jp.aggregators = {{"s1", 128}};
  jp.batch_size = 64;
  jp.priority = 3;
  jp.rate_gbps = 42.5;
  jp.comm_ms = 10;
  jp.iteration_ms = 60;
  plan.jobs.push_back(jp);
  return plan;
}

inline core::SwitchIntent SampleIntent(const std::string& switch_id, core::JobId job_id) {
  core::SwitchIntent intent;
  intent.switch_id = switch_id;
  core::JobAggregationIntent aggregation;
  aggregation.job_id = job_id;
  aggregation.fan_in = 2;
  aggregation.input_bitmap = 3;
  aggregation.multicast_group = 7;
  aggregation.aggregator_count = 128;
  aggregation.priority = 3;
  aggregation.upstream_address = 0x0a000002;
  intent.jobs.push_back(aggregation);
  core::AggregationInputIntent input;
  input.job_id = job_id;
  input.source_address = 0x0a000001;
  intent.inputs.push_back(input);
  core::RouteIntent route;
  route.job_id = job_id;
  route.source_address = 0x0a000001;
  route.destination_address = 0x0a000002;
  route.egress_port = 2;
  intent.routes.push_back(route);
  core::MulticastGroupIntent group;
  group.group_id = 7;
  group.job_id = job_id;
  group.egress_ports = {1, 2};
  intent.multicast_groups.push_back(group);
  return intent;
}

}  // namespace inac::storage::testing
