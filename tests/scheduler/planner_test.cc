// scheduler::ComputePlan (the one planner of the controller and `inac plan`); the fingerprint of
// its inputs is tested with server/plan_fingerprint.h (tests/server/plan_fingerprint_test.cc).
#include "scheduler/planner.h"

#include <gtest/gtest.h>

#include "core/generators.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

core::Topology Fabric() {
  core::GeneratorOptions o;
  o.ina = *core::ParseInaPlacement("all");
  o.aggregators = 1000;
  return *core::GenerateLeafSpine(2, 1, 3, o);
}

core::Job PsJob(core::JobId id, std::vector<std::string> workers, const std::string& ps) {
  core::Job job;
  job.id = id;
  job.spec = fixtures::PsJobSpec(
      "j" + std::to_string(id), std::move(workers), {ps},
      {.gradient_bytes = 1000000, .compute_ms = 10, .iterations = 100, .batch_size = 16});
  return job;
}

TEST(PlannerTest, RoutesAssignsMemoryPlansRingsAndDerivesIntents) {
  const core::Topology t = Fabric();
  PlanRequest request;
  request.topology = &t;
  request.jobs = {PsJob(2, {"h0_0", "h0_1", "h1_0"}, "h1_2"), PsJob(1, {"h0_2", "h1_1"}, "h0_0")};
  core::Job ring = PsJob(3, {"h0_1", "h1_1"}, "h1_2");
  ring.spec.allreduce = core::AllReduce::kRing;
  ring.spec.parameter_servers.clear();
  request.jobs.push_back(ring);
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  const core::Plan& plan = out->plan;
  EXPECT_EQ(plan.algorithm, "trees");  // the default (planner.h)
  EXPECT_EQ(plan.memory_policy, "esa");
  EXPECT_TRUE(plan.fingerprint.empty());  // the caller's
  ASSERT_EQ(plan.jobs.size(), 3u);
  EXPECT_EQ(plan.jobs[0].job_id, 1);  // sorted by id
  EXPECT_EQ(plan.jobs[2].ring, (std::vector<std::string>{"h0_1", "h1_1"}));
  EXPECT_EQ(plan.jobs[2].batch_size, 16);
  EXPECT_FALSE(plan.jobs[1].aggregators.empty()) << "memory assigned where job 2 aggregates";
  EXPECT_GT(plan.jobs[1].rate_gbps, 0);
  EXPECT_EQ(out->reports.size(), 2u);  // routed jobs only
  EXPECT_EQ(out->reports.at(2).evaluation.job_id, 2);
  EXPECT_EQ(out->intents, core::DeriveSwitchIntents(t, plan));
  // Same request, same plan; a previous plan that aggregated job 2 elsewhere bumps its generation.
  auto again = ComputePlan(request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->plan, plan);
  core::Plan previous = plan;
  previous.jobs[1].flows[0].aggregation_node = "h1_2";
  previous.jobs[1].generation = 5;
  request.previous = &previous;
  auto next = ComputePlan(request);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->plan.jobs[1].generation, 6u);
  EXPECT_EQ(next->plan.jobs[0].generation, 0u);
  // Unknown policy or algorithm: InvalidArgument.
  request.options.memory_policy = "lru";
  EXPECT_EQ(ComputePlan(request).status().code(), absl::StatusCode::kInvalidArgument);
  request.options.memory_policy = "esa";
  request.options.algorithm = "magic";
  EXPECT_EQ(ComputePlan(request).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inac::scheduler
