#include "scheduler/incremental.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/memory/memory_planner.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {
namespace {

// The evaluated push load of `evaluation` on `network` as background load of another planning.
BackgroundLoad AsBackground(const Network& network, const Evaluation& evaluation) {
  BackgroundLoad bg;
  const core::Graph& g = network.graph();
  for (int r = 0; r < network.num_resources() && r < static_cast<int>(evaluation.load_gbps.size());
       ++r) {
    const double load = evaluation.load_gbps[r];
    if (!(load > 0) || std::isinf(load)) continue;
    if (network.IsArcResource(r)) {
      const core::Graph::Arc& arc = g.arc(r);
      bg.arcs.push_back({g.name(arc.from), g.name(arc.to), load});
    } else {
      const int node = r - network.num_arcs();
      if (g.is_switch(node)) {
        bg.switch_processing_gbps[g.name(node)] += load;
      } else {
        bg.host_ingress_gbps[g.name(node)] += load;
      }
    }
  }
  return bg;
}

}  // namespace

absl::StatusOr<AdmissionOutput> AdmitJobs(const PlanRequest& request) {
  if (request.topology == nullptr) return absl::InvalidArgumentError("admission: no topology");
  if (request.previous == nullptr) {
    return absl::InvalidArgumentError("admission: no plan in force to admit jobs onto");
  }
  const PlannerOptions& o = request.options;
  auto mem = MemoryOptionsOf(o);
  if (!mem.ok()) return mem.status();
  const core::Plan& previous = *request.previous;
  std::vector<const core::Job*> rings;
  PlanningInput all = RoutingInputOf(request, &rings);

  AdmissionOutput result;
  std::set<core::JobId> wanted;
  for (const core::Job& job : request.jobs) wanted.insert(job.id);
  for (const core::JobPlan& jp : previous.jobs) {
    if (!wanted.count(jp.job_id)) result.removed.push_back(jp.job_id);
  }

  // Kept PS jobs: planned before with routes valid on this topology.
  core::Plan kept_plan;
  PlanningInput fresh = all;
  fresh.jobs.clear();
  {
    auto net = Network::Create(all);
    if (!net.ok()) return net.status();
    FlowEvaluator evaluator(**net);
    for (const JobInput& job : all.jobs) {
      const core::JobPlan* before = previous.FindJob(job.id);
      if (before != nullptr && before->ring.empty() && !before->flows.empty() &&
          evaluator.FromJobPlan(*before).ok()) {
        kept_plan.jobs.push_back(*before);
        result.kept.push_back(job.id);
      } else {
        fresh.jobs.push_back(job);
      }
    }
  }
  if (kept_plan.jobs.empty() && !all.jobs.empty()) {
    auto full = ComputePlan(request);
    if (!full.ok()) return full.status();
    result.output = std::move(*full);
    result.full = true;
    for (const core::Job& job : request.jobs) result.admitted.push_back(job.id);
    return result;
  }

  PlannerOutput& out = result.output;
  core::Plan& plan = out.plan;
  if (!fresh.jobs.empty()) {
    // Background: the kept jobs' evaluated push load (with their memory caps).
    PlanningInput kept_input = all;
    kept_input.jobs.clear();
    for (const JobInput& job : all.jobs) {
      if (kept_plan.FindJob(job.id) != nullptr) kept_input.jobs.push_back(job);
    }
    core::Graph graph(all.topology);
    auto kept_eval =
        EvaluatePlan(kept_input, kept_plan, [&](const core::JobPlan& jp, const std::string& sw) {
          return GrantHoldUs(graph, jp, sw, *mem);
        });
    if (!kept_eval.ok()) return kept_eval.status();
    auto kept_net = Network::Create(kept_input);
    if (!kept_net.ok()) return kept_net.status();
    fresh.background = AsBackground(**kept_net, *kept_eval);
    // The admission heuristic: the planner's algorithm, except the slow ones (grid-split adds a
    // 40,000-column LP per job, optimal a MIP), which admit with GRID's LP and rounding.
    std::string algorithm = o.admission_algorithm;
    if (algorithm.empty()) {
      algorithm = o.algorithm == "grid-split" || o.algorithm == "optimal" ? "grid" : o.algorithm;
    }
    auto routed = PlanRouting(algorithm, fresh);
    if (!routed.ok()) return routed.status();
    for (size_t j = 0; j < fresh.jobs.size() && j < routed->diagnostics.size(); ++j) {
      out.reports[fresh.jobs[j].id].diagnostics = routed->diagnostics[j];
    }
    core::Plan admitted = std::move(routed->plan);
    // Memory from what the kept jobs leave: A_v minus their grants.
    core::Topology left = all.topology;
    std::map<std::string, int64_t> held;
    for (const core::JobPlan& jp : kept_plan.jobs) {
      for (const auto& [sw, n] : jp.aggregators) held[sw] += n;
    }
    for (core::Switch& sw : left.switches) {
      auto it = held.find(sw.id);
      if (it != held.end())
        sw.ina.aggregators = std::max<int64_t>(0, sw.ina.aggregators - it->second);
    }
    core::Graph left_graph(left);
    std::vector<MemoryJobState> states;
    for (const core::Job& job : request.jobs) {
      if (admitted.FindJob(job.id) != nullptr) {
        states.push_back(MemoryJobStateFromJob(job, request.now_ms));
      }
    }
    if (absl::Status s = AssignAggregators(left_graph, states, request.previous, *mem, &admitted);
        !s.ok()) {
      return s;
    }
    for (core::JobPlan& jp : admitted.jobs) {
      result.admitted.push_back(jp.job_id);
      plan.jobs.push_back(std::move(jp));
    }
  }
  for (core::JobPlan& jp : kept_plan.jobs) plan.jobs.push_back(std::move(jp));
  // Kept ring jobs; new ones are added by FinishPlan.
  for (const core::Job* ring : rings) {
    const core::JobPlan* before = previous.FindJob(ring->id);
    if (before != nullptr && !before->ring.empty()) {
      plan.jobs.push_back(*before);
      result.kept.push_back(ring->id);
    } else {
      result.admitted.push_back(ring->id);
    }
  }
  // Re-score in input order (EvaluatePlan needs every planned PS job in the input), with the
  // hold time each grant was sized with; a plan the flow model refuses is an error (Internal,
  // naming the job), never published with unscored rates.
  {
    core::Graph graph(all.topology);
    auto evaluations = RescorePlan(
        all,
        [&](const core::JobPlan& jp, const std::string& sw) {
          return GrantHoldUs(graph, jp, sw, *mem);
        },
        &out.plan);
    if (!evaluations.ok()) return evaluations.status();
    for (const JobEvaluation& e : *evaluations) out.reports[e.job_id].evaluation = e;
  }
  AttachBounds(request, all, &out);
  FinishPlan(request, rings, &out);
  return result;
}

