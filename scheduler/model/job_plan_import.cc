// FlowEvaluator::FromJobPlan (scheduler/model/flow_model.h): a core::JobPlan read onto the
// network's indices, with every check that makes it a plan the flow model can score.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/model/flow_model.h"

namespace inac::scheduler {
namespace {

using NodePair = std::pair<int, int>;  // (switch, PS)

// The steps of FromJobPlan over one plan; every error names the plan's job.
class JobPlanReader {
 public:
  JobPlanReader(const core::Graph& g, const core::JobPlan& plan) : g_(g), plan_(plan) {}

  absl::Status Bad(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("job ", plan_.job_id, ": ", what));
  }

  // The PS shares: known hosts, non-negative, summing to 1.
  absl::Status ReadShares(RoutedJob* job) const {
    if (plan_.ps_shares.empty()) {
      return Bad("no parameter-server shares (ring plans are not scored)");
    }
    double total = 0;
    for (const auto& [ps, x] : plan_.ps_shares) {
      int v = g_.index(ps);
      if (v < 0 || !g_.is_host(v)) return Bad(absl::StrCat("unknown parameter server ", ps));
      if (!(x >= 0)) return Bad(absl::StrCat("negative share for ", ps));
      job->shares.emplace_back(v, x);
      total += x;
    }
    if (std::abs(total - 1) > 1e-6) return Bad(absl::StrCat("shares sum to ", total));
    return absl::OkStatus();
  }

  absl::Status ToArcs(const std::vector<std::string>& path, std::vector<int>* arcs) const {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      int u = g_.index(path[i]);
      int v = g_.index(path[i + 1]);
      int a = (u >= 0 && v >= 0) ? g_.ArcBetween(u, v) : -1;
      if (a < 0) return Bad(absl::StrCat("no up link ", path[i], " -> ", path[i + 1]));
      arcs->push_back(a);
    }
    return absl::OkStatus();
  }

  // The flows; the (switch, PS) pairs that aggregate go to `aggregating`.
  absl::Status ReadFlows(RoutedJob* job, std::set<NodePair>* aggregating) const {
    for (const core::FlowPlan& f : plan_.flows) {
      RoutedFlow rf;
      rf.worker = g_.index(f.worker);
      rf.ps = g_.index(f.ps);
      rf.agg = g_.index(f.aggregation_node);
      rf.fraction = f.fraction;
      if (rf.worker < 0 || rf.ps < 0 || rf.agg < 0) {
        return Bad(absl::StrCat("flow ", f.worker, " -> ", f.ps, " names an unknown node"));
      }
      if (rf.agg != rf.ps && !g_.ina_capable(rf.agg)) {
        return Bad(absl::StrCat("flow ", f.worker, " aggregated at ", f.aggregation_node,
                                ", which is neither its PS nor an INA switch"));
      }
      if (!(f.fraction > 0 && f.fraction <= 1)) return Bad("flow fraction outside (0, 1]");
      if (f.path.empty() || f.path.front() != f.worker || f.path.back() != f.aggregation_node) {
        return Bad(absl::StrCat("flow ", f.worker, " path must run from the worker to ",
                                f.aggregation_node));
      }
      absl::Status s = ToArcs(f.path, &rf.arcs);
      if (!s.ok()) return s;
      if (g_.is_switch(rf.agg)) aggregating->insert({rf.agg, rf.ps});
      job->flows.push_back(std::move(rf));
    }
    return absl::OkStatus();
  }

  // The (switch, PS) pairs that have an aggregator path.
  std::set<NodePair> Streamed() const {
    std::set<NodePair> streamed;
    for (const core::AggregatorPlan& a : plan_.aggregator_paths) {
      const int sw = g_.index(a.switch_id), ps = g_.index(a.ps);
      if (sw >= 0 && ps >= 0) streamed.insert({sw, ps});
    }
    return streamed;
  }

