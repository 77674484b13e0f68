// core::EvaluateIntents on small hand-made fabrics whose rates are computed by hand: the plans are
// written out, their intents derived by core::DeriveSwitchIntents (or edited to break them), and
// each expectation below spells out the loads per unit of λ that give it.
#include "core/intent_evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {
namespace {

constexpr double kTol = 1e-9;

Switch Ina(const std::string& id, double processing, int64_t aggregators) {
  return Switch{id, InaConfig{true, processing, aggregators, 248}, {}};
}

Link L(const std::string& a, const std::string& b, double gbps,
       std::optional<double> latency = std::nullopt) {
  Link l;
  l.id = DefaultLinkId(a, b);
  l.a = a;
  l.b = b;
  l.gbps = gbps;
  l.latency_us = latency;
  return l;
}

// One switch s1, hosts w1..w<n> and ps, every link `gbps`.
Topology Star(int workers, double gbps, double processing, int64_t aggregators,
              const std::vector<std::string>& extra_hosts = {}) {
  Topology t;
  t.switches = {Ina("s1", processing, aggregators)};
  std::vector<std::string> hosts;
  for (int i = 1; i <= workers; ++i) hosts.push_back(absl::StrCat("w", i));
  hosts.insert(hosts.end(), extra_hosts.begin(), extra_hosts.end());
  hosts.push_back("ps");
  for (const std::string& h : hosts) {
    t.hosts.push_back(Host{h, {}, {}});
    t.links.push_back(L(h, "s1", gbps));
  }
  return t;
}

// Every worker aggregated at s1, the aggregate on to `ps`.
JobPlan StarJob(JobId id, const std::vector<std::string>& workers, const std::string& ps,
                int64_t grant) {
  JobPlan jp;
  jp.job_id = id;
  jp.ps_shares = {{ps, 1.0}};
  for (const std::string& w : workers) jp.flows.push_back({w, ps, "s1", {w, "s1"}});
  jp.aggregator_paths = {{"s1", ps, {"s1", ps}}};
  jp.aggregators = {{"s1", grant}};
  return jp;
}

std::vector<std::string> Workers(int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(absl::StrCat("w", i));
  return out;
}

std::vector<IntentJobRate> Evaluate(const Topology& t, const Plan& plan,
                                    const std::vector<SwitchIntent>* intents = nullptr) {
  auto rates = EvaluateIntents(t, plan, intents ? *intents : DeriveSwitchIntents(t, plan));
  EXPECT_TRUE(rates.ok()) << rates.status();
  return rates.ok() ? *rates : std::vector<IntentJobRate>{};
}

std::string Problems(const IntentJobRate& r) { return absl::StrJoin(r.problems, "\n"); }

// w1, w2, w3 -> s1 -> ps over 10 Gbps links; s1 aggregates them (3 inputs, one aggregate).
TEST(IntentEvaluationTest, SingleSwitchStar) {
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, Workers(3), "ps", 1000)};
  // Per unit of λ: each access link 1, s1->ps 1, ps ingress 1, s1's processing 3. ESA's memory:
  // 1000 aggregators held 2 µs: 1000 * 248 / (2 * 125) = 992 Gbps. Links bind: 10.
  auto rates = Evaluate(Star(3, 10, 1000, 1000), plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].job_id, 1);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_NEAR(rates[0].rate_gbps, 10, kTol);
  EXPECT_EQ(rates[0].bottleneck.rfind("link ", 0), 0u) << rates[0].bottleneck;
  // Processing 25 for 3 units: 25 / 3.
  rates = Evaluate(Star(3, 10, 25, 1000), plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_NEAR(rates[0].rate_gbps, 25.0 / 3, kTol);
  EXPECT_EQ(rates[0].bottleneck, "processing s1");
  // The PS's own ingress (set below its link): 4 Gbps for 1 unit.
  Topology t = Star(3, 10, 1000, 1000);
  t.hosts.back().ingress_gbps = 4;
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 4, kTol);
  EXPECT_EQ(rates[0].bottleneck, "ingress ps");
  // A link that is down carries nothing: intents derived while it was up still route over it.
  const std::vector<SwitchIntent> intents = DeriveSwitchIntents(Star(3, 10, 1000, 1000), plan);
  t = Star(3, 10, 1000, 1000);
  t.links.back().status = LinkStatus::kDown;  // ps~s1
  rates = Evaluate(t, plan, &intents);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_EQ(rates[0].bottleneck, "link s1->ps");
}

