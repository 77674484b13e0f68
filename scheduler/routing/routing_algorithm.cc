#include "scheduler/routing/routing_algorithm.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/routing/baselines.h"
#include "scheduler/routing/grid.h"
#include "scheduler/routing/grid_split.h"
#include "scheduler/routing/inart.h"
#include "scheduler/routing/optimal.h"
#include "scheduler/routing/trees.h"

namespace inac::scheduler {

absl::StatusOr<std::unique_ptr<RoutingAlgorithm>> MakeRoutingAlgorithm(std::string_view name) {
  if (name == "no_ina") return std::make_unique<NoInaRouting>();
  if (name == "atp") return std::make_unique<AtpRouting>(/*sharded=*/false);
  if (name == "atp_sharded") return std::make_unique<AtpRouting>(/*sharded=*/true);
  if (name == "switchml") return std::make_unique<SwitchMlRouting>();
  if (name == "grid") return std::make_unique<GridRouting>();
  // InGo routes as GRID; the planner then chooses the batch sizes (scheduler/batch/).
  if (name == "ingo") return std::make_unique<GridRouting>();
  if (name == "grid-split") return std::make_unique<GridSplitRouting>();
  if (name == "inart") return std::make_unique<InArtRouting>();
  if (name == "optimal") return std::make_unique<OptimalRouting>();
  if (name == "trees") return std::make_unique<TreeRouting>();
  return absl::InvalidArgumentError(absl::StrCat("unknown routing algorithm \"", std::string(name),
                                                 "\"; expected one of ",
                                                 absl::StrJoin(RoutingAlgorithmNames(), ", ")));
}

std::vector<std::string> RoutingAlgorithmNames() {
  return {"no_ina",     "atp",   "atp_sharded", "switchml", "grid",
          "grid-split", "inart", "optimal",     "ingo",     "trees"};
}

absl::StatusOr<PlannedRouting> PlanRouting(const RoutingAlgorithm& algorithm,
                                           const PlanningInput& input) {
  auto net = Network::Create(input);
  if (!net.ok()) return net.status();
  auto routed = algorithm.Route(**net);
  if (!routed.ok()) return routed.status();
  FlowEvaluator evaluator(**net);
  PlannedRouting out;
  out.evaluation = evaluator.Evaluate(routed->jobs);
  out.diagnostics = routed->diagnostics;
  out.plan.algorithm = std::string(algorithm.name());
  for (size_t j = 0; j < routed->jobs.size(); ++j) {
    core::JobPlan jp = evaluator.ToJobPlan(routed->jobs[j]);
    jp.lp_bound_gbps = routed->lp_bound_gbps[j];
    out.plan.jobs.push_back(std::move(jp));
  }
  ApplyEvaluation(out.evaluation, &out.plan);
  return out;
}

absl::StatusOr<PlannedRouting> PlanRouting(std::string_view algorithm, const PlanningInput& input) {
  auto algo = MakeRoutingAlgorithm(algorithm);
  if (!algo.ok()) return algo.status();
  return PlanRouting(**algo, input);
}

std::vector<int> PriorityOrder(const PlanningInput& input) {
  std::vector<int> order(input.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const JobInput& x = input.jobs[a];
    const JobInput& y = input.jobs[b];
    if (x.spec.priority != y.spec.priority) return x.spec.priority > y.spec.priority;
    return x.id < y.id;
  });
  return order;
}

absl::Status CheckPsJobs(const Network& network) {
  const core::Graph& g = network.graph();
  for (const JobInput& job : network.input().jobs) {
    const core::JobSpec& s = job.spec;
    if (s.parameter_servers.empty() || s.allreduce == core::AllReduce::kRing) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", job.id, " uses ring all-reduce; these routing algorithms plan PS jobs only"));
    }
    if (s.workers.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("job ", job.id, " has no workers"));
    }
    for (const std::vector<std::string>* list : {&s.workers, &s.parameter_servers}) {
      for (const std::string& h : *list) {
        int v = g.index(h);
        if (v < 0 || !g.is_host(v)) {
          return absl::InvalidArgumentError(
              absl::StrCat("job ", job.id, " names unknown host \"", h, "\""));
        }
      }
    }
  }
  return absl::OkStatus();
}

std::vector<int> WorkerNodes(const Network& network, int job) {
  std::vector<int> out;
  for (const std::string& w : network.input().jobs[job].spec.workers) {
    out.push_back(network.graph().index(w));
  }
  return out;
}

std::vector<int> PsNodes(const Network& network, int job) {
  std::vector<int> out;
  for (const std::string& s : network.input().jobs[job].spec.parameter_servers) {
    out.push_back(network.graph().index(s));
  }
  return out;
}

bool BetterRates(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double scale = std::max({1e-12, std::abs(a[i]), std::abs(b[i])});
    if (std::isinf(a[i]) && std::isinf(b[i])) continue;
    if (a[i] > b[i] + 1e-9 * scale) return true;
    if (a[i] < b[i] - 1e-9 * scale) return false;
  }
  return false;
}

}  // namespace inac::scheduler
