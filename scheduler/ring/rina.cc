#include "scheduler/ring/rina.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "scheduler/routing/baselines.h"

namespace inac::scheduler {
namespace {

// The port of member i: where its ring traffic enters and leaves the fabric.
int PortOf(const RingPlan& plan, int i) {
  if (plan.kind == RingKind::kRina && plan.racks[i].tor >= 0) return plan.racks[i].tor;
  return plan.members[i];
}

void Add(std::map<int, double>& usage, int r, double x) {
  if (x != 0) usage[r] += x;
}

// Routes every hop of `plan` (members and racks fixed): balanced paths, greedy in ring order, then
// two passes re-placing each part against all the others.
void RouteHops(const Network& net, PathCache& paths, const std::vector<double>& residual,
               const RingOptions& options, RingPlan* plan) {
  const int n = plan->size();
  plan->hops.clear();
  if (n < 2) return;
  const double f = static_cast<double>(n - 1) / n;
  std::vector<double> unit(net.num_resources(), 0.0);
  struct Part {
    int hop;
    double weight;
  };
  std::vector<Part> parts;
  for (int i = 0; i < n; ++i) {
    RingHop hop;
    hop.from = PortOf(*plan, i);
    hop.to = PortOf(*plan, (i + 1) % n);
    const int ranges = net.graph().is_switch(hop.from) ? std::max(1, options.hop_ranges) : 1;
    const std::vector<Path>& cands = paths.GetSpread(hop.from, hop.to);
    for (int k = 0; k < ranges; ++k) {
      RingHopPart part;
      part.fraction = 1.0 / ranges;
      const double w = 2 * f * part.fraction;
      const int c = BalancedPath(net, cands, unit, residual, w);
      if (c >= 0) {
        part.arcs = cands[c].arcs;
        for (int a : part.arcs) unit[net.ArcResource(a)] += w;
      }
      hop.parts.push_back(std::move(part));
    }
    plan->hops.push_back(std::move(hop));
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (RingHop& hop : plan->hops) {
      const std::vector<Path>& cands = paths.GetSpread(hop.from, hop.to);
      if (cands.empty()) continue;
      for (RingHopPart& part : hop.parts) {
        const double w = 2 * f * part.fraction;
        for (int a : part.arcs) unit[net.ArcResource(a)] -= w;
        part.arcs = cands[BalancedPath(net, cands, unit, residual, w)].arcs;
        for (int a : part.arcs) unit[net.ArcResource(a)] += w;
      }
    }
  }
  // Parts of one hop on the same path are one part.
  for (RingHop& hop : plan->hops) {
    std::vector<RingHopPart> merged;
    for (RingHopPart& part : hop.parts) {
      auto same = std::find_if(merged.begin(), merged.end(),
                               [&](const RingHopPart& m) { return m.arcs == part.arcs; });
      if (same != merged.end()) {
        same->fraction += part.fraction;
      } else {
        merged.push_back(std::move(part));
      }
    }
    hop.parts = std::move(merged);
  }
}

// The access arc host -> ToR (first up arc) and its reverse; -1 when the host has no link.
int UpArc(const core::Graph& g, int host) {
  return g.out_arcs(host).empty() ? -1 : g.out_arcs(host)[0];
}

double RackRate(const Network& net, const std::vector<double>& residual, const RingPlan& plan,
                int i) {
  const RingRack& rack = plan.racks[i];
  const core::Graph& g = net.graph();
  const int n = plan.size();
  const double f = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  double rate = kUnbounded;
  auto cap = [&](int r, double u) {
    if (u > 0) rate = std::min(rate, residual[r] / u);
  };
  const double m = static_cast<double>(rack.workers.size());
  if (plan.kind == RingKind::kRina) {
    cap(net.NodeResource(rack.tor), m + f);
    for (int w : rack.workers) {
      const int up = UpArc(g, w);
      if (up < 0) return 0;
      const double u = w == rack.agent ? 1 + 1.0 / n : 1;
      cap(net.ArcResource(up), u);
      cap(net.ArcResource(Network::Reverse(up)), u);
    }
  } else {
    for (int w : rack.workers) {
      const int up = UpArc(g, w);
      if (up < 0) return 0;
      const double u = w == rack.agent ? m - 1 : 1;
      cap(net.ArcResource(up), u);
      cap(net.ArcResource(Network::Reverse(up)), u);
    }
  }
  return rate;
}

double Rho(const std::vector<std::pair<int, double>>& usage, const std::vector<double>& residual,
           int* bottleneck) {
  double rho = kUnbounded;
  *bottleneck = -1;
  for (const auto& [r, u] : usage) {
    if (u <= 0) continue;
    const double x = residual[r] / u;
    if (x < rho) {
      rho = x;
      *bottleneck = r;
    }
  }
  return rho;
}

// Total hop count of a closed tour of `order` under `dist`.
int TourLength(const std::vector<int>& order, const std::vector<std::vector<int>>& dist) {
  int total = 0;
  const int n = static_cast<int>(order.size());
  for (int i = 0; i < n && n > 1; ++i) total += dist[order[i]][order[(i + 1) % n]];
  return total;
}

}  // namespace

const char* RingKindName(RingKind kind) {
  switch (kind) {
    case RingKind::kRina:
      return "rina";
    case RingKind::kPlain:
      return "ring";
    case RingKind::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

void EvaluateRing(const Network& net, const std::vector<double>& residual, RingPlan* plan) {
  const core::Graph& g = net.graph();
  const core::JobSpec& spec = net.input().jobs[plan->job].spec;
  const int n = plan->size();
  const double f = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  std::map<int, double> usage;
  double hop_latency = 0;
  plan->total_hops = 0;
  for (const RingHop& hop : plan->hops) {
    for (const RingHopPart& part : hop.parts) {
      double latency = 0;
      for (int a : part.arcs) {
        Add(usage, net.ArcResource(a), 2 * f * part.fraction);
        latency += net.latency_us(a);
      }
      hop_latency = std::max(hop_latency, latency);
    }
    if (!hop.parts.empty()) plan->total_hops += static_cast<int>(hop.parts[0].arcs.size());
  }
  plan->rack_gbps = kUnbounded;
  for (int i = 0; i < n; ++i) {
    const RingRack& rack = plan->racks[i];
    if (rack.tor < 0) continue;
    const double m = static_cast<double>(rack.workers.size());
    for (int w : rack.workers) {
      const int up = UpArc(g, w);
      if (up < 0) continue;
      double u = 1;
      if (plan->kind == RingKind::kRina) {
        if (w == rack.agent) u += 1.0 / n;
      } else if (w == rack.agent) {
        u = m - 1;  // the leader's share of the rack stage; its ring hops are counted above
      }
      Add(usage, net.ArcResource(up), u);
      Add(usage, net.ArcResource(Network::Reverse(up)), u);
    }
    if (plan->kind == RingKind::kRina) Add(usage, net.NodeResource(rack.tor), m + f);
    plan->rack_gbps = std::min(plan->rack_gbps, RackRate(net, residual, *plan, i));
  }
  plan->usage.assign(usage.begin(), usage.end());
  int bottleneck = -1;
  double rho = Rho(plan->usage, residual, &bottleneck);
  // A hop that found no path: the members cannot all reach each other.
  for (const RingHop& hop : plan->hops) {
    for (const RingHopPart& part : hop.parts) {
      if (part.arcs.empty() && hop.from != hop.to) rho = 0;
    }
  }
  if (std::isinf(rho)) rho = kUnbounded;
  plan->algbw_gbps = rho;
  plan->bottleneck = bottleneck >= 0 ? net.ResourceName(bottleneck) : "";
  plan->ring_gbps = n > 1 ? 2 * f * rho : 0;
  plan->latency_us = n > 1 ? 2.0 * (n - 1) * (hop_latency + plan->step_overhead_us) : 0;
  const double gbit = static_cast<double>(spec.gradient_bytes) * 8 / 1e9;
  if (rho > 0 && !std::isinf(rho)) {
    plan->comm_ms = gbit / rho * 1e3 + plan->latency_us / 1e3;
  } else if (rho <= 0) {
    plan->comm_ms = kUnbounded;
  } else {
    plan->comm_ms = plan->latency_us / 1e3;
  }
  plan->iteration_ms = spec.compute_ms + plan->comm_ms;
}

std::vector<double> ResidualAfterRing(const RingPlan& plan, std::vector<double> residual) {
  const double rho = plan.algbw_gbps;
  if (rho <= 0 || std::isinf(rho)) return residual;
  for (const auto& [r, u] : plan.usage) residual[r] = std::max(0.0, residual[r] - u * rho);
  return residual;
}

absl::StatusOr<RingPlan> PlanRing(const Network& net, PathCache& paths, int job,
                                  const std::vector<double>& residual, const RingOptions& options) {
  const core::Graph& g = net.graph();
  if (job < 0 || job >= static_cast<int>(net.input().jobs.size())) {
    return absl::InvalidArgumentError(absl::StrCat("ring: no job ", job));
  }
  const JobInput& input = net.input().jobs[job];
  const core::JobSpec& spec = input.spec;
  if (spec.workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", input.id, " has no workers"));
  }
  // Racks in order of their first worker; workers in rank order.
  std::vector<int> tors;
  std::map<int, std::vector<int>> rack_workers;
  std::vector<int> workers;
  for (const std::string& name : spec.workers) {
    const int w = g.index(name);
    if (w < 0 || !g.is_host(w)) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", input.id, " names unknown host \"", name, "\""));
    }
    if (std::find(workers.begin(), workers.end(), w) != workers.end()) continue;
    workers.push_back(w);
    const int tor = g.tor_of(w);
    if (tor < 0 || !g.is_switch(tor)) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", input.id, ": worker \"", name, "\" has no ToR"));
    }
    if (!rack_workers.count(tor)) tors.push_back(tor);
    rack_workers[tor].push_back(w);
  }
  RingPlan plan;
  plan.job = job;
  plan.kind = options.kind;
  plan.step_overhead_us = options.step_overhead_us;
  for (int tor : tors) {
    const std::vector<int>& ws = rack_workers[tor];
    bool aggregated = false;
    if (options.kind == RingKind::kRina) {
      aggregated = g.ina_capable(tor) && residual[net.NodeResource(tor)] > 0;
    } else if (options.kind == RingKind::kHierarchical) {
      aggregated = ws.size() >= 2;
    }
    if (aggregated) {
      plan.members.push_back(ws[0]);
      plan.racks.push_back(RingRack{tor, ws[0], ws});
    } else {
      for (int w : ws) {
        plan.members.push_back(w);
        plan.racks.push_back(RingRack{});
      }
    }
  }
  const int n = plan.size();
  auto evaluate = [&](RingPlan& p) {
    RouteHops(net, paths, residual, options, &p);
    EvaluateRing(net, residual, &p);
  };
  // Better: higher ρ, then fewer total hops.
  auto better = [](const RingPlan& a, const RingPlan& b) {
    const double scale = std::max(std::abs(a.algbw_gbps), std::abs(b.algbw_gbps));
    if (std::abs(a.algbw_gbps - b.algbw_gbps) > 1e-9 * scale) return a.algbw_gbps > b.algbw_gbps;
    return a.total_hops < b.total_hops;
  };
  auto reorder = [&](const RingPlan& p, const std::vector<int>& order) {
    RingPlan q = p;
    q.members.clear();
    q.racks.clear();
    for (int i : order) {
      q.members.push_back(p.members[i]);
      q.racks.push_back(p.racks[i]);
    }
    return q;
  };
  evaluate(plan);
  if (options.optimise_order && n > 2) {
    // Hop counts between the members' ports.
    std::vector<int> port(n);
    for (int i = 0; i < n; ++i) port[i] = PortOf(plan, i);
    std::vector<std::vector<int>> dist(n, std::vector<int>(n, 0));
    for (int i = 0; i < n; ++i) {
      const std::vector<int>& from = paths.HopsFrom(port[i]);
      for (int j = 0; j < n; ++j) dist[i][j] = from[port[j]] < 0 ? 1 << 20 : from[port[j]];
    }
    // Nearest neighbour from member 0 (ties: lower index), then 2-opt on the tour length.
    std::vector<int> tour = {0};
    std::vector<bool> used(n, false);
    used[0] = true;
    for (int step = 1; step < n; ++step) {
      int best = -1;
      for (int j = 0; j < n; ++j) {
        if (!used[j] && (best < 0 || dist[tour.back()][j] < dist[tour.back()][best])) best = j;
      }
      used[best] = true;
      tour.push_back(best);
    }
    for (bool improved = true; improved;) {
      improved = false;
      for (int i = 1; i + 1 < n && !improved; ++i) {
        for (int j = i + 1; j < n && !improved; ++j) {
          std::vector<int> next = tour;
          std::reverse(next.begin() + i, next.begin() + j + 1);
          if (TourLength(next, dist) < TourLength(tour, dist)) {
            tour = std::move(next);
            improved = true;
          }
        }
      }
    }
    RingPlan candidate = reorder(plan, tour);
    evaluate(candidate);
    if (better(candidate, plan)) plan = std::move(candidate);
    if (n <= kRingEvaluatedTwoOptMembers) {
      for (int round = 0, improved = 1; improved && round < 4 * n; ++round) {
        improved = 0;
        for (int i = 1; i + 1 < n && !improved; ++i) {
          for (int j = i + 1; j < n && !improved; ++j) {
            std::vector<int> order(n);
            std::iota(order.begin(), order.end(), 0);
            std::reverse(order.begin() + i, order.begin() + j + 1);
            RingPlan q = reorder(plan, order);
            evaluate(q);
            if (better(q, plan)) {
              plan = std::move(q);
              improved = 1;
            }
          }
        }
      }
    }
  }
  if (options.optimise_agents && options.kind != RingKind::kPlain) {
    for (int i = 0; i < n; ++i) {
      if (plan.racks[i].tor < 0) continue;
      RingPlan best = plan;
      for (int w : plan.racks[i].workers) {  // rank order: the lowest rank wins ties
        if (w == plan.racks[i].agent) continue;
        RingPlan q = plan;
        q.racks[i].agent = w;
        q.members[i] = w;
        evaluate(q);
        const double scale = std::max(q.algbw_gbps, best.algbw_gbps);
        const bool higher = q.algbw_gbps > best.algbw_gbps + 1e-9 * scale;
        if (higher) best = std::move(q);
      }
      plan = std::move(best);
    }
  }
  return plan;
}