// Two jobs on one star share s1's processing: max-min fair.
TEST(IntentEvaluationTest, JobsShareFairlyAndFreezeAtTheirOwnBottlenecks) {
  Topology t = Star(4, 10, 30, 1000, {"ps2"});
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, {"w1", "w2"}, "ps", 100), StarJob(2, {"w3", "w4"}, "ps2", 100)};
  // Processing 30 for 2 + 2 units: 7.5 each (links 10 not reached).
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_NEAR(rates[0].rate_gbps, 7.5, kTol);
  EXPECT_NEAR(rates[1].rate_gbps, 7.5, kTol);
  EXPECT_EQ(rates[1].bottleneck, "processing s1");
  // Job 1's PS ingress at 3: it freezes there, job 2 takes the rest of s1: (30 - 2 * 3) / 2 = 12,
  // then its links (10) bind.
  t.hosts.back().ingress_gbps = 3;  // "ps"
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 3, kTol);
  EXPECT_EQ(rates[0].bottleneck, "ingress ps");
  EXPECT_NEAR(rates[1].rate_gbps, 10, kTol);
}

// w1, w2 on s1; s1 - s2 - ps. Each worker's gradient is split: [0, 0.5) aggregated at s1,
// [0.5, 1) at s2. Two tags, each carrying 0.5 per unit of λ.
TEST(IntentEvaluationTest, SplitPlanTwoRangesAtTwoSwitches) {
  Topology t;
  t.switches = {Ina("s1", 1000, 1000), Ina("s2", 1000, 1000)};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"ps", {}, {}}};
  t.links = {L("w1", "s1", 10), L("w2", "s1", 10), L("s1", "s2", 12), L("s2", "ps", 10)};
  JobPlan jp;
  jp.job_id = 3;
  jp.ps_shares = {{"ps", 1.0}};
  for (const std::string w : {"w1", "w2"}) {
    jp.flows.push_back({w, "ps", "s1", {w, "s1"}, 0.5});
    jp.flows.push_back({w, "ps", "s2", {w, "s1", "s2"}, 0.5});
  }
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2", "ps"}}, {"s2", "ps", {"s2", "ps"}}};
  jp.aggregators = {{"s1", 100}, {"s2", 100}};
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {jp};
  ASSERT_EQ(ChunkRangesOf(jp, "ps").size(), 2u);
  // Per unit of λ: w->s1 0.5 + 0.5 = 1; s1->s2: range 0's aggregate 0.5 + range 1's two raw
  // chunks 1 = 1.5; s2->ps: 0.5 + 0.5 = 1; processing s1 = s2 = 1. So 12 / 1.5 = 8.
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_NEAR(rates[0].rate_gbps, 8, kTol);
  EXPECT_EQ(rates[0].bottleneck, "link s1->s2");
  // The split halves each tag's memory need: one aggregator on s2 (ESA hold 2 µs) sustains
  // 1 * 248 / (2 * 125 * 0.5) = 1.984 Gbps.
  plan.jobs[0].aggregators["s2"] = 1;
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 1.984, kTol);
  const uint32_t tag1 = AggregationTag(3, 0, 1, 0, 1);
  EXPECT_EQ(rates[0].bottleneck, absl::StrCat("memory s2 tag ", tag1));
}

// w1, w2 on s1, w3 on s2; s1 -(3 µs)- s2 -(5 µs)- ps. s1's aggregate is an input of s2, which
// re-aggregates it with w3's chunks (a two-level chain).
Topology ChainFabric() {
  Topology t;
  t.switches = {Ina("s1", 1000, 100), Ina("s2", 1000, 100)};
  t.hosts = {{"w1", {}, {}}, {"w2", {}, {}}, {"w3", {}, {}}, {"ps", {}, {}}};
  t.links = {L("w1", "s1", 100), L("w2", "s1", 100), L("s1", "s2", 100, 3.0), L("w3", "s2", 100),
             L("s2", "ps", 100, 5.0)};
  return t;
}