  // The aggregator paths; each re-aggregated stream's parent goes to `via_of`.
  absl::Status ReadStreams(const std::set<NodePair>& streamed, RoutedJob* job,
                           std::map<NodePair, int>* via_of) const {
    for (const core::AggregatorPlan& a : plan_.aggregator_paths) {
      RoutedStream st;
      st.sw = g_.index(a.switch_id);
      st.ps = g_.index(a.ps);
      if (st.sw < 0 || st.ps < 0) return Bad("aggregator path names an unknown node");
      if (a.path.empty() || a.path.front() != a.switch_id) {
        return Bad(absl::StrCat("aggregator path of ", a.switch_id, " must start at it"));
      }
      if (a.path.back() != a.ps) {
        // Re-aggregated at the switch it ends at (two-level aggregation).
        const int via = g_.index(a.path.back());
        if (via < 0 || via == st.sw || !g_.is_switch(via) || !g_.ina_capable(via) ||
            !streamed.count({via, st.ps})) {
          return Bad(absl::StrCat("aggregator path of ", a.switch_id, " must run to ", a.ps,
                                  " or to an INA switch that aggregates for it"));
        }
        st.via = via;
        (*via_of)[{st.sw, st.ps}] = via;
      }
      absl::Status s = ToArcs(a.path, &st.arcs);
      if (!s.ok()) return s;
      job->streams.push_back(std::move(st));
    }
    return absl::OkStatus();
  }

  // Every re-aggregation chain ends at its PS (no cycle).
  absl::Status CheckChains(const std::map<NodePair, int>& via_of) const {
    for (const auto& [key, first] : via_of) {
      int at = first;
      for (size_t hop = 0;; ++hop) {
        auto it = via_of.find({at, key.second});
        if (it == via_of.end()) break;
        if (hop > via_of.size()) {
          return Bad(absl::StrCat("the re-aggregation chain from ", g_.name(key.first),
                                  " never reaches ", g_.name(key.second)));
        }
        at = it->second;
      }
    }
    return absl::OkStatus();
  }

  // Every aggregating switch has an aggregator path toward that PS.
  absl::Status CheckStreamed(const std::set<NodePair>& aggregating,
                             const std::set<NodePair>& streamed) const {
    for (const auto& [sw, ps] : aggregating) {
      if (!streamed.count({sw, ps})) {
        return Bad(absl::StrCat(g_.name(sw), " aggregates for ", g_.name(ps),
                                " but has no aggregator path"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAggregators(RoutedJob* job) const {
    for (const auto& [sw, n] : plan_.aggregators) {
      int v = g_.index(sw);
      if (v < 0 || !g_.is_switch(v)) return Bad(absl::StrCat("aggregators on unknown switch ", sw));
      job->aggregators[v] = n;
    }
    return absl::OkStatus();
  }

 private:
  const core::Graph& g_;
  const core::JobPlan& plan_;
};

}  // namespace

absl::StatusOr<RoutedJob> FlowEvaluator::FromJobPlan(const core::JobPlan& plan) const {
  const core::Graph& g = network_->graph();
  const std::vector<JobInput>& jobs = network_->input().jobs;
  RoutedJob job;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].id == plan.job_id) job.job = static_cast<int>(i);
  }
  if (job.job < 0) return absl::InvalidArgumentError(absl::StrCat("unknown job ", plan.job_id));
  const JobPlanReader reader(g, plan);
  if (absl::Status s = reader.ReadShares(&job); !s.ok()) return s;
  std::set<NodePair> aggregating;
  if (absl::Status s = reader.ReadFlows(&job, &aggregating); !s.ok()) return s;
  const std::set<NodePair> streamed = reader.Streamed();
  std::map<NodePair, int> via_of;
  if (absl::Status s = reader.ReadStreams(streamed, &job, &via_of); !s.ok()) return s;
  if (absl::Status s = reader.CheckChains(via_of); !s.ok()) return s;
  if (absl::Status s = reader.CheckStreamed(aggregating, streamed); !s.ok()) return s;
  if (absl::Status s = reader.ReadAggregators(&job); !s.ok()) return s;
  job.batch_size = plan.batch_size;
  return job;
}

}  // namespace inac::scheduler