core::JobPlan RingToJobPlan(const Network& net, const RingPlan& plan) {
  const core::Graph& g = net.graph();
  const JobInput& input = net.input().jobs[plan.job];
  core::JobPlan jp;
  jp.job_id = input.id;
  jp.batch_size = input.spec.batch_size;
  jp.priority = input.spec.priority;
  auto path_of = [&](int from, const std::vector<int>& arcs) {
    std::vector<std::string> path = {g.name(from)};
    for (int a : arcs) path.push_back(g.name(g.arc(a).to));
    return path;
  };
  const int n = plan.size();
  for (int i = 0; i < n; ++i) jp.ring.push_back(g.name(plan.members[i]));
  if (plan.kind == RingKind::kRina) {
    for (int i = 0; i < n; ++i) {
      const RingRack& rack = plan.racks[i];
      if (rack.tor < 0) continue;
      for (int w : rack.workers) {
        if (w == rack.agent) continue;
        core::FlowPlan f;
        f.worker = g.name(w);
        f.ps = g.name(rack.agent);
        f.aggregation_node = g.name(rack.tor);
        f.path = {g.name(w), g.name(rack.tor)};
        jp.flows.push_back(std::move(f));
      }
      jp.aggregator_paths.push_back(core::AggregatorPlan{
          g.name(rack.tor), g.name(rack.agent), {g.name(rack.tor), g.name(rack.agent)}});
    }
  }
  for (int i = 0; i < static_cast<int>(plan.hops.size()); ++i) {
    const RingHop& hop = plan.hops[i];
    const int next = (i + 1) % n;
    for (const RingHopPart& part : hop.parts) {
      core::FlowPlan f;
      f.worker = g.name(hop.from);
      f.ps = g.name(plan.members[next]);
      f.aggregation_node = g.name(hop.to);
      f.path = path_of(hop.from, part.arcs);
      f.fraction = part.fraction;
      jp.flows.push_back(std::move(f));
    }
  }
  jp.rate_gbps = n > 1 ? plan.ring_gbps : plan.algbw_gbps;
  if (std::isinf(jp.rate_gbps)) jp.rate_gbps = 0;
  jp.comm_ms = std::isinf(plan.comm_ms) ? 0 : plan.comm_ms;
  jp.iteration_ms = std::isinf(plan.iteration_ms) ? 0 : plan.iteration_ms;
  return jp;
}

}  // namespace inac::scheduler

