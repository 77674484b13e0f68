// What the planner prints must be what the programmed switches carry (docs/architecture.md
// "Truth over the model"), for three things it got wrong:
//  - a chain child (two-level ATP) that falls back to its PS for want of memory must send its
//    workers' chunks all the way to the PS, through its parent, and the re-scoring must fail
//    loudly rather than print the routing's pre-memory rates;
//  - a job's grant on a switch is split over its tags there in proportion to their traffic, one
//    rule (core::SplitGrant) for the data plane's windows, the flow model's memory cap and the
//    memory planner's demand;
//  - under ATP/SwitchML a chain child's aggregator is held until the PS's result comes back
//    through it: its hold covers child -> parent -> PS.
// Hand-computed values throughout; core::EvaluateIntents (the data plane's view, independent of
// the flow model) checks the model's rates where it applies.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "core/intent_evaluation.h"
#include "core/plan.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

// w1, w2 - e1 - a - e2 - ps; w3 - e2. e1 and e2 INA (aggregators as given, 400 Gbps of
// processing), a not; every link 100 Gbps, default latency 1 us.
core::Topology Chain(int64_t e1_aggregators, int64_t e2_aggregators) {
  core::Topology t;
  t.switches = {{"e1", {true, 400, e1_aggregators, 248}, {}},
                {"a", {false, 0, 0, 248}, {}},
                {"e2", {true, 400, e2_aggregators, 248}, {}}};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"w3", {}, {}}, {"ps", {}, {}}};
  t.links = {{"w1~e1", "w1", "e1", 100}, {"w2~e1", "w2", "e1", 100}, {"e1~a", "e1", "a", 100},
             {"a~e2", "a", "e2", 100},   {"w3~e2", "w3", "e2", 100}, {"e2~ps", "e2", "ps", 100}};
  return t;
}

// Job 7 as two-level ATP plans it: w1, w2 aggregated at e1, whose partial sum is re-aggregated at
// e2 (the PS's ToR) with w3's chunks; e2's aggregate goes to the PS.
core::JobPlan ChainJob() {
  core::JobPlan jp;
  jp.job_id = 7;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{.worker = "w1", .ps = "ps", .aggregation_node = "e1", .path = {"w1", "e1"}},
              {.worker = "w2", .ps = "ps", .aggregation_node = "e1", .path = {"w2", "e1"}},
              {.worker = "w3", .ps = "ps", .aggregation_node = "e2", .path = {"w3", "e2"}}};
  jp.aggregator_paths = {{.switch_id = "e1", .ps = "ps", .path = {"e1", "a", "e2"}},
                         {.switch_id = "e2", .ps = "ps", .path = {"e2", "ps"}}};
  return jp;
}

PlanningInput InputOf(const core::Topology& t, const std::vector<std::string>& workers,
                      core::JobId id = 7) {
  PlanningInput input;
  input.topology = t;
  input.jobs = {JobInput{id, fixtures::PsJobSpec("job", workers, {"ps"})}};
  return input;
}

MemoryJobState StateOf(core::JobId id, std::vector<std::string> workers) {
  return MemoryJobState{.id = id, .workers = std::move(workers), .remaining_comm_bytes = 1e9};
}

// --- 1. A chain child that falls back reaches the PS, and re-scoring never skips silently. ---

