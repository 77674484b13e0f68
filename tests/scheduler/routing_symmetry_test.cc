// The speed-ups of docs/routing.md section 7 (k=32 / 1024 workers) must not change what they
// compute:
//  - the pruned Yen search (scheduler/model/paths.cc) returns the paths of a plain BFS Yen;
//  - the LP with interchangeable workers grouped (GroupInterchangeablePairs) has the optimum of
//    the per-worker LP, alone, with fixed shares, with a tighter access link, and jointly with a
//    worker shared by two jobs;
//  - the deterministic rounding of a group keeps the LP's aggregate (one member per option at
//    most off);
//  - grid plans stay deterministic with the reduction on.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
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

// Yen with a plain BFS (the implementation before the pruning), as the reference.
bool PlainBfs(const core::Graph& g, int s, int t, const std::vector<char>& arc_blocked,
              const std::vector<char>& node_blocked, Path* out) {
  std::vector<int> parent(g.num_nodes(), -1);
  std::vector<char> seen(g.num_nodes(), 0);
  std::deque<int> queue{s};
  seen[s] = 1;
  bool found = s == t;
  while (!queue.empty() && !found) {
    int v = queue.front();
    queue.pop_front();
    if (v != s && !g.is_switch(v)) continue;
    for (int a : g.out_arcs(v)) {
      if (arc_blocked[a]) continue;
      int w = g.arc(a).to;
      if (seen[w] || node_blocked[w]) continue;
      seen[w] = 1;
      parent[w] = a;
      if (w == t) {
        found = true;
        break;
      }
      queue.push_back(w);
    }
  }
  if (!found) return false;
  out->arcs.clear();
  for (int v = t; v != s; v = g.arc(parent[v]).from) out->arcs.push_back(parent[v]);
  std::reverse(out->arcs.begin(), out->arcs.end());
  out->nodes = {s};
  for (int a : out->arcs) out->nodes.push_back(g.arc(a).to);
  return true;
}

std::vector<Path> ReferenceYen(const core::Graph& g, int src, int dst, int k) {
  std::vector<Path> result;
  std::vector<char> arcs(g.num_arcs(), 0), nodes(g.num_nodes(), 0);
  Path first;
  if (k < 1 || !PlainBfs(g, src, dst, arcs, nodes, &first)) return result;
  result.push_back(first);
  if (src == dst) return result;
  std::vector<Path> candidates;
  while (static_cast<int>(result.size()) < k) {
    const Path prev = result.back();
    for (int i = 0; i + 1 < static_cast<int>(prev.nodes.size()); ++i) {
      int spur = prev.nodes[i];
      if (i > 0 && !g.is_switch(spur)) continue;
      std::fill(arcs.begin(), arcs.end(), 0);
      std::fill(nodes.begin(), nodes.end(), 0);
      for (const Path& p : result) {
        if (static_cast<int>(p.nodes.size()) > i &&
            std::equal(p.nodes.begin(), p.nodes.begin() + i + 1, prev.nodes.begin())) {
          arcs[p.arcs[i]] = 1;
        }
      }
      for (int j = 0; j < i; ++j) nodes[prev.nodes[j]] = 1;
      Path spur_path;
      if (!PlainBfs(g, spur, dst, arcs, nodes, &spur_path)) continue;
      Path total;
      total.nodes.assign(prev.nodes.begin(), prev.nodes.begin() + i);
      total.arcs.assign(prev.arcs.begin(), prev.arcs.begin() + i);
      total.nodes.insert(total.nodes.end(), spur_path.nodes.begin(), spur_path.nodes.end());
      total.arcs.insert(total.arcs.end(), spur_path.arcs.begin(), spur_path.arcs.end());
      auto same = [&](const Path& p) { return p.arcs == total.arcs; };
      if (std::none_of(result.begin(), result.end(), same) &&
          std::none_of(candidates.begin(), candidates.end(), same)) {
        candidates.push_back(std::move(total));
      }
    }
    if (candidates.empty()) break;
    auto best = std::min_element(candidates.begin(), candidates.end(), [](auto& a, auto& b) {
      return a.hops() != b.hops() ? a.hops() < b.hops() : a.arcs < b.arcs;
    });
    result.push_back(std::move(*best));
    candidates.erase(best);
  }
  return result;
}

