// Spread candidates (docs/routing.md section 7, k=32 / 1024 workers): PathCache::GetDiverse's
// arc-diverse minimum-hop paths, BuildCandidates(..., spread = true), TrimDetours, and the
// planner's choice of spread candidates for large jobs (PlanningOptions::spread_min_columns).
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/generators.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/routing/routing_lp.h"
#include "tests/fixtures/sample_jobs.h"

namespace inac::scheduler {
namespace {

core::Topology FatTree(int k, int hosts_per_edge = 0, double lo = 400, double hi = 3200) {
  core::GeneratorOptions o;
  o.ina = *core::ParseInaPlacement("tor");
  o.processing_gbps_lo = lo;
  o.processing_gbps_hi = hi;
  auto t = hosts_per_edge > 0 ? core::GenerateFatTree(k, o, hosts_per_edge)
                              : core::GenerateFatTree(k, o);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The pod of a fat-tree switch named e<pod>_<i> / a<pod>_<i>; -1 for a core (c<i>).
int PodOf(const std::string& name) {
  if (name.empty() || name[0] == 'c') return -1;
  return std::stoi(name.substr(1, name.find('_') - 1));
}

void ExpectValidPath(const core::Graph& g, const Path& p, int src, int dst) {
  ASSERT_EQ(p.nodes.size(), p.arcs.size() + 1);
  EXPECT_EQ(p.nodes.front(), src);
  EXPECT_EQ(p.nodes.back(), dst);
  for (size_t i = 0; i < p.arcs.size(); ++i) {
    EXPECT_EQ(g.arc(p.arcs[i]).from, p.nodes[i]);
    EXPECT_EQ(g.arc(p.arcs[i]).to, p.nodes[i + 1]);
  }
}

TEST(DiversePathsTest, MinimumHopPathsThroughDistinctAggregationAndCoreSwitches) {
  core::Topology t = FatTree(8);
  core::Graph g(t);
  PathCache cache(g, 4);
  int pairs = 0;
  for (int s = 0; s < g.num_nodes(); ++s) {
    for (int d = 0; d < g.num_nodes(); ++d) {
      if (!g.is_switch(s) || !g.is_switch(d) || g.name(s)[0] != 'e' || g.name(d)[0] != 'e') {
        continue;
      }
      if (PodOf(g.name(s)) == PodOf(g.name(d))) continue;
      const std::vector<Path>& paths = cache.GetDiverse(s, d);
      ASSERT_EQ(paths.size(), 4u);
      std::set<int> src_aggs, cores, dst_aggs;
      for (const Path& p : paths) {
        ExpectValidPath(g, p, s, d);
        EXPECT_EQ(p.hops(), cache.HopsFrom(s)[d]);  // minimum-hop: 4 on a fat-tree
        ASSERT_EQ(p.nodes.size(), 5u);
        src_aggs.insert(p.nodes[1]);
        cores.insert(p.nodes[2]);
        dst_aggs.insert(p.nodes[3]);
      }
      // k=8: 4 aggregation switches per pod, 16 cores: 4 diverse paths share none of them.
      EXPECT_EQ(src_aggs.size(), 4u);
      EXPECT_EQ(cores.size(), 4u);
      EXPECT_EQ(dst_aggs.size(), 4u);
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 32 * 28);
}

TEST(DiversePathsTest, PairsSpreadOverTheCoresWhereYensPathsConcentrate) {
  core::Topology t = FatTree(8);
  core::Graph g(t);
  PathCache cache(g, 4);
  const int dst = g.index("e0_0");
  ASSERT_GE(dst, 0);
  std::set<int> yen_cores, diverse_cores;
  for (int s = 0; s < g.num_nodes(); ++s) {
    if (!g.is_switch(s) || g.name(s)[0] != 'e' || PodOf(g.name(s)) == 0) continue;
    for (const Path& p : cache.Get(s, dst)) yen_cores.insert(p.nodes[2]);
    for (const Path& p : cache.GetDiverse(s, dst)) diverse_cores.insert(p.nodes[2]);
  }
  // Yen's arc-id order sends all 28 ToRs of the other pods through the same few cores; the
  // per-pair order of GetDiverse uses (nearly) all 16.
  EXPECT_LE(yen_cores.size(), 4u);
  EXPECT_GE(diverse_cores.size(), 14u);
}

TEST(DiversePathsTest, DeterministicAndFilledWithYensPathsWhenFewAreMinimumHop) {
  core::Topology t = FatTree(4, 2);
  core::Graph g(t);
  PathCache a(g, 4), b(g, 4);
  // Same pod: 2 minimum-hop paths (one per aggregation switch); the other 2 are Yen's longer
  // ones, shortest first, none twice.
  const int s = g.index("e0_0"), d = g.index("e0_1");
  const std::vector<Path>& paths = a.GetDiverse(s, d);
  ASSERT_EQ(paths.size(), std::min<size_t>(4, KShortestPaths(g, s, d, 4).size()));
  ASSERT_GE(paths.size(), 3u);
  EXPECT_EQ(paths[0].hops(), 2);
  EXPECT_EQ(paths[1].hops(), 2);
  EXPECT_GT(paths[2].hops(), 2);
  for (size_t i = 0; i < paths.size(); ++i) {
    ExpectValidPath(g, paths[i], s, d);
    if (i > 0) {
      EXPECT_LE(paths[i - 1].hops(), paths[i].hops());
    }
    for (size_t j = 0; j < i; ++j) EXPECT_NE(paths[i].arcs, paths[j].arcs);
  }
  // Hosts: a single-homed host's paths are its ToR's behind its link; equal across caches.
  const int h = g.index("h1_0_0"), p = g.index("h2_1_1");
  ASSERT_GE(h, 0);
  ASSERT_GE(p, 0);
  const std::vector<Path>& hp = a.GetDiverse(h, p);
  EXPECT_EQ(hp, b.GetDiverse(h, p));
  ASSERT_EQ(hp.size(), 4u);
  for (const Path& q : hp) {
    ExpectValidPath(g, q, h, p);
    EXPECT_EQ(q.hops(), 6);
  }
  EXPECT_EQ(a.GetDiverse(s, s).size(), 1u);
  EXPECT_TRUE(a.GetDiverse(s, d).size() == b.GetDiverse(s, d).size() &&
              a.GetDiverse(s, d) == b.GetDiverse(s, d));
}

struct Instance {
  PlanningInput input;
  std::unique_ptr<Network> net;
};

// One job of `workers` random hosts and `ps` PSs on `t`.
Instance MakeInstance(core::Topology t, int workers, int ps, uint64_t seed) {
  Instance in;
  in.input.topology = std::move(t);
  std::vector<std::string> hosts;
  for (const auto& h : in.input.topology.hosts) hosts.push_back(h.id);
  std::mt19937_64 rng(seed);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  in.input.jobs.push_back(JobInput{
      1, fixtures::PsJobSpec(
             "spread", std::vector<std::string>(hosts.begin(), hosts.begin() + workers),
             std::vector<std::string>(hosts.begin() + workers, hosts.begin() + workers + ps))});
  auto net = Network::Create(in.input);
  EXPECT_TRUE(net.ok()) << net.status();
  in.net = std::move(*net);
  return in;
}

TEST(TrimDetoursTest, FitsTheBudgetLastRankFirstAndKeepsEverythingElse) {
  Instance in = MakeInstance(FatTree(4, 6), 40, 2, 3);
  PathCache cache(in.net->graph(), 4);
  const JobCandidates full =
      BuildCandidates(*in.net, cache, 0, PsNodes(*in.net, 0), {0.5, 0.5}, 6, true);
  ASSERT_TRUE(full.spread);
  auto detours = [](const JobCandidates& c, int rank) {
    int n = 0;
    for (const PairCandidates& pc : c.pairs) {
      for (const AggregationOption& o : pc.options) n += rank < 0 ? o.detour < 0 : o.detour == rank;
    }
    return n;
  };
  int ranks = 0;
  for (const PairCandidates& pc : full.pairs) {
    for (const AggregationOption& o : pc.options) ranks = std::max(ranks, o.detour + 1);
  }
  ASSERT_GE(ranks, 3);
  ASSERT_GT(detours(full, 0), 0);

  JobCandidates same = full;
  EXPECT_EQ(TrimDetours(CountLpColumns(full), &same), ranks);  // fits already: untouched
  EXPECT_EQ(CountLpColumns(same), CountLpColumns(full));

  JobCandidates trimmed = full;
  const int64_t budget = CountLpColumns(full) - 1;
  const int keep = TrimDetours(budget, &trimmed);
  EXPECT_LT(keep, ranks);
  EXPECT_LE(CountLpColumns(trimmed), budget);
  EXPECT_EQ(detours(trimmed, -1), detours(full, -1));  // the PS and on-path switches stay
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(detours(trimmed, r), r < keep ? detours(full, r) : 0) << "rank " << r;
  }
  // Every option still has its streams; no stream lost that a kept option uses.
  for (const PairCandidates& pc : trimmed.pairs) {
    for (const AggregationOption& o : pc.options) {
      if (o.agg == trimmed.ps[pc.ps_index]) continue;
      EXPECT_TRUE(trimmed.streams.count({o.agg, trimmed.ps[pc.ps_index]}));
    }
  }
  JobCandidates none = full;
  EXPECT_EQ(TrimDetours(1, &none), 0);
  EXPECT_EQ(detours(none, -1), detours(full, -1));
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(detours(none, r), 0);
}

TEST(SpreadCandidatesTest, SmallJobsKeepYensCandidates) {
  Instance in = MakeInstance(FatTree(4, 6), 40, 2, 5);
  in.input.options.rounds = 4;
  auto by_default = PlanRouting("grid", in.input);
  PlanningInput yen = in.input;
  yen.options.spread_min_columns = -1;
  auto never = PlanRouting("grid", yen);
  ASSERT_TRUE(by_default.ok() && never.ok());
  EXPECT_EQ(by_default->plan, never->plan);  // 40 · 2 · 4 · 8 = 2,560 estimated columns
}

// A k=16 fat-tree with one job of 256 workers and 4 PSs, as routing_bench's scale case.
TEST(SpreadCandidatesTest, LargeJobsPlanFarHigherRatesSpread) {
  Instance in = MakeInstance(FatTree(16), 256, 4, 16 * 7919 + 256);
  in.input.options.rounds = 4;
  auto spread = PlanRouting("grid", in.input);  // 256 · 4 · 4 · 8 = 32,768 > 20,000: spread
  PlanningInput yen = in.input;
  yen.options.spread_min_columns = -1;
  auto never = PlanRouting("grid", yen);
  ASSERT_TRUE(spread.ok() && never.ok());
  const core::JobPlan& s = spread->plan.jobs[0];
  const core::JobPlan& y = never->plan.jobs[0];
  ASSERT_TRUE(s.lp_bound_gbps && y.lp_bound_gbps);
  EXPECT_GT(s.rate_gbps, 2 * y.rate_gbps) << s.rate_gbps << " vs " << y.rate_gbps;
  EXPECT_GT(*s.lp_bound_gbps, 2 * *y.lp_bound_gbps);
  EXPECT_LE(s.rate_gbps, *s.lp_bound_gbps * (1 + 1e-9));
  // Deterministic.
  auto again = PlanRouting("grid", in.input);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->plan, spread->plan);
}

}  // namespace
}  // namespace inac::scheduler