Plan ChainPlan(const std::string& policy, int64_t grant_s1, int64_t grant_s2) {
  JobPlan jp;
  jp.job_id = 4;
  jp.ps_shares = {{"ps", 1.0}};
  jp.flows = {{"w1", "ps", "s1", {"w1", "s1"}},
              {"w2", "ps", "s1", {"w2", "s1"}},
              {"w3", "ps", "s2", {"w3", "s2"}}};
  jp.aggregator_paths = {{"s1", "ps", {"s1", "s2"}}, {"s2", "ps", {"s2", "ps"}}};
  jp.aggregators = {{"s1", grant_s1}, {"s2", grant_s2}};
  Plan plan;
  plan.memory_policy = policy;
  plan.jobs = {jp};
  return plan;
}

TEST(IntentEvaluationTest, TwoLevelChainHoldsToThePsThroughTheParent) {
  const Topology t = ChainFabric();
  const uint32_t tag = AggregationTag(4, 0);
  // Loads per unit: every link 1, processing s1 2 and s2 2 (w3 and s1's aggregate); none binds
  // at 100 Gbps before memory. The tag has one window over its tree (slots line up along the
  // chain): the least of its grants, 8. ATP holds an aggregator until the result returns:
  //   s1: 2 + 2 * (3 + 5) + 2 = 20 µs: 8 * 248 / (20 * 125) = 0.7936 Gbps;
  //   s2: 2 + 2 * 5 + 2 = 14 µs: 8 * 248 / (14 * 125) = 1.1337 Gbps.
  auto rates = Evaluate(t, ChainPlan("atp", 10, 8));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_NEAR(rates[0].rate_gbps, 8 * 248.0 / (20 * 125), kTol);
  EXPECT_EQ(rates[0].bottleneck, absl::StrCat("memory s1 tag ", tag));
  // SwitchML (static pools) holds as ATP does.
  rates = Evaluate(t, ChainPlan("switchml", 10, 8));
  EXPECT_NEAR(rates[0].rate_gbps, 8 * 248.0 / (20 * 125), kTol);
  // ESA frees it when the aggregate completes: 2 µs. s1: 8 * 248 / 250 = 7.936, s2 the same.
  rates = Evaluate(t, ChainPlan("esa", 10, 8));
  EXPECT_NEAR(rates[0].rate_gbps, 8 * 248.0 / (2 * 125), kTol);
  // With the larger grant on the parent, the child's grant is the window: 8 on both.
  rates = Evaluate(t, ChainPlan("esa", 8, 10));
  EXPECT_NEAR(rates[0].rate_gbps, 8 * 248.0 / (2 * 125), kTol);
  // Processing of the parent counts the child's aggregate as one input: 2 units at s2.
  Topology slow = ChainFabric();
  slow.switches[1].ina.processing_gbps = 3;
  rates = Evaluate(slow, ChainPlan("esa", 1000, 1000));
  EXPECT_NEAR(rates[0].rate_gbps, 1.5, kTol);
  EXPECT_EQ(rates[0].bottleneck, "processing s2");
}

TEST(IntentEvaluationTest, ChainChildWithoutMemoryNeverCompletesItsParent) {
  // s1 has no aggregator: its two inputs fall back (two units s1 -> s2 -> ps, passing s2), so s2,
  // which expects s1's aggregate as one of its two inputs, never completes a chunk.
  auto rates = Evaluate(ChainFabric(), ChainPlan("esa", 0, 8));
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_EQ(rates[0].bottleneck, "problem");
  EXPECT_NE(Problems(rates[0]).find("at s2: 1 of fan-in 2 inputs arrive"), std::string::npos)
      << Problems(rates[0]);
}

TEST(IntentEvaluationTest, FallbackWithAnEmptyWindow) {
  // Granted nothing on s1: each worker's chunk goes on to the PS unaggregated. Per unit: access
  // links 1, s1->ps 3, ps ingress 3, no processing. 10 Gbps links: 10 / 3; ingress 9: 3.
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, Workers(3), "ps", 0)};
  Topology t = Star(3, 10, 1, 1000);  // processing 1 Gbps would bind if it were charged
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_NEAR(rates[0].rate_gbps, 10.0 / 3, kTol);
  t.hosts.back().ingress_gbps = 9;
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 3, kTol);
  EXPECT_EQ(rates[0].bottleneck, "ingress ps");
  // Static pools (SwitchML) with a grant of 0: an empty region, the same fallback.
  plan.memory_policy = "switchml";
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 3, kTol);
}