core::Topology FatTree(int k, int hosts_per_edge, uint64_t seed, const char* placement = "tor") {
  core::GeneratorOptions o;
  o.seed = seed;
  o.ina = *core::ParseInaPlacement(placement);
  o.link_gbps = 100;
  o.processing_gbps_lo = 100;
  o.processing_gbps_hi = 3200;
  auto t = core::GenerateFatTree(k, o, hosts_per_edge);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

TEST(KShortestPathsTest, PrunedSearchFindsThePlainBfsPaths) {
  // A fat-tree with a few links down (irregular detours) and a leaf-spine.
  core::Topology fat = FatTree(6, 3, 1, "random:0.3");
  for (size_t i = 0; i < fat.links.size(); i += 7) fat.links[i].status = core::LinkStatus::kDown;
  core::GeneratorOptions o;
  auto leaf_spine = core::GenerateLeafSpine(6, 3, 2, o);
  ASSERT_TRUE(leaf_spine.ok());
  for (const core::Topology* t : {&fat, &*leaf_spine}) {
    core::Graph g(*t);
    std::mt19937_64 rng(7);
    PathCache cache(g, 6);
    int compared = 0;
    for (int q = 0; q < 300; ++q) {
      const int src = static_cast<int>(rng() % g.num_nodes());
      const int dst = static_cast<int>(rng() % g.num_nodes());
      for (int k : {1, 4, 6}) {
        const std::vector<Path> want = ReferenceYen(g, src, dst, k);
        EXPECT_EQ(KShortestPaths(g, src, dst, k), want) << g.name(src) << " -> " << g.name(dst);
        if (k == 6) {
          EXPECT_EQ(cache.Get(src, dst), want) << g.name(src) << " -> " << g.name(dst);
        }
        compared += !want.empty();
      }
    }
    EXPECT_GT(compared, 300);
  }
}

struct Instance {
  PlanningInput input;
  std::unique_ptr<Network> net;
};

// A fat-tree k=4 with 6 hosts per edge switch (several workers per ToR), INA on the edge.
Instance MakeInstance(uint64_t seed, int workers, int ps, int jobs = 1) {
  Instance in;
  in.input.topology = FatTree(4, 6, seed);
  std::vector<std::string> hosts;
  for (const auto& h : in.input.topology.hosts) hosts.push_back(h.id);
  std::mt19937_64 rng(seed);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  for (int j = 0; j < jobs; ++j) {
    // Job j's workers overlap job j-1's by half (shared workers for the joint LP).
    const int from = j * workers / 2;
    std::vector<std::string> w(hosts.begin() + from, hosts.begin() + from + workers);
    std::vector<std::string> p(hosts.end() - (j + 1) * ps, hosts.end() - j * ps);
    in.input.jobs.push_back(JobInput{j + 1, fixtures::PsJobSpec("sym", w, p)});
  }
  auto net = Network::Create(in.input);
  EXPECT_TRUE(net.ok()) << net.status();
  in.net = std::move(*net);
  return in;
}

std::vector<JobCandidates> Candidates(const Instance& in, PathCache& cache,
                                      const std::vector<double>& shares) {
  std::vector<JobCandidates> out;
  for (size_t j = 0; j < in.input.jobs.size(); ++j) {
    out.push_back(BuildCandidates(*in.net, cache, static_cast<int>(j),
                                  PsNodes(*in.net, static_cast<int>(j)), shares, 6));
  }
  return out;
}

double Optimum(const Instance& in, const std::vector<double>& residual,
               const std::vector<JobCandidates>& jobs, bool free) {
  RoutingLp lp = BuildRoutingLp(*in.net, residual, jobs, free);
  auto out = SolveRoutingLp(lp, jobs, free, 60);
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->solution.status, lp::SolveStatus::kOptimal);
  return out->solution.objective;
}