TEST(ChainFallBackTest, AFallenBackChainChildSendsThroughItsParentToThePs) {
  const core::Topology t = Chain(1000, 1000);
  const core::Graph g(t);
  core::JobPlan jp = ChainJob();
  FallBackToPs(g, "e1", &jp);
  // Before: the path stopped at e2 (the end of e1's aggregator path), so the flow model refused
  // the plan ("path must run from the worker to ps").
  EXPECT_EQ(jp.flows[0].aggregation_node, "ps");
  EXPECT_EQ(jp.flows[0].path, (std::vector<std::string>{"w1", "e1", "a", "e2", "ps"}));
  EXPECT_EQ(jp.flows[1].path, (std::vector<std::string>{"w2", "e1", "a", "e2", "ps"}));
  EXPECT_EQ(jp.flows[2].aggregation_node, "e2");  // the parent still aggregates w3
  ASSERT_EQ(jp.aggregator_paths.size(), 1u);
  EXPECT_EQ(jp.aggregator_paths[0].switch_id, "e2");
  // It evaluates: the PS link carries w1's and w2's raw chunks plus e2's aggregate, 3 units per
  // unit of λ: λ = 100 / 3.
  core::Plan plan{.jobs = {jp}};
  auto ev = EvaluatePlan(InputOf(t, {"w1", "w2", "w3"}), plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_NEAR(ev->jobs[0].rate_gbps, 100.0 / 3, 1e-9);
}

TEST(ChainFallBackTest, ARepointedPathNeverLoops) {
  const core::Topology t = Chain(1000, 1000);
  const core::Graph g(t);
  // w3 is sent back up to e1 to be aggregated there (a detour), and e1's stream comes down again:
  // falling back at e1 would walk w3 e2 a e1 a e2 ps; the loop is cut out.
  core::JobPlan jp;
  jp.job_id = 7;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {
      {.worker = "w3", .ps = "ps", .aggregation_node = "e1", .path = {"w3", "e2", "a", "e1"}}};
  jp.aggregator_paths = {{.switch_id = "e1", .ps = "ps", .path = {"e1", "a", "e2", "ps"}}};
  FallBackToPs(g, "e1", &jp);
  EXPECT_EQ(jp.flows[0].path, (std::vector<std::string>{"w3", "e2", "ps"}));
  EXPECT_TRUE(jp.aggregator_paths.empty());
}

TEST(ChainFallBackTest, NoMemoryAtTheChildFallsBackAndTheRateIsWhatTheSwitchesCarry) {
  // e1 has no aggregators: ESA grants it nothing and the job falls back there; e2 grants its
  // window (its tag carries the whole gradient: ceil(100 Gbps x 2 us / 248 B) = 101).
  const core::Topology t = Chain(0, 1000);
  const core::Graph g(t);
  core::Plan plan{.jobs = {ChainJob()}};
  MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2", "w3"})}, nullptr, esa, &plan).ok());
  const core::JobPlan& jp = plan.jobs[0];
  EXPECT_EQ(jp.aggregators, (std::map<std::string, int64_t>{{"e2", 101}}));
  for (const core::FlowPlan& f : jp.flows) {
    EXPECT_EQ(f.path.back(), f.aggregation_node) << f.worker;
  }
  const PlanningInput input = InputOf(t, {"w1", "w2", "w3"});
  auto rescored = RescorePlan(
      input,
      [&](const core::JobPlan& j, const std::string& sw) { return GrantHoldUs(g, j, sw, esa); },
      &plan);
  ASSERT_TRUE(rescored.ok()) << rescored.status();
  EXPECT_NEAR(plan.jobs[0].rate_gbps, 100.0 / 3, 1e-9);
  // The switches as programmed carry exactly that.
  plan.memory_policy = "esa";
  auto held = core::EvaluateIntents(t, plan, core::DeriveSwitchIntents(t, plan));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE((*held)[0].problems.empty());
  EXPECT_NEAR((*held)[0].rate_gbps, 100.0 / 3, 1e-9);
}

TEST(RescoreTest, APlanTheFlowModelRefusesIsAnInternalErrorNamingTheJob) {
  const core::Topology t = Chain(1000, 1000);
  // What FallBackToPs used to leave: w1 re-pointed to the PS, its path ending at the parent.
  core::JobPlan jp = ChainJob();
  jp.flows[0].aggregation_node = "ps";
  jp.flows[0].path = {"w1", "e1", "a", "e2"};
  jp.rate_gbps = 25;  // the routing's pre-memory rate
  core::Plan plan{.jobs = {jp}};
  auto rescored = RescorePlan(InputOf(t, {"w1", "w2", "w3"}), nullptr, &plan);
  ASSERT_FALSE(rescored.ok());
  EXPECT_EQ(rescored.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(rescored.status().message().find("job 7"), std::string::npos)
      << rescored.status().message();
  EXPECT_NE(rescored.status().message().find("path must run from the worker to ps"),
            std::string::npos)
      << rescored.status().message();
  EXPECT_EQ(plan.jobs[0].rate_gbps, 25);  // left unchanged: the caller fails the whole plan
  // planner.h's Rescore returns the same error.
  PlannerOutput out;
  out.plan = plan;
  const absl::Status status = Rescore(InputOf(t, {"w1", "w2", "w3"}), MemoryPlannerOptions{}, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("job 7"), std::string::npos) << status.message();
}

// Two-level ATP on the fabric of `inac plan`'s reproduction: fat-tree k = 8, 6 hosts per edge,
// INA at the ToRs with 150 aggregators each, 6 jobs of 16 workers and one PS placed by a seeded
// shuffle. Memory is scarce, so chain children fall back; every fallen-back flow reaches the PS,
// the plan evaluates, and no printed rate exceeds what the intents sustain.
TEST(ChainFallBackTest, TwoLevelAtpWithScarceMemoryIsScoredAndHoldsOnTheIntents) {
  core::GeneratorOptions o;
  o.seed = 1;
  o.link_gbps = 100;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  o.aggregators = 150;
  auto topology = core::GenerateFatTree(8, o, 6);
  ASSERT_TRUE(topology.ok());
  std::vector<std::string> hosts;
  for (const core::Host& h : topology->hosts) hosts.push_back(h.id);
  std::mt19937_64 rng(3);
  for (size_t i = hosts.size() - 1; i > 0; --i) std::swap(hosts[i], hosts[rng() % (i + 1)]);
  PlanRequest request;
  request.topology = &*topology;
  for (int j = 0; j < 6; ++j) {
    core::Job job;
    job.id = j + 1;
    job.spec = fixtures::PsJobSpec(absl::StrCat("job", j),
                                   {hosts.begin() + 17 * j, hosts.begin() + 17 * j + 16},
                                   {hosts[17 * j + 16]});
    request.jobs.push_back(job);
  }
  request.options.algorithm = "atp";
  request.options.memory_policy = "esa";

  // The memory step alone: some chain child (an aggregator path ending at a switch) gets no
  // memory and falls back; every re-pointed flow then ends where it is aggregated.
  std::vector<const core::Job*> rings;
  const PlanningInput input = RoutingInputOf(request, &rings);
  auto routed = PlanRouting("atp", input);
  ASSERT_TRUE(routed.ok()) << routed.status();
  core::Plan plan = routed->plan;
  std::set<std::pair<core::JobId, std::string>> children;
  for (const core::JobPlan& jp : plan.jobs) {
    for (const core::AggregatorPlan& ap : jp.aggregator_paths) {
      if (ap.path.back() != ap.ps) children.insert({jp.job_id, ap.switch_id});
    }
  }
  ASSERT_FALSE(children.empty());
  const core::Graph g(*topology);
  std::vector<MemoryJobState> states;
  for (const core::Job& job : request.jobs) states.push_back(StateOf(job.id, job.spec.workers));
  const MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  // Windows at the workers' line rate (a plan without a planned rate asks for it), so the 150
  // aggregators run out and chain children fall back.
  for (core::JobPlan& jp : plan.jobs) jp.rate_gbps = 0;
  ASSERT_TRUE(AssignAggregators(g, states, nullptr, esa, &plan).ok());
  int fallen_children = 0;
  for (const core::JobPlan& jp : plan.jobs) {
    for (const core::FlowPlan& f : jp.flows) {
      EXPECT_EQ(f.path.back(), f.aggregation_node) << "job " << jp.job_id << " " << f.worker;
      if (f.aggregation_node == f.ps && f.path.size() > 2 &&
          children.count({jp.job_id, f.path[1]})) {
        ++fallen_children;
      }
    }
  }
  EXPECT_GT(fallen_children, 0);
  auto rescored = RescorePlan(
      input,
      [&](const core::JobPlan& j, const std::string& sw) { return GrantHoldUs(g, j, sw, esa); },
      &plan);
  ASSERT_TRUE(rescored.ok()) << rescored.status();

  // The whole planner: scored, and every printed rate holds on the derived intents.
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  auto held = core::EvaluateIntents(*topology, out->plan, out->intents);
  ASSERT_TRUE(held.ok()) << held.status();
  for (size_t j = 0; j < held->size(); ++j) {
    const core::JobPlan* jp = out->plan.FindJob((*held)[j].job_id);
    ASSERT_NE(jp, nullptr);
    EXPECT_TRUE((*held)[j].problems.empty()) << "job " << jp->job_id;
    EXPECT_LE(jp->rate_gbps, (*held)[j].rate_gbps * (1 + 1e-9)) << "job " << jp->job_id;
  }
}

// --- 2. Proportional windows: one rule for the data plane, the model and the demand. ---

// w1, w2 - s1 - ps, s1 INA with `aggregators`.
core::Topology OneSwitch(int64_t aggregators) {
  core::Topology t;
  t.switches = {{"s1", {true, 400, aggregators, 248}, {}}};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"ps", {}, {}}};
  t.links = {{"w1~s1", "w1", "s1", 100}, {"w2~s1", "w2", "s1", 100}, {"s1~ps", "s1", "ps", 100}};
  return t;
}