TEST(IntentEvaluationTest, MemoryLimitedTagsAtpHoldVersusEsaHold) {
  // Star, 100 Gbps links (default latency 1 µs), 12 aggregators granted. ATP: hold 2 + 2 * 1 + 2
  // = 6 µs: 12 * 248 / (6 * 125) = 3.968; ESA: 2 µs: 11.904.
  const Topology t = Star(3, 100, 1000, 1000);
  Plan plan;
  plan.jobs = {StarJob(1, Workers(3), "ps", 12)};
  const uint32_t tag = AggregationTag(1, 0);
  plan.memory_policy = "atp";
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_NEAR(rates[0].rate_gbps, 12 * 248.0 / (6 * 125), kTol);
  EXPECT_EQ(rates[0].bottleneck, absl::StrCat("memory s1 tag ", tag));
  plan.memory_policy = "esa";
  rates = Evaluate(t, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 12 * 248.0 / (2 * 125), kTol);
  // Latencies of the links the aggregate crosses count, the workers' do not: s1~ps at 4 µs.
  Topology slow = t;
  slow.links.back().latency_us = 4;
  slow.links[0].latency_us = 50;
  plan.memory_policy = "atp";
  rates = Evaluate(slow, plan);
  EXPECT_NEAR(rates[0].rate_gbps, 12 * 248.0 / ((2 + 8 + 2) * 125), kTol);
  // Two PSs: two tags of u = 0.5, the job's 12 aggregators split 6 + 6: the same cap.
  Topology two = Star(3, 100, 1000, 1000, {"ps2"});
  JobPlan jp = StarJob(1, Workers(3), "ps", 12);
  jp.ps_shares = {{"ps", 0.5}, {"ps2", 0.5}};
  for (const std::string& w : Workers(3)) jp.flows.push_back({w, "ps2", "s1", {w, "s1"}});
  jp.aggregator_paths.push_back({"s1", "ps2", {"s1", "ps2"}});
  plan.jobs = {jp};
  rates = Evaluate(two, plan);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_NEAR(rates[0].rate_gbps, 6 * 248.0 / (6 * 125 * 0.5), kTol);
}

TEST(IntentEvaluationTest, OverlappingWindowsInASharedPoolCountHalf) {
  // s1's pool has 10 aggregators; job 1 is granted 8, job 2 6. Windows: job 1 [0, 8), job 2
  // [8, 14) mod 10 = {8, 9, 0, 1, 2, 3}. Slots 0..3 are shared: job 1 has 4/2 + 4 = 6 effective
  // aggregators, job 2 2 + 4/2 = 4. ESA (2 µs): 6 * 248 / 250 = 5.952 and 3.968 Gbps.
  Topology t = Star(4, 100, 1000, 10, {"ps2"});
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, {"w1", "w2"}, "ps", 8), StarJob(2, {"w3", "w4"}, "ps2", 6)};
  auto intents = DeriveSwitchIntents(t, plan);
  ASSERT_EQ(intents[0].jobs.size(), 2u);
  EXPECT_EQ(intents[0].jobs[1].slot_offset, 8u);
  auto rates = Evaluate(t, plan, &intents);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_NEAR(rates[0].rate_gbps, 6 * 248.0 / 250, kTol);
  EXPECT_NEAR(rates[1].rate_gbps, 4 * 248.0 / 250, kTol);
  EXPECT_EQ(rates[1].bottleneck, absl::StrCat("memory s1 tag ", AggregationTag(2, 0)));
}

TEST(IntentEvaluationTest, FanInAbove64IsAProblem) {
  const Topology t = Star(65, 100, 1e5, 1000);
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, Workers(65), "ps", 100)};
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_NE(Problems(rates[0]).find("fan-in 65 > 64"), std::string::npos) << Problems(rates[0]);
  // 64 is the most a bitmap holds: fine.
  plan.jobs = {StarJob(1, Workers(64), "ps", 100)};
  rates = Evaluate(t, plan);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  EXPECT_GT(rates[0].rate_gbps, 0);
}