int LargestGroup(const JobCandidates& c) {
  size_t m = 0;
  for (const auto& g : c.groups) m = std::max(m, g.size());
  return static_cast<int>(m);
}

TEST(LpSymmetryTest, GroupedLpHasThePerWorkerOptimum) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Instance in = MakeInstance(seed, 30, 2);
    PathCache cache(in.net->graph(), 4);
    std::vector<JobCandidates> plain = Candidates(in, cache, {0.7, 0.3});
    std::vector<JobCandidates> grouped = plain;
    GroupInterchangeablePairs(*in.net, &grouped[0]);
    ASSERT_GE(LargestGroup(grouped[0]), 3) << "the instance has several workers per ToR";
    std::vector<double> residual = in.net->residuals();
    for (bool free : {true, false}) {
      const double want = Optimum(in, residual, plain, free);
      EXPECT_GT(want, 0);
      EXPECT_NEAR(Optimum(in, residual, grouped, free), want, 1e-6 * want)
          << "seed " << seed << (free ? " free shares" : " fixed shares");
    }
    // One worker's access link much tighter than its ToR neighbours': it caps λ in both.
    const PairCandidates& member = grouped[0].pairs[grouped[0].groups[0].back()];
    const int access = in.net->ArcResource(member.options[0].paths[0].arcs[0]);
    residual[access] = 1.5;
    const double want = Optimum(in, residual, plain, true);
    EXPECT_LE(want, 1.5 + 1e-9);
    EXPECT_NEAR(Optimum(in, residual, grouped, true), want, 1e-6 * want) << "seed " << seed;
  }
}

TEST(LpSymmetryTest, JointLpWithWorkersSharedByTwoJobs) {
  Instance in = MakeInstance(4, 24, 1, /*jobs=*/2);
  PathCache cache(in.net->graph(), 4);
  std::vector<JobCandidates> plain = Candidates(in, cache, {1.0});
  std::vector<JobCandidates> grouped = plain;
  for (JobCandidates& c : grouped) GroupInterchangeablePairs(*in.net, &c);
  ASSERT_GE(LargestGroup(grouped[0]), 2);
  // A shared worker's access link binds the sum of both jobs' rates.
  std::vector<double> residual = in.net->residuals();
  const std::string shared = in.input.jobs[1].spec.workers[0];
  ASSERT_NE(
      std::find(in.input.jobs[0].spec.workers.begin(), in.input.jobs[0].spec.workers.end(), shared),
      in.input.jobs[0].spec.workers.end());
  const core::Graph& g = in.net->graph();
  residual[in.net->ArcResource(g.out_arcs(g.index(shared))[0])] = 2;
  const double want = Optimum(in, residual, plain, true);
  EXPECT_LE(want, 1 + 1e-5);  // t <= min(λ_1, λ_2) <= 2 / 2
  EXPECT_NEAR(Optimum(in, residual, grouped, true), want, 1e-6 * std::max(1.0, want));
}

TEST(LpSymmetryTest, RoundingKeepsTheGroupsAggregate) {
  Instance in = MakeInstance(5, 40, 1);
  PathCache cache(in.net->graph(), 4);
  std::vector<JobCandidates> jobs = Candidates(in, cache, {1.0});
  GroupInterchangeablePairs(*in.net, &jobs[0]);
  RoutingLp lp = BuildRoutingLp(*in.net, in.net->residuals(), jobs, true);
  auto out = SolveRoutingLp(lp, jobs, true, 60);
  ASSERT_TRUE(out.ok());
  const std::vector<double>& v = out->solution.values;
  const RoutingLp::JobColumns& cols = lp.jobs[0];
  for (int round = 0; round < 4; ++round) {
    std::mt19937_64 rng(round);
    Choice ch = RoundChoice(jobs[0], cols, v, round == 0 ? nullptr : &rng);
    for (size_t i = 0; i < cols.r.size(); ++i) {
      const std::vector<int>& members = cols.members[i];
      std::vector<double> rate(cols.r[i].size(), 0.0);
      double total = 0;
      for (size_t o = 0; o < rate.size(); ++o) {
        for (int col : cols.r[i][o]) rate[o] += std::max(0.0, v[col]);
        total += rate[o];
      }
      if (total <= 1e-9) continue;
      std::vector<int> dealt(rate.size(), 0);
      for (int k : members) {
        ++dealt[ch.pair[k].first];
        EXPECT_GT(rate[ch.pair[k].first], 0) << "a member on an option the LP does not use";
      }
      if (round > 0) continue;  // random rounds draw each member independently
      for (size_t o = 0; o < rate.size(); ++o) {
        const double quota = members.size() * rate[o] / total;
        EXPECT_LT(std::abs(dealt[o] - quota), 1 + 1e-9)
            << "group " << i << " option " << o << " round " << round;
      }
    }
  }
}