// Job 7: w1 sends [0, 3/64) and [3/64, 1) of its gradient to s1 as two flows, w2 all of it: two
// tags at s1, carrying 3/64 and 61/64 of each worker's stream.
core::JobPlan SplitJob() {
  core::JobPlan jp;
  jp.job_id = 7;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{.worker = "w1",
               .ps = "ps",
               .aggregation_node = "s1",
               .path = {"w1", "s1"},
               .fraction = 3.0 / 64},
              {.worker = "w1",
               .ps = "ps",
               .aggregation_node = "s1",
               .path = {"w1", "s1"},
               .fraction = 61.0 / 64},
              {.worker = "w2", .ps = "ps", .aggregation_node = "s1", .path = {"w2", "s1"}}};
  jp.aggregator_paths = {{.switch_id = "s1", .ps = "ps", .path = {"s1", "ps"}}};
  return jp;
}

// λ of `jp` by the flow model with ESA's hold (2 us) and by the intents, which must agree.
std::pair<double, double> ModelAndIntents(const core::Topology& t, const core::JobPlan& jp) {
  const core::Graph g(t);
  const MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  core::Plan plan{.memory_policy = "esa", .jobs = {jp}};
  auto rescored = RescorePlan(
      InputOf(t, {"w1", "w2"}),
      [&](const core::JobPlan& j, const std::string& sw) { return GrantHoldUs(g, j, sw, esa); },
      &plan);
  EXPECT_TRUE(rescored.ok()) << rescored.status();
  auto held = core::EvaluateIntents(t, plan, core::DeriveSwitchIntents(t, plan));
  EXPECT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE((*held)[0].problems.empty());
  return {plan.jobs[0].rate_gbps, (*held)[0].rate_gbps};
}

