// The rate bounds over every deployable plan (scheduler/routing/bounds.h): hand-computed values on
// the worked example and GRID's setting, and "every algorithm's evaluated rate is below them" on
// random small fabrics.
#include "scheduler/routing/bounds.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "scheduler/model/network.h"
#include "scheduler/routing/routing_algorithm.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/scheduler/routing_fixtures.h"

namespace inac::scheduler {
namespace {

struct Bounds {
  double single = -1;
  double chained = -1;
};

Bounds BoundsOf(const PlanningInput& input, int job = 0) {
  auto net = Network::Create(input);
  EXPECT_TRUE(net.ok()) << net.status();
  if (!net.ok()) return {};
  auto single = SingleLevelBound(**net, job);
  auto chained = ChainedBound(**net, job);
  EXPECT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(chained.ok()) << chained.status();
  if (!single.ok() || !chained.ok()) return {};
  EXPECT_EQ(single->status, "optimal");
  EXPECT_EQ(chained->status, "optimal");
  return {single->gbps, chained->gbps};
}

// GRID's simulation setting as bench/routing_bench.cc builds it (`FatTree`, `Instance`): fat-tree
// k = 8 with 6 hosts per edge switch, 100 Gbps links, switch processing uniform in [100, 3200],
// `workers` random hosts and one PS with 100 Gbps ingress.
PlanningInput GridSetting(const std::string& placement, uint64_t seed, int workers, int ps = 1,
                          int k = 8, int hosts_per_edge = 6, double lo = 100) {
  core::GeneratorOptions o;
  o.seed = seed;
  o.ina = *core::ParseInaPlacement(placement);
  o.link_gbps = 100;
  o.processing_gbps_lo = lo;
  o.processing_gbps_hi = 3200;
  auto t = core::GenerateFatTree(k, o, hosts_per_edge);
  EXPECT_TRUE(t.ok());
  PlanningInput in;
  in.topology = *t;
  in.seed = seed;
  std::mt19937_64 rng(seed * 7919 + workers);
  std::vector<std::string> hosts;
  for (const auto& h : t->hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  core::JobSpec s = fixtures::PsJobSpec(
      "bench", std::vector<std::string>(hosts.begin(), hosts.begin() + workers),
      std::vector<std::string>(hosts.begin() + workers, hosts.begin() + workers + ps),
      {.iterations = 100});
  for (auto& h : in.topology.hosts) {
    if (std::find(s.parameter_servers.begin(), s.parameter_servers.end(), h.id) !=
        s.parameter_servers.end()) {
      h.ingress_gbps = 100;
    }
  }
  in.jobs.push_back(JobInput{1, s});
  return in;
}

TEST(RateBoundsTest, GridExampleIsThreeGbps) {
  // examples/grid-example/: 8 workers behind S1 (W1-W4), S2 (W5, W6) and S3 (W7, W8, the PS),
  // every link 3 Gbps except S3~PS (9), switches and PS 9 Gbps. By hand:
  //   <= 3: W1's only link, W1 -> S1, has 3 Gbps and carries all of W1's gradient (λ) whatever
  //         the plan (the LP's access-link bound of the S1 group);
  //   >= 3: grid's plan reaches 3 Gbps (GridExampleTest) and is single level: every worker at one
  //         node, S1's partial sum and the others' to the PS; the LP models every such plan.
  // So both bounds are exactly 3.
  const Bounds b = BoundsOf(testing::LoadExample("grid-example"));
  EXPECT_NEAR(b.single, 3.0, 1e-6);
  EXPECT_NEAR(b.chained, 3.0, 1e-6);
}

TEST(RateBoundsTest, GridExampleWithFastAccessLinks) {
  // The same network with 100 Gbps worker links: the access links no longer bind. By hand, for
  // the chained bound: every input of the PS crosses S3 -> PS and the PS's ingress (9), and the
  // PS receives every chunk at least once (coverage 1): λ ≤ 9. S1's four workers send 4λ into S1,
  // which sums at most 9 Gbps of it (processing) and whose partial sum is at least a quarter of
  // what it sums (y ≥ each worker's share, r ≤ y); what leaves S1 (at most 3 + 3 over L1, L2) is
  // at least 4λ − 9 + 9/4, so λ ≤ (6 + 6.75) / 4 = 3.1875 for single-level plans. Chains do not
  // help S1 (its only exits are L1 and L2). The LP gives less than that (the rest of the network
  // binds too: it gives 69/22 ≈ 3.136 for both), and at least grid's 3.
  PlanningInput in = testing::LoadExample("grid-example");
  for (core::Link& l : in.topology.links) {
    if (l.a.front() == 'W') l.gbps = 100;
  }
  const Bounds b = BoundsOf(in);
  EXPECT_GE(b.single, 3.0 - 1e-6);
  EXPECT_LE(b.single, 3.1875 + 1e-6);
  EXPECT_LE(b.single, b.chained + 1e-6);
  EXPECT_LE(b.chained, 3.1875 + 1e-6);
}

TEST(RateBoundsTest, GridSettingSingleLevelOptimum) {
  // GRID's setting (a), INA on every edge switch, seed 1. 40 workers: λ = 100, the PS's ingress
  // (every chunk reaches the PS at least once) and the workers' access links. 70 workers: more
  // than 64 inputs per chunk, so every chunk reaches the PS as at least ⌈70/64⌉ = 2 partial sums
  // or raw chunks: λ ≤ 100 / 2 = 50, and the LP reaches it. Chains: still ≤ 100 (PS ingress).
  {
    const Bounds b = BoundsOf(GridSetting("tor", 1, 40));
    EXPECT_NEAR(b.single, 100.0, 1e-6);
    EXPECT_NEAR(b.chained, 100.0, 1e-6);
  }
  {
    const Bounds b = BoundsOf(GridSetting("tor", 1, 70));
    EXPECT_NEAR(b.single, 50.0, 1e-6);
    EXPECT_LE(b.chained, 100.0 + 1e-6);
    EXPECT_GE(b.chained, b.single - 1e-6);
  }
}

TEST(RateBoundsTest, TooLargeGivesTheClosedForm) {
  // bench/routing_bench.cc's "scale" instance: fat-tree k = 32 (INA on its 512 edge switches),
  // 1024 workers, 4 PSs of 100 Gbps ingress. The LPs would have ~18 million columns, above
  // kMaxBoundColumns: not built; the closed form is returned. Single level: each PS receives
  // every chunk of its shard as at least ⌈1024/64⌉ = 16 partial sums or raw chunks, so
  // X_s ≤ 100/16 and λ = Σ_s X_s ≤ 4 · 100/16 = 25. Chained: ⌈1024/64²⌉ = 1, λ ≤ 400, and the
  // 100 Gbps access links give 100.
  const PlanningInput in = GridSetting("tor", 1, 1024, 4, 32, -1, 400);
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  auto single = SingleLevelBound(**net, 0);
  auto chained = ChainedBound(**net, 0);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE(chained.ok()) << chained.status();
  EXPECT_EQ(single->status, "too_large: closed_form");
  EXPECT_EQ(chained->status, "too_large: closed_form");
  EXPECT_NEAR(single->gbps, 25.0, 1e-9);
  EXPECT_NEAR(chained->gbps, 100.0, 1e-9);
  EXPECT_GT(single->columns, kMaxBoundColumns);
}

TEST(RateBoundsTest, ResidualAndErrors) {
  PlanningInput in = testing::LoadExample("grid-example");
  auto net = Network::Create(in);
  ASSERT_TRUE(net.ok());
  // Half of every residual capacity: every constraint scales, so does the bound.
  std::vector<double> half = (*net)->residuals();
  for (double& r : half) r /= 2;
  auto b = SingleLevelBound(**net, 0, &half);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(b->gbps, 1.5, 1e-6);
  EXPECT_GT(b->columns, 0);
  EXPECT_GT(b->rows, 0);
  std::vector<double> wrong(3, 1.0);
  EXPECT_EQ(SingleLevelBound(**net, 0, &wrong).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChainedBound(**net, 5).status().code(), absl::StatusCode::kInvalidArgument);
  auto size = RateBoundSize(**net, 0, /*chains=*/true);
  ASSERT_TRUE(size.ok());
  auto chained = ChainedBound(**net, 0);
  ASSERT_TRUE(chained.ok());
  EXPECT_EQ(size->columns, chained->columns);
  EXPECT_EQ(size->rows, chained->rows);
}

// A random small instance: fat-tree k = 4 (3 hosts per edge switch) or a leaf-spine, random INA
// placement, link capacities and processing; one job of 3-20 workers and 1-2 PSs; sometimes a
// worker or the PS gets a second link (multi-homed hosts are sources of their own in the LP).
PlanningInput RandomInstance(uint64_t seed) {
  std::mt19937_64 rng(seed * 104729 + 17);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  core::GeneratorOptions o;
  o.seed = seed;
  const int placement = pick(0, 3);
  o.ina.kind = placement == 0   ? core::InaPlacement::Kind::kTor
               : placement == 1 ? core::InaPlacement::Kind::kAll
                                : core::InaPlacement::Kind::kRandom;
  o.ina.fraction = placement == 2 ? 0.3 : 0.6;
  o.link_gbps = 100;
  o.processing_gbps_lo = uniform(20, 200);
  o.processing_gbps_hi = o.processing_gbps_lo + uniform(0, 400);
  auto t = seed % 2 == 0 ? core::GenerateFatTree(4, o, 3) : core::GenerateLeafSpine(4, 3, 6, o);
  PlanningInput in;
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return in;
  in.topology = *t;
  in.seed = seed;
  in.options.rounds = 4;
  // Fabric links slower than the access links, so that the network (not a worker's own link)
  // limits the rate.
  for (core::Link& l : in.topology.links) {
    const bool access =
        in.topology.FindHost(l.a) != nullptr || in.topology.FindHost(l.b) != nullptr;
    l.gbps = access ? uniform(60, 100) : uniform(5, 50);
  }
  std::vector<std::string> hosts;
  for (const core::Host& h : in.topology.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  const int workers = pick(3, 20);
  const int ps = pick(1, 2);
  std::vector<std::string> w(hosts.begin(), hosts.begin() + workers);
  std::vector<std::string> p(hosts.begin() + workers, hosts.begin() + workers + ps);
  for (core::Host& h : in.topology.hosts) {
    if (std::find(p.begin(), p.end(), h.id) != p.end() && pick(0, 1) == 1) {
      h.ingress_gbps = uniform(10, 100);
    }
  }
  if (pick(0, 2) == 0) {
    // A second link for a worker or the PS, to a switch it is not attached to yet.
    const std::string host = pick(0, 1) == 0 ? w[0] : p[0];
    std::string current;
    for (const core::Link& l : in.topology.links) {
      if (l.a == host) current = l.b;
      if (l.b == host) current = l.a;
    }
    const core::Switch* other = nullptr;
    for (const core::Switch& s : in.topology.switches) {
      if (s.id != current && s.id.front() == current.front()) other = &s;
    }
    if (other != nullptr) {
      core::Link extra;
      extra.id = absl::StrCat(host, "~", other->id);
      extra.a = host;
      extra.b = other->id;
      extra.gbps = uniform(10, 100);
      in.topology.links.push_back(extra);
    }
  }
  in.jobs.push_back(JobInput{1, fixtures::PsJobSpec("j", w, p)});
  return in;
}

TEST(RateBoundsTest, EveryAlgorithmIsBelowTheBounds) {
  const std::vector<std::string> single_level = {"grid", "grid-split", "switchml", "no_ina",
                                                 "inart"};
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const PlanningInput in = RandomInstance(seed);
    ASSERT_EQ(in.jobs.size(), 1u);
    const Bounds b = BoundsOf(in);
    EXPECT_GT(b.single, 0);
    EXPECT_LE(b.single, b.chained + 1e-6);
    for (const std::string& name : RoutingAlgorithmNames()) {
      if (name == "optimal") continue;
      SCOPED_TRACE(name);
      auto planned = PlanRouting(name, in);
      ASSERT_TRUE(planned.ok()) << planned.status();
      const double rate = planned->plan.jobs[0].rate_gbps;
      EXPECT_LE(rate, b.chained + 1e-6);
      if (std::find(single_level.begin(), single_level.end(), name) != single_level.end()) {
        EXPECT_LE(rate, b.single + 1e-6);
      }
    }
  }
}

// Not a test: the figures of the final report (bound values, LP sizes, build + solve times).
// Run by hand: scheduler_test --gtest_also_run_disabled_tests --gtest_filter='*Figures*'
TEST(RateBoundsTest, DISABLED_Figures) {
  auto report = [](const std::string& label, const PlanningInput& in) {
    auto net = Network::Create(in);
    ASSERT_TRUE(net.ok());
    for (bool chains : {false, true}) {
      auto size = RateBoundSize(**net, 0, chains);
      ASSERT_TRUE(size.ok());
      const auto start = std::chrono::steady_clock::now();
      auto b = chains ? ChainedBound(**net, 0) : SingleLevelBound(**net, 0);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::printf("%-28s %-7s columns %9lld rows %9lld  %s  %.0f ms\n", label.c_str(),
                  chains ? "chained" : "single", static_cast<long long>(size->columns),
                  static_cast<long long>(size->rows),
                  b.ok() ? absl::StrCat(b->gbps, " Gbps (", b->status, ")").c_str()
                         : std::string(b.status().message()).c_str(),
                  ms);
      std::fflush(stdout);
    }
  };
  for (const char* placement : {"tor", "random:0.2"}) {
    for (int workers : {40, 70, 100}) {
      report(absl::StrCat("k=8 ", placement, " W=", workers), GridSetting(placement, 1, workers));
    }
  }
  report("k=16 tor W=256 4 PS", GridSetting("tor", 1, 256, 4, 16, -1, 400));
  report("k=32 tor W=1024 4 PS", GridSetting("tor", 1, 1024, 4, 32, -1, 400));
}

}  // namespace
}  // namespace inac::scheduler