// Regression (a controller crash under load): a group whose option rates are all LP noise
// (each at most 1e-12, their sum above it) was dealt to option -1 by the deterministic rounding,
// a heap write before the vector. Now such weights count as 0 everywhere and every member stays on
// a valid (option, path).
TEST(LpSymmetryTest, RoundingOfNoiseRatesDealsNoMemberOutOfRange) {
  Instance in = MakeInstance(5, 40, 1);
  PathCache cache(in.net->graph(), 4);
  std::vector<JobCandidates> jobs = Candidates(in, cache, {1.0});
  GroupInterchangeablePairs(*in.net, &jobs[0]);
  ASSERT_GE(LargestGroup(jobs[0]), 2);
  RoutingLp lp = BuildRoutingLp(*in.net, in.net->residuals(), jobs, true);
  const RoutingLp::JobColumns& cols = lp.jobs[0];
  for (const double noise : {0.0, 4e-13, 1e-12, 2e-12}) {
    std::vector<double> v(lp.program.num_columns(), noise);
    for (int round = 0; round < 3; ++round) {
      std::mt19937_64 rng(round);
      Choice ch = RoundChoice(jobs[0], cols, v, round == 0 ? nullptr : &rng);
      ASSERT_EQ(ch.pair.size(), jobs[0].pairs.size());
      for (size_t k = 0; k < ch.pair.size(); ++k) {
        const PairCandidates& pc = jobs[0].pairs[k];
        ASSERT_GE(ch.pair[k].first, 0) << "noise " << noise << " round " << round;
        ASSERT_LT(ch.pair[k].first, static_cast<int>(pc.options.size()));
        ASSERT_GE(ch.pair[k].second, 0);
        ASSERT_LT(ch.pair[k].second, static_cast<int>(pc.options[ch.pair[k].first].paths.size()));
      }
    }
  }
}

TEST(LpSymmetryTest, GridPlansAreDeterministicWithTheReduction) {
  Instance in = MakeInstance(6, 40, 2);
  in.input.options.rounds = 4;
  in.input.options.lp_symmetry_min_columns = 0;  // this small LP too
  auto a = PlanRouting("grid", in.input);
  auto b = PlanRouting("grid", in.input);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->plan, b->plan);
  PlanningInput per_worker = in.input;
  per_worker.options.lp_symmetry_min_columns = -1;
  auto c = PlanRouting("grid", per_worker);
  ASSERT_TRUE(c.ok());
  // Same LP optimum, so the same bound; the rounded rates may differ (another LP vertex).
  ASSERT_TRUE(a->plan.jobs[0].lp_bound_gbps && c->plan.jobs[0].lp_bound_gbps);
  EXPECT_NEAR(*a->plan.jobs[0].lp_bound_gbps, *c->plan.jobs[0].lp_bound_gbps,
              1e-6 * *c->plan.jobs[0].lp_bound_gbps);
  EXPECT_LE(a->plan.jobs[0].rate_gbps, *a->plan.jobs[0].lp_bound_gbps * (1 + 1e-9));
  EXPECT_GT(a->plan.jobs[0].rate_gbps, 0);
}

}  // namespace
}  // namespace inac::scheduler
