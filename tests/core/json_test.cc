#include "core/json.h"

#include <gtest/gtest.h>

#include "core/generators.h"

namespace inac::core {
namespace {

TEST(JsonTest, TopologyRoundTrip) {
  GeneratorOptions o;
  o.ina = ParseInaPlacement("random:0.5").value();
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 900;
  o.p4runtime_base_port = 9000;
  Topology t = GenerateFatTree(4, o).value();
  t.hosts[2].ingress_gbps = 40;
  t.hosts[3].address = "192.168.0.7";
  t.links[5].status = LinkStatus::kDown;
  t.links[6].latency_us = 2.5;
  t.links[7].a_port = 30;
  std::vector<Problem> problems;
  Topology back = TopologyFromJson(TopologyToJson(t), &problems);
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
  EXPECT_EQ(back, t);
  // And through text.
  auto parsed = ParseTopology(TopologyToJson(t).dump(), &problems);
  ASSERT_TRUE(parsed.has_value()) << FormatProblems(problems);
  EXPECT_EQ(*parsed, t);
}

TEST(JsonTest, P4RuntimeTargetKind) {
  std::vector<Problem> problems;
  auto parse = [&](const std::string& endpoint) {
    problems.clear();
    return ParseTopology(
        R"({"switches": [{"id": "s1", "p4runtime": )" + endpoint +
            R"(}], "hosts": [{"id": "h1"}], "links": [{"a": "h1", "b": "s1", "gbps": 1}]})",
        &problems);
  };
  // Absent: the emulator (files written before target kinds existed).
  auto legacy = parse(R"({"address": "127.0.0.1:9559", "device_id": 1})");
  ASSERT_TRUE(legacy.has_value()) << FormatProblems(problems);
  EXPECT_EQ(legacy->switches[0].p4runtime->target, TargetKind::kEmulator);
  auto bmv2 = parse(R"({"address": "127.0.0.1:9559", "device_id": 1, "target": "bmv2"})");
  ASSERT_TRUE(bmv2.has_value()) << FormatProblems(problems);
  EXPECT_EQ(bmv2->switches[0].p4runtime->target, TargetKind::kBmv2);
  EXPECT_EQ(TopologyToJson(*bmv2)["switches"][0]["p4runtime"]["target"], "bmv2");
  EXPECT_EQ(TopologyFromJson(TopologyToJson(*bmv2), &problems), *bmv2);
  for (TargetKind kind : {TargetKind::kEmulator, TargetKind::kBmv2, TargetKind::kTofino}) {
    EXPECT_EQ(ParseTargetKind(TargetKindName(kind)), kind);
  }
  EXPECT_FALSE(ParseTargetKind("BMv2").has_value());
}

TEST(JsonTest, TopologyPrintsInDocumentOrder) {
  Topology t = GenerateFatTree(2, {}).value();
  std::string text = TopologyToJson(t).dump();
  EXPECT_LT(text.find("switches"), text.find("hosts"));
  EXPECT_LT(text.find("hosts"), text.find("links"));
}

JobSpec Spec() {
  JobSpec s;
  s.name = "bert";
  s.tenant = "nlp";
  s.priority = -3;
  s.workers = {"h1", "h2"};
  s.parameter_servers = {"ps1"};
  s.gradient_bytes = 123456789;
  s.compute_ms = 229.5;
  s.iterations = 1000;
  s.batch_size = 32;
  s.batch_sizes = {16, 32, 64};
  s.model = "BERT-large";
  return s;
}

TEST(JsonTest, JobSpecAndJobRoundTrip) {
  std::vector<Problem> problems;
  JobSpec s = Spec();
  EXPECT_EQ(JobSpecFromJson(JobSpecToJson(s), "", &problems), s);
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
  Job job;
  job.id = 42;
  job.spec = s;
  job.state = JobState::kRunning;
  job.iterations_done = 17;
  job.loss = 0.25;
  job.created_ms = 1700000000000;
  job.updated_ms = 1700000000500;
  auto back = JobFromJson(JobToJson(job));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, job);
  Job failed = job;
  failed.state = JobState::kFailed;
  failed.failure_reason = "no route";
  failed.loss.reset();
  EXPECT_EQ(JobFromJson(JobToJson(failed)).value(), failed);
}

TEST(JsonTest, JobsFileRoundTrip) {
  std::vector<JobSpec> specs = {Spec(), Spec()};
  specs[1].name = "second";
  std::vector<Problem> problems;
  auto back = ParseJobsFile(JobsFileToJson(specs).dump(), nullptr, &problems);
  ASSERT_TRUE(back.has_value()) << FormatProblems(problems);
  EXPECT_EQ(*back, specs);
}

TEST(JsonTest, JobFromJsonRejectsBadState) {
  Json j = JobToJson(Job{});
  j["state"] = "dreaming";
  auto back = JobFromJson(j);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("unknown job state \"dreaming\""), std::string::npos);
}

TEST(JsonTest, PlanRoundTrip) {
  Plan plan;
  plan.version = 7;
  plan.algorithm = "grid";
  plan.fingerprint = "topo=3;jobs=3:5";
  plan.solve_ms = 12.5;
  JobPlan jp;
  jp.job_id = 3;
  jp.ps_shares = {{"ps1", 0.75}, {"ps2", 0.25}};
  jp.flows = {{"h1", "ps1", "s1", {"h1", "s1"}}, {"h2", "ps2", "ps2", {"h2", "s1", "s2", "ps2"}}};
  jp.flows[1].fraction = 0.25;
  jp.aggregator_paths = {{"s1", "ps1", {"s1", "s2", "ps1"}}};
  jp.aggregators = {{"s1", 512}};
  jp.batch_size = 64;
  jp.priority = 5;
  jp.rate_gbps = 2.4375;
  jp.lp_bound_gbps = 3;
  jp.comm_ms = 100;
  jp.iteration_ms = 355;
  plan.jobs.push_back(jp);
  JobPlan ring;
  ring.job_id = 4;
  ring.ring = {"h1", "s1", "h3"};
  plan.jobs.push_back(ring);
  auto back = PlanFromJson(PlanToJson(plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(JobPlanFromJson(JobPlanToJson(jp)).value(), jp);
}

TEST(JsonTest, SwitchIntentRoundTrip) {
  SwitchIntent s;
  s.switch_id = "e0_0";
  s.version = 9;
  s.jobs = {{AggregationTag(3, 0), 3, 2, 3, 25, 0, 100, -7, ParseIpv4("10.0.0.9").value()}};
  s.inputs = {{AggregationTag(3, 0), 3, ParseIpv4("10.0.0.1").value(), 0},
              {AggregationTag(3, 0), 3, ParseIpv4("10.0.0.2").value(), 1}};
  s.routes = {{AggregationTag(3, 0), 3, ParseIpv4("10.0.0.9").value(), 0, 0, 25},
              {AggregationTag(3, 0), 3, ParseIpv4("10.255.0.1").value(),
               ParseIpv4("10.0.0.9").value(), 4, 0}};
  s.multicast_groups = {{25, 3, {1, 2}}};
  auto back = SwitchIntentFromJson(SwitchIntentToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  Json bad = SwitchIntentToJson(s);
  bad["routes"][0]["source_address"] = "10.0.0";
  EXPECT_FALSE(SwitchIntentFromJson(bad).ok());
}

}  // namespace
}  // namespace inac::core