namespace inac::scheduler {

std::vector<core::JobPlan> PlanRingJobs(const core::Topology& topology,
                                        const std::vector<JobInput>& rings, const core::Plan& plan,
                                        const PlanningOptions& options) {
  std::vector<core::JobPlan> out;
  for (const JobInput& job : rings) {
    core::JobPlan jp;
    jp.job_id = job.id;
    jp.ring = job.spec.workers;
    jp.batch_size = job.spec.batch_size;
    jp.priority = job.spec.priority;
    out.push_back(std::move(jp));
  }
  if (rings.empty()) return out;
  // The PS jobs' routes are scored on their own input; the rings on one that holds only them.
  PlanningInput ps_input;
  ps_input.topology = topology;
  ps_input.options = options;
  std::vector<const core::JobPlan*> ps_plans;
  for (const core::JobPlan& jp : plan.jobs) {
    if (jp.ring.empty()) ps_plans.push_back(&jp);
  }
  PlanningInput ring_input;
  ring_input.topology = topology;
  ring_input.options = options;
  ring_input.jobs = rings;
  auto net = Network::Create(ring_input);
  if (!net.ok()) return out;
  std::vector<double> residual = (*net)->residuals();
  {
    // Job ids of the PS plans are not in ps_input.jobs unless we add stand-ins with their ids.
    for (const core::JobPlan* jp : ps_plans) {
      JobInput stand_in;
      stand_in.id = jp->job_id;
      for (const core::FlowPlan& f : jp->flows) {
        if (std::find(stand_in.spec.workers.begin(), stand_in.spec.workers.end(), f.worker) ==
            stand_in.spec.workers.end()) {
          stand_in.spec.workers.push_back(f.worker);
        }
      }
      for (const auto& [ps, share] : jp->ps_shares) stand_in.spec.parameter_servers.push_back(ps);
      ps_input.jobs.push_back(std::move(stand_in));
    }
    auto ps_net = Network::Create(ps_input);
    if (ps_net.ok()) {
      FlowEvaluator evaluator(**ps_net);
      std::vector<RoutedJob> routed;
      for (const core::JobPlan* jp : ps_plans) {
        core::JobPlan routes_only = *jp;
        routes_only.aggregators.clear();
        auto r = evaluator.FromJobPlan(routes_only);
        if (r.ok()) routed.push_back(*r);
      }
      if (!routed.empty()) residual = evaluator.ResidualAfter(routed);
    }
  }
  PathCache paths((*net)->graph(), std::max(1, options.paths));
  for (int j : PriorityOrder(ring_input)) {
    auto ring = PlanRing(**net, paths, j, residual);
    if (!ring.ok() || ring->algbw_gbps <= 0) continue;
    out[j] = RingToJobPlan(**net, *ring);
    residual = ResidualAfterRing(*ring, std::move(residual));
  }
  return out;
}

}  // namespace inac::scheduler
