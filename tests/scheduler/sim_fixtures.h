// Shared by the memory and simulator tests: the single-switch topology and a routing with an
// obvious answer.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/topology.h"
#include "tests/fixtures/sample_topologies.h"

namespace inac::scheduler::testing {

// One INA switch "s1" with `aggregators` aggregators and `hosts` hosts h1..hN, each on a
// `gbps` link with the default latency; processing never binds (tests/fixtures/).
using fixtures::SingleSwitch;

}  // namespace inac::scheduler::testing

#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler::testing {

// Test routing with an obvious answer: every job's whole model on its first PS, every worker
// aggregated at its ToR when the ToR is INA-capable (else at the PS), the ToR's stream on a
// fewest-hop path to the PS. Keeps the simulator tests independent of the routing algorithms.
class TorAggregationRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "tor_test"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override {
    const core::Graph& g = network.graph();
    RoutingResult result;
    const auto& jobs = network.input().jobs;
    for (size_t j = 0; j < jobs.size(); ++j) {
      RoutedJob rj;
      rj.job = static_cast<int>(j);
      const int ps = g.index(jobs[j].spec.parameter_servers.at(0));
      rj.shares = {{ps, 1.0}};
      std::set<int> tors;
      for (const std::string& w : jobs[j].spec.workers) {
        const int wn = g.index(w);
        const int tor = g.tor_of(wn);
        RoutedFlow f;
        f.worker = wn;
        f.ps = ps;
        if (g.ina_capable(tor)) {
          f.agg = tor;
          f.arcs = {g.ArcBetween(wn, tor)};
          tors.insert(tor);
        } else {
          f.agg = ps;
          f.arcs = Arcs(g, wn, ps);
        }
        rj.flows.push_back(f);
      }
      for (int tor : tors) rj.streams.push_back({.sw = tor, .ps = ps, .arcs = Arcs(g, tor, ps)});
      result.jobs.push_back(std::move(rj));
    }
    return result;
  }

 private:
  // Fewest-hop arcs from `from` to `to`, not transiting hosts.
  static std::vector<int> Arcs(const core::Graph& g, int from, int to) {
    std::vector<int> via(g.num_nodes(), -2);
    std::vector<int> queue{from};
    via[from] = -1;
    for (size_t q = 0; q < queue.size(); ++q) {
      const int u = queue[q];
      if (u != from && g.is_host(u)) continue;
      for (int a : g.out_arcs(u)) {
        const int v = g.arc(a).to;
        if (via[v] != -2) continue;
        via[v] = a;
        queue.push_back(v);
      }
    }
    std::vector<int> arcs;
    for (int v = to; v != from && via[v] >= 0; v = g.arc(via[v]).from) arcs.push_back(via[v]);
    return {arcs.rbegin(), arcs.rend()};
  }
};

}  // namespace inac::scheduler::testing
