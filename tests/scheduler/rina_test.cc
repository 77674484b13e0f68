// scheduler/ring/rina.h: Rina, plain ring and hierarchical all-reduce in the flow model, with
// expectations computed by hand in the comments (docs/rina.md has the model).
#include "scheduler/ring/rina.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/generators.h"
#include "core/ring_intents.h"
#include "scheduler/planner.h"

namespace inac::scheduler {
namespace {

// Three racks behind one spine, 10 Gbps links of 1 µs: lf0 (h0_0, h0_1, h0_2), lf1 (h1_0, h1_1),
// lf2 (h2_0, h2_1). `ina` lists the INA-capable leaves (processing 100 Gbps).
core::Topology ThreeRacks(const std::vector<std::string>& ina) {
  core::Topology t;
  for (std::string id : {"sp0", "lf0", "lf1", "lf2"}) {
    core::Switch s;
    s.id = id;
    if (std::find(ina.begin(), ina.end(), id) != ina.end()) {
      s.ina.capable = true;
      s.ina.processing_gbps = 100;
      s.ina.aggregators = 1000;
    }
    t.switches.push_back(s);
  }
  auto link = [&](const std::string& a, const std::string& b) {
    core::Link l;
    l.id = core::DefaultLinkId(a, b);
    l.a = a;
    l.b = b;
    l.gbps = 10;
    l.latency_us = 1;
    t.links.push_back(l);
  };
  for (std::string lf : {"lf0", "lf1", "lf2"}) link(lf, "sp0");
  const std::vector<std::pair<std::string, std::string>> hosts = {
      {"h0_0", "lf0"}, {"h0_1", "lf0"}, {"h0_2", "lf0"}, {"h1_0", "lf1"},
      {"h1_1", "lf1"}, {"h2_0", "lf2"}, {"h2_1", "lf2"}};
  for (const auto& [h, lf] : hosts) {
    core::Host host;
    host.id = h;
    t.hosts.push_back(host);
    link(h, lf);
  }
  return t;
}

PlanningInput RingInput(core::Topology t, std::vector<std::string> workers) {
  PlanningInput in;
  in.topology = std::move(t);
  JobInput job;
  job.id = 7;
  job.spec.name = "ring";
  job.spec.allreduce = core::AllReduce::kRing;
  job.spec.workers = std::move(workers);
  job.spec.gradient_bytes = 100000000;  // 0.8 Gbit
  job.spec.compute_ms = 10;
  job.spec.iterations = 1;
  job.spec.batch_size = 32;
  in.jobs.push_back(job);
  return in;
}

const std::vector<std::string> kAllSeven = {"h0_0", "h0_1", "h0_2", "h1_0", "h1_1", "h2_0", "h2_1"};

// A planner request for ring job 7 over every host of `t` (which must outlive the request).
PlanRequest Job7Request(const core::Topology& t) {
  PlanRequest request;
  request.topology = &t;
  core::Job job;
  job.id = 7;
  job.spec = RingInput(t, kAllSeven).jobs[0].spec;
  request.jobs.push_back(job);
  return request;
}

RingPlan Plan(const PlanningInput& in, RingKind kind, bool optimise_order = true) {
  auto net = Network::Create(in);
  EXPECT_TRUE(net.ok()) << net.status();
  PathCache paths((*net)->graph(), 4);
  RingOptions o;
  o.kind = kind;
  o.optimise_order = optimise_order;
  auto plan = PlanRing(**net, paths, 0, (*net)->residuals(), o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

std::vector<std::string> Names(const Network& net, const std::vector<int>& nodes) {
  std::vector<std::string> out;
  for (int v : nodes) out.push_back(net.graph().name(v));
  return out;
}

// One INA rack (lf0) and two plain racks: n' = 5 members (the lf0 rack, h1_0, h1_1, h2_0, h2_1),
// f = 4/5. Every hop carries 2f = 1.6 per unit of ρ on its arcs (lf0 -> sp0 -> lf1 -> h1_0,
// h1_0 -> lf1 -> h1_1, h1_1 -> lf1 -> sp0 -> lf2 -> h2_0, h2_0 -> lf2 -> h2_1,
// h2_1 -> lf2 -> sp0 -> lf0), each arc on one hop only; the agent h0_0's access arcs 1 + 1/5 =
// 1.2, h0_1's and h0_2's 1; lf0's processing m + f = 3.8 of 100 Gbps. ρ = 10 / 1.6 = 6.25 Gbps,
// b_ring = 1.6 ρ = 10 Gbps. Latency: the longest hop has 4 links of 1 µs, 2 (n' - 1) = 8 steps:
// 32 µs. T = 0.8 Gbit / 6.25 Gbps = 128 ms + 0.032 ms.
TEST(RinaTest, ThreeRackTimeByHand) {
  const PlanningInput in = RingInput(ThreeRacks({"lf0"}), kAllSeven);
  auto net = *Network::Create(in);
  const RingPlan plan = Plan(in, RingKind::kRina);
  EXPECT_EQ(Names(*net, plan.members),
            (std::vector<std::string>{"h0_0", "h1_0", "h1_1", "h2_0", "h2_1"}));
  ASSERT_EQ(plan.size(), 5);
  EXPECT_EQ(net->graph().name(plan.racks[0].tor), "lf0");
  EXPECT_EQ(plan.racks[1].tor, -1);
  EXPECT_NEAR(plan.algbw_gbps, 6.25, 1e-9);
  EXPECT_NEAR(plan.ring_gbps, 10.0, 1e-9);
  EXPECT_NEAR(plan.rack_gbps, 10 / 1.2, 1e-9);  // the agent's access arcs alone
  EXPECT_NEAR(plan.latency_us, 32.0, 1e-9);
  EXPECT_NEAR(plan.comm_ms, 128.032, 1e-9);
  EXPECT_NEAR(plan.iteration_ms, 138.032, 1e-9);
  EXPECT_EQ(plan.hops.size(), 5u);
  // The JobPlan: ring of hosts, rack flows toward the agent, hop flows, b_ring as the rate.
  const core::JobPlan jp = RingToJobPlan(*net, plan);
  EXPECT_EQ(jp.ring, (std::vector<std::string>{"h0_0", "h1_0", "h1_1", "h2_0", "h2_1"}));
  EXPECT_NEAR(jp.rate_gbps, 10.0, 1e-9);
  EXPECT_NEAR(jp.comm_ms, 128.032, 1e-9);
  ASSERT_EQ(jp.aggregator_paths.size(), 1u);
  EXPECT_EQ(jp.aggregator_paths[0].path, (std::vector<std::string>{"lf0", "h0_0"}));
  int rack_flows = 0;
  for (const core::FlowPlan& f : jp.flows) {
    if (f.aggregation_node == "lf0" && f.ps == "h0_0" && f.worker != "h2_1") ++rack_flows;
  }
  EXPECT_EQ(rack_flows, 2);  // h0_1, h0_2
  EXPECT_TRUE(jp.ps_shares.empty());
}

// The same racks without INA. Plain ring: n = 7, 2f = 12/7 on every host's arcs: ρ = 10 / (12/7)
// = 35/6 Gbps; 12 steps of at most 4 µs: 48 µs. Hierarchical: leaders h0_0 (m = 3), h1_0, h2_0,
// n' = 3, 2f = 4/3; h0_0's access arcs carry (m - 1) + 2f = 10/3: ρ = 3 Gbps; 4 steps × 4 µs.
TEST(RinaTest, PlainAndHierarchicalBaselinesByHand) {
  const PlanningInput in = RingInput(ThreeRacks({"lf0"}), kAllSeven);
  const RingPlan plain = Plan(in, RingKind::kPlain);
  EXPECT_EQ(plain.size(), 7);
  EXPECT_NEAR(plain.algbw_gbps, 35.0 / 6, 1e-9);
  EXPECT_NEAR(plain.comm_ms, 0.8 / (35.0 / 6) * 1e3 + 0.048, 1e-9);
  const RingPlan hier = Plan(in, RingKind::kHierarchical);
  EXPECT_EQ(hier.size(), 3);
  EXPECT_NEAR(hier.algbw_gbps, 3.0, 1e-9);
  EXPECT_NEAR(hier.comm_ms, 0.8 / 3.0 * 1e3 + 0.016, 1e-9);
}

// Partial deployment lies between the plain ring and full deployment. Full: n' = 3, 2f = 4/3 on
// the ToR-to-ToR hops (lf0 -> sp0 -> lf1, ...): 10 / (4/3) = 7.5; agents 1 + 1/3: 7.5; lf0's
// processing 3 + 2/3 of 100: 27.3. ρ = 7.5 > 6.25 (one INA rack) > 35/6 (plain ring).
TEST(RinaTest, PartialDeploymentBetweenPlainRingAndFull) {
  const double plain = Plan(RingInput(ThreeRacks({}), kAllSeven), RingKind::kRina).algbw_gbps;
  const double partial =
      Plan(RingInput(ThreeRacks({"lf0"}), kAllSeven), RingKind::kRina).algbw_gbps;
  const double full =
      Plan(RingInput(ThreeRacks({"lf0", "lf1", "lf2"}), kAllSeven), RingKind::kRina).algbw_gbps;
  EXPECT_NEAR(plain, 35.0 / 6, 1e-9);  // Rina without INA racks is the plain ring
  EXPECT_NEAR(partial, 6.25, 1e-9);
  EXPECT_NEAR(full, 7.5, 1e-9);
  EXPECT_LT(plain, partial);
  EXPECT_LT(partial, full);
}

// The agent is the worker whose choice gives the highest ρ: with 3 Gbps of other traffic on
// h0_0 -> lf0, h0_0 as agent would cap ρ at 7 / 1.2 = 5.83 < 6.25; h0_1 and h0_2 both keep 6.25
// (their arcs: 10 / 1.2 = 8.3), and h0_1 has the lower rank.
TEST(RinaTest, AgentAvoidsTheLoadedAccessLink) {
  PlanningInput in = RingInput(ThreeRacks({"lf0"}), kAllSeven);
  in.background.arcs.push_back({"h0_0", "lf0", 3});
  auto net = *Network::Create(in);
  const RingPlan plan = Plan(in, RingKind::kRina);
  EXPECT_EQ(net->graph().name(plan.members[0]), "h0_1");
  EXPECT_EQ(net->graph().name(plan.racks[0].agent), "h0_1");
  EXPECT_NEAR(plan.algbw_gbps, 6.25, 1e-9);
  // Without the load the lowest rank, h0_0, is the agent.
  EXPECT_EQ(net->graph().name(
                Plan(RingInput(ThreeRacks({"lf0"}), kAllSeven), RingKind::kRina).racks[0].agent),
            "h0_0");
}

int CoreCrossings(const Network& net, const RingPlan& plan) {
  int crossings = 0;
  for (const RingHop& hop : plan.hops) {
    bool core = false;
    for (int a : hop.parts[0].arcs) core |= net.graph().name(net.graph().arc(a).to)[0] == 'c';
    crossings += core;
  }
  return crossings;
}

// Fat-tree k = 4 (INA ToRs), one worker per rack listed alternating pods 0 and 1: the naive (spec)
// order crosses the core on all 4 hops, the planned order on 2 (pod 0's racks, then pod 1's).
TEST(RinaTest, RingOrderGroupsPods) {
  core::GeneratorOptions o;
  auto t = core::GenerateFatTree(4, o);
  ASSERT_TRUE(t.ok()) << t.status();
  const PlanningInput in = RingInput(*t, {"h0_0_0", "h1_0_0", "h0_1_0", "h1_1_0"});
  auto net = *Network::Create(in);
  const RingPlan naive = Plan(in, RingKind::kRina, /*optimise_order=*/false);
  const RingPlan planned = Plan(in, RingKind::kRina);
  EXPECT_EQ(CoreCrossings(*net, naive), 4);
  EXPECT_EQ(CoreCrossings(*net, planned), 2);
  EXPECT_LT(planned.total_hops, naive.total_hops);
  EXPECT_GE(planned.algbw_gbps, naive.algbw_gbps * (1 - 1e-12));
  const std::vector<std::string> members = Names(*net, planned.members);
  // Racks of one pod are adjacent on the ring.
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& a = members[i];
    const std::string& b = members[(i + 1) % members.size()];
    const std::string& c = members[(i + 2) % members.size()];
    EXPECT_TRUE(a.substr(0, 2) == b.substr(0, 2) || b.substr(0, 2) == c.substr(0, 2))
        << a << " " << b << " " << c;
  }
}

// One abstract rack and nothing else (n' = 1): no ring, no hops; the agent h0_0 receives the whole
// completed sum and sends it back for the multicast: its arcs carry 1 + 1/1 = 2, ρ = 10 / 2 = 5
// Gbps (lf0: 3 + 0 of 100), T = 0.8 Gbit / 5 Gbps = 160 ms, no latency steps.
TEST(RinaTest, SingleRackIsAggregatedWithoutARing) {
  const RingPlan plan =
      Plan(RingInput(ThreeRacks({"lf0"}), {"h0_0", "h0_1", "h0_2"}), RingKind::kRina);
  EXPECT_EQ(plan.size(), 1);
  EXPECT_TRUE(plan.hops.empty());
  EXPECT_NEAR(plan.algbw_gbps, 5.0, 1e-9);
  EXPECT_EQ(plan.ring_gbps, 0);
  EXPECT_NEAR(plan.comm_ms, 160.0, 1e-9);
}

// Bad input: an unknown worker is InvalidArgument, not a crash.
TEST(RinaTest, UnknownWorkerIsInvalidArgument) {
  PlanningInput in = RingInput(ThreeRacks({"lf0"}), {"h0_0", "h1_0"});
  auto net = *Network::Create(in);
  in.jobs[0].spec.workers.push_back("nope");
  auto net2 = *Network::Create(in);
  PathCache paths(net2->graph(), 4);
  auto plan = PlanRing(*net2, paths, 0, net2->residuals());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
}

// The planner plans ring jobs as Rina: the ring of agents and plain workers, the rack's flows, a
// predicted rate and communication time.
TEST(RinaTest, ComputePlanPlansRingJobsAsRina) {
  const core::Topology t = ThreeRacks({"lf0"});
  PlanRequest request = Job7Request(t);
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->plan.jobs.size(), 1u);
  const core::JobPlan& jp = out->plan.jobs[0];
  EXPECT_EQ(jp.ring, (std::vector<std::string>{"h0_0", "h1_0", "h1_1", "h2_0", "h2_1"}));
  EXPECT_NEAR(jp.rate_gbps, 10.0, 1e-9);
  EXPECT_NEAR(jp.comm_ms, 128.032, 1e-9);
  EXPECT_NEAR(jp.iteration_ms, 138.032, 1e-9);
  EXPECT_EQ(jp.aggregator_paths.size(), 1u);
  // The hosts' view (GET /jobs/{id}/config): roles, neighbours, the rack's tag 7 * 64 + 0.
  const std::vector<core::RingRole> roles = core::RingRolesOf(jp, request.jobs[0].spec.workers, &t);
  ASSERT_EQ(roles.size(), 7u);
  EXPECT_EQ(roles[0].role, "agent");
  EXPECT_EQ(roles[0].prev, "h2_1");
  EXPECT_EQ(roles[0].next, "h1_0");
  EXPECT_EQ(roles[0].next_address, core::NodeAddress(t, "h1_0"));
  EXPECT_EQ(roles[0].tor, "lf0");
  EXPECT_EQ(roles[0].rack_tag, 7u * 64);
  EXPECT_EQ(roles[1].role, "rack-worker");
  EXPECT_EQ(roles[1].agent, "h0_0");
  EXPECT_TRUE(roles[1].prev.empty());
  EXPECT_EQ(roles[1].rack_tag, 7u * 64);
  EXPECT_EQ(roles[3].role, "member");
  EXPECT_EQ(roles[3].prev, "h0_0");
  EXPECT_EQ(roles[3].next, "h1_1");
  EXPECT_EQ(roles[3].rack_tag, 0u);
  EXPECT_TRUE(roles[3].agent.empty());
  EXPECT_EQ(core::RingRackTag(7, 2, 5), (1u << 30) + 7 * 64 + 2);
  EXPECT_EQ(core::RingHopTag(7, 0), 7u * 64 + 63);
}

// Ring jobs are pushed as Rina (docs/rina.md "Data plane"): the INA ToR of the abstract rack
// aggregates the rack's other workers toward the agent (an ina_job entry of the rack's tag, an
// input per worker, the result multicast to them) with aggregators granted from the pool (the
// 100 MB gradient wants more than lf0's 1000); the ring hops get routes both ways (data to the
// next member, acknowledgements back) and no aggregation; every ring member gets an ina_host
// entry.
TEST(RinaTest, ComputePlanPushesRackAggregationAndRingHops) {
  const core::Topology t = ThreeRacks({"lf0"});
  PlanRequest request = Job7Request(t);
  auto out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  const core::JobPlan& jp = out->plan.jobs[0];
  ASSERT_EQ(jp.aggregators.count("lf0"), 1u);
  EXPECT_EQ(jp.aggregators.at("lf0"), 1000);
  const uint32_t rack_tag = core::RingRackTag(7, 0, jp.generation);
  const uint32_t hop_tag = core::RingHopTag(7, jp.generation);
  std::map<std::string, const core::SwitchIntent*> by_id;
  for (const core::SwitchIntent& si : out->intents) by_id[si.switch_id] = &si;
  const core::SwitchIntent& lf0 = *by_id.at("lf0");
  ASSERT_EQ(lf0.jobs.size(), 1u);
  EXPECT_EQ(lf0.jobs[0].tag, rack_tag);
  EXPECT_EQ(lf0.jobs[0].fan_in, 2u);
  EXPECT_EQ(lf0.jobs[0].upstream_address, core::NodeAddress(t, "h0_0"));
  EXPECT_EQ(lf0.jobs[0].self_address, core::NodeAddress(t, "lf0"));
  EXPECT_EQ(lf0.jobs[0].window, 1000u);
  std::set<uint32_t> inputs;
  for (const auto& in : lf0.inputs) inputs.insert(in.source_address);
  EXPECT_EQ(inputs,
            (std::set<uint32_t>{core::NodeAddress(t, "h0_1"), core::NodeAddress(t, "h0_2")}));
  ASSERT_EQ(lf0.multicast_groups.size(), 1u);
  EXPECT_EQ(lf0.multicast_groups[0].egress_ports.size(), 2u);
  int hop_routes = 0;
  for (const core::SwitchIntent& si : out->intents) {
    for (const auto& j : si.jobs) EXPECT_NE(j.tag, hop_tag);
    for (const auto& r : si.routes) hop_routes += r.tag == hop_tag;
  }
  // 5 hops: h0_0 -> h1_0 (lf0, sp0, lf1), h1_0 -> h1_1 (lf1), h1_1 -> h2_0 (lf1, sp0, lf2),
  // h2_0 -> h2_1 (lf2), h2_1 -> h0_0 (lf2, sp0, lf0): 11 switches, twice (data and acks).
  EXPECT_EQ(hop_routes, 22);
  std::set<std::string> with_host_port;
  for (const core::SwitchIntent& si : out->intents) {
    for (const auto& h : si.host_ports) {
      for (const std::string& w : kAllSeven) {
        if (h.address == core::NodeAddress(t, w)) with_host_port.insert(w);
      }
    }
  }
  EXPECT_EQ(with_host_port.size(), kAllSeven.size());
  // Policy no_ina: no grant; the ToR still has the rack's entries (chunks go on unaggregated).
  request.options.memory_policy = "no_ina";
  out = ComputePlan(request);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->plan.jobs[0].aggregators.empty());
}

}  // namespace
}  // namespace inac::scheduler