TEST(TagWindowTest, TheModelCapsEveryTagWithItsProportionalWindow) {
  const core::Topology t = OneSwitch(1000);
  // One aggregator of 248 B held 2 us sustains 248 x 8 / 2000 = 0.992 Gbps of a tag's traffic.
  core::JobPlan jp = SplitJob();
  // 64 aggregators: windows 3 and 61, both tags at 64 x 0.992 = 63.488 Gbps. (An even split,
  // 32 / 32, left the 61/64 tag at 32 x 0.992 / (61/64) = 33.3 Gbps while the pooled model
  // printed 63.488.)
  jp.aggregators = {{"s1", 64}};
  auto [model, intents] = ModelAndIntents(t, jp);
  EXPECT_NEAR(model, 64 * 0.992, 1e-9);
  EXPECT_NEAR(intents, model, 1e-9 * model);
  // 90 aggregators: quotas 4.22 and 85.78, windows 4 and 86. The 3/64 tag binds:
  // 4 x 0.992 / (3/64) = 84.651 Gbps, below the pooled 90 x 0.992 = 89.28.
  jp.aggregators = {{"s1", 90}};
  std::tie(model, intents) = ModelAndIntents(t, jp);
  EXPECT_NEAR(model, 4 * 0.992 / (3.0 / 64), 1e-9);
  EXPECT_NEAR(intents, model, 1e-9 * model);
  // 10 aggregators: windows 1 and 9 (every tag keeps one); the 3/64 tag alone would sustain
  // 0.992 / (3/64) = 21.16 Gbps, the other binds at 9 x 0.992 / (61/64) = 9.367.
  jp.aggregators = {{"s1", 10}};
  std::tie(model, intents) = ModelAndIntents(t, jp);
  EXPECT_NEAR(model, 9 * 0.992 / (61.0 / 64), 1e-9);
  EXPECT_NEAR(intents, model, 1e-9 * model);
}

TEST(TagWindowTest, TheDemandIsSizedForTheTagsTraffic) {
  const core::Topology t = OneSwitch(1000);
  const core::Graph g(t);
  const MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  // Each worker sends [0, 3/64) to s1 and the rest straight to the PS: s1 holds one tag of
  // weight 3/64, so its window is ceil(100 Gbps x 3/64 x 2 us x 125 B / 248 B) = ceil(4.73) = 5,
  // not the 101 of the full line rate.
  core::JobPlan jp;
  jp.job_id = 7;
  jp.ps_shares = {{"ps", 1.0}};
  for (const char* w : {"w1", "w2"}) {
    jp.flows.push_back({.worker = w,
                        .ps = "ps",
                        .aggregation_node = "s1",
                        .path = {w, "s1"},
                        .fraction = 3.0 / 64});
    jp.flows.push_back({.worker = w,
                        .ps = "ps",
                        .aggregation_node = "ps",
                        .path = {w, "s1", "ps"},
                        .fraction = 61.0 / 64});
  }
  jp.aggregator_paths = {{.switch_id = "s1", .ps = "ps", .path = {"s1", "ps"}}};
  core::Plan plan{.jobs = {jp}};
  ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2"})}, nullptr, esa, &plan).ok());
  EXPECT_EQ(plan.jobs[0].aggregators, (std::map<std::string, int64_t>{{"s1", 5}}));
  // The split job (two tags on s1 of weights 3/64 and 61/64) asks for the least grant whose
  // proportional split gives each tag its line-rate window plus one: 6 for the 3/64 tag
  // (ceil(4.73) + 1) needs 6 x 64 / 3 = 128; 98 for the other needs 103; at most 2 x (6 + 98).
  plan.jobs = {SplitJob()};
  ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2"})}, nullptr, esa, &plan).ok());
  EXPECT_EQ(plan.jobs[0].aggregators, (std::map<std::string, int64_t>{{"s1", 128}}));
  EXPECT_EQ(core::SplitGrant(128, {3.0 / 64, 61.0 / 64}), (std::vector<int64_t>{6, 122}));
}