FlowMoves CountMovedFlows(const core::Plan& before, const core::Plan& after) {
  FlowMoves m;
  using Key = std::pair<std::string, std::string>;  // (worker, ps)
  using Route = std::tuple<std::string, std::vector<std::string>, double>;
  auto streams = [](const core::JobPlan& jp) {
    std::map<Key, std::vector<Route>> s;
    for (const core::FlowPlan& f : jp.flows) {
      s[{f.worker, f.ps}].push_back({f.aggregation_node, f.path, f.fraction});
    }
    for (auto& [key, routes] : s) std::sort(routes.begin(), routes.end());
    return s;
  };
  for (const core::JobPlan& b : before.jobs) {
    if (!b.ring.empty()) continue;
    const core::JobPlan* a = after.FindJob(b.job_id);
    if (a == nullptr || !a->ring.empty()) continue;
    ++m.jobs_compared;
    auto sb = streams(b);
    auto sa = streams(*a);
    int moved = 0;
    for (const auto& [key, routes] : sb) {
      ++m.flows_compared;
      auto it = sa.find(key);
      if (it == sa.end() || it->second != routes) ++moved;
    }
    m.flows_moved += moved;
    if (moved > 0) ++m.jobs_moved;
  }
  return m;
}

}  // namespace inac::scheduler