TEST(IntentEvaluationTest, MissingRouteDropsTheJobOnly) {
  Topology t = Star(4, 10, 1000, 1000, {"ps2"});
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, {"w1", "w2"}, "ps", 100), StarJob(2, {"w3", "w4"}, "ps2", 100)};
  auto intents = DeriveSwitchIntents(t, plan);
  auto& routes = intents[0].routes;
  const auto upstream = std::find_if(routes.begin(), routes.end(), [](const RouteIntent& r) {
    return r.job_id == 1 && r.packet_class == RouteClass::kUpstream;
  });
  ASSERT_NE(upstream, routes.end());
  routes.erase(upstream);
  auto rates = Evaluate(t, plan, &intents);
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_NE(Problems(rates[0]).find("no route at s1"), std::string::npos) << Problems(rates[0]);
  EXPECT_TRUE(rates[1].problems.empty());
  EXPECT_NEAR(rates[1].rate_gbps, 10, kTol);
  // A raw route missing where a worker is not aggregated: the same.
  plan.jobs[0].flows[0] = {"w1", "ps", "ps", {"w1", "s1", "ps"}};
  intents = DeriveSwitchIntents(t, plan);
  std::erase_if(intents[0].routes, [](const RouteIntent& r) {
    return r.job_id == 1 && r.packet_class == RouteClass::kRaw;
  });
  rates = Evaluate(t, plan, &intents);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_NE(Problems(rates[0]).find("raw packet"), std::string::npos) << Problems(rates[0]);
}

TEST(IntentEvaluationTest, ExplicitPortsAndLoops) {
  // Ports set explicitly on the switch side, out of order: the routes follow them.
  Topology t = ChainFabric();
  t.links[0].b_port = 9;  // w1~s1 at s1
  t.links[2].a_port = 4;  // s1~s2 at s1
  t.links[2].b_port = 1;  // s1~s2 at s2
  t.links[4].a_port = 7;  // s2~ps at s2
  const Plan plan = ChainPlan("esa", 100, 100);
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);
  EXPECT_TRUE(rates[0].problems.empty()) << Problems(rates[0]);
  // Every link carries 1 unit (100 Gbps); ESA memory, 100 aggregators: 100 * 248 / 250.
  EXPECT_NEAR(rates[0].rate_gbps, 100 * 248.0 / 250, kTol);
  // s2 sends s1's fallback back to s1, which sends it to s2: a loop. The same plan, with s1
  // granted nothing so that its inputs fall back along its upstream route through s2.
  const Plan fallback = ChainPlan("esa", 0, 100);
  auto intents = DeriveSwitchIntents(t, fallback);
  const uint32_t s1 = NodeAddress(t, "s1");
  bool edited = false;
  for (RouteIntent& r : intents[1].routes) {
    if (r.packet_class == RouteClass::kUpstream && r.source_address == s1) {
      r.egress_port = 1;  // back to s1
      edited = true;
    }
  }
  ASSERT_TRUE(edited);
  rates = Evaluate(t, fallback, &intents);
  EXPECT_EQ(rates[0].rate_gbps, 0);
  EXPECT_NE(Problems(rates[0]).find("loops"), std::string::npos) << Problems(rates[0]);
}

TEST(IntentEvaluationTest, UnaggregatedWorkersAndRingJobsAndUnknownSwitches) {
  // w3 goes to the PS unaggregated through s1 (the raw route): s1->ps carries the aggregate and
  // w3's chunks, 2 units: 10 / 2 = 5; processing counts s1's 2 inputs only.
  Topology t = Star(3, 10, 1000, 1000);
  Plan plan;
  plan.memory_policy = "esa";
  plan.jobs = {StarJob(1, Workers(3), "ps", 100)};
  plan.jobs[0].flows[2] = {"w3", "ps", "ps", {"w3", "s1", "ps"}};
  JobPlan ring;
  ring.job_id = 9;
  ring.ring = {"w1", "w2"};
  plan.jobs.push_back(ring);
  auto rates = Evaluate(t, plan);
  ASSERT_EQ(rates.size(), 1u);  // the ring job is not evaluated
  EXPECT_NEAR(rates[0].rate_gbps, 5, kTol);
  EXPECT_EQ(rates[0].bottleneck, "link s1->ps");
  std::vector<SwitchIntent> bad = DeriveSwitchIntents(t, plan);
  bad[0].switch_id = "nowhere";
  EXPECT_FALSE(EvaluateIntents(t, plan, bad).ok());
}

}  // namespace
}  // namespace inac::core