TEST(TagWindowTest, AGrantBelowTheNumberOfTagsIsNoGrant) {
  // One aggregator for two tags: one of them would have no window. The job falls back at s1.
  const core::Topology t = OneSwitch(1);
  const core::Graph g(t);
  core::Plan plan{.jobs = {SplitJob()}};
  const MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2"})}, nullptr, esa, &plan).ok());
  EXPECT_TRUE(plan.jobs[0].aggregators.empty());
  EXPECT_TRUE(plan.jobs[0].aggregator_paths.empty());
  for (const core::FlowPlan& f : plan.jobs[0].flows) {
    EXPECT_EQ(f.aggregation_node, "ps");
    EXPECT_EQ(f.path.back(), "ps");
  }
  // Without falling back the job gets no entry there.
  plan.jobs = {SplitJob()};
  MemoryPlannerOptions keep = esa;
  keep.fall_back_without_memory = false;
  ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2"})}, nullptr, keep, &plan).ok());
  EXPECT_TRUE(plan.jobs[0].aggregators.empty());
  EXPECT_EQ(plan.jobs[0].flows[0].aggregation_node, "s1");
}

// --- 3. ATP's hold at a chain child runs to the PS. ---

TEST(ChainHoldTest, AtpHoldsAChainChildsAggregatorUntilThePsResultIsBack) {
  core::Topology t = Chain(1000, 1000);
  const core::JobPlan jp = ChainJob();
  const MemoryPlannerOptions atp{.policy = MemoryPolicy::kAtp};
  const MemoryPlannerOptions esa{.policy = MemoryPolicy::kEsa};
  {
    const core::Graph g(t);
    // e1 -> a -> e2 -> ps: 3 links of 1 us, RTT 6 + 2 us turnaround = 8, hold 2 + 8 = 10 us (it
    // was 2 + (2 x 2 + 2) = 8: the round trip stopped at the parent). e2 -> ps: 2 + 4 = 6 us.
    EXPECT_DOUBLE_EQ(TimingAt(g, jp, "e1", {}).ps_rtt_us, 8);
    EXPECT_DOUBLE_EQ(GrantHoldUs(g, jp, "e1", atp), 10);
    EXPECT_DOUBLE_EQ(GrantHoldUs(g, jp, "e2", atp), 6);
    EXPECT_DOUBLE_EQ(GrantHoldUs(g, jp, "e1", esa), 2);  // ESA frees at completion
    // The window ATP asks for at e1: ceil(100 Gbps x 10 us x 125 B / 248 B) = ceil(504.03).
    core::Plan plan{.jobs = {jp}};
    ASSERT_TRUE(AssignAggregators(g, {StateOf(7, {"w1", "w2", "w3"})}, nullptr, atp, &plan).ok());
    EXPECT_EQ(plan.jobs[0].aggregators.at("e1"), 505);
    // e2 too: the tag has one window over its chain (the least of its grants), so every switch
    // of the chain sizes it for the chain's longest hold (e2's own would be 303).
    EXPECT_EQ(plan.jobs[0].aggregators.at("e2"), 505);
  }
  // A slow last link counts for the child too: e2 -> ps at 5 us gives e1 1 + 1 + 5 = 7 us one
  // way, hold 2 + 14 + 2 = 18; e2 2 + 10 + 2 = 14.
  for (core::Link& l : t.links) {
    if (l.id == "e2~ps") l.latency_us = 5;
  }
  const core::Graph g(t);
  EXPECT_DOUBLE_EQ(GrantHoldUs(g, jp, "e1", atp), 18);
  EXPECT_DOUBLE_EQ(GrantHoldUs(g, jp, "e2", atp), 14);
}

}  // namespace
}  // namespace inac::scheduler
