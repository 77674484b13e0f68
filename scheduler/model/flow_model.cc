// The flow model of scheduler/model/flow_model.h: the per-unit-rate usage of a routed job
// (ComputeUsage), the evaluator and the plan conversions. The fair-share solvers are in
// fair_rates.cc, FlowEvaluator::FromJobPlan in job_plan_import.cc.
#include "scheduler/model/flow_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace inac::scheduler {
namespace {

void Add(std::map<int, double>& m, int r, double c) {
  if (c != 0) m[r] += c;
}

std::vector<std::pair<int, double>> ToVector(const std::map<int, double>& m) {
  std::vector<std::pair<int, double>> v;
  v.reserve(m.size());
  for (const auto& [r, c] : m) {
    if (c > 0) v.emplace_back(r, c);
  }
  return v;
}

double TransferMs(int64_t bytes, double gbps) {
  if (bytes <= 0 || std::isinf(gbps)) return 0;
  if (gbps <= 0) return kUnbounded;
  return static_cast<double>(bytes) * 8.0 / (gbps * 1e6);
}

// The routes of `job` as a core::JobPlan: id, shares, flows (in order) and aggregator paths.
core::JobPlan RoutesOf(const Network& network, const RoutedJob& job) {
  const core::Graph& g = network.graph();
  core::JobPlan p;
  if (job.job >= 0 && job.job < static_cast<int>(network.input().jobs.size())) {
    p.job_id = network.input().jobs[job.job].id;
  }
  for (const auto& [ps, x] : job.shares) p.ps_shares[g.name(ps)] += x;
  auto names = [&](int start, const std::vector<int>& arcs) {
    std::vector<std::string> path{g.name(start)};
    for (int a : arcs) path.push_back(g.name(g.arc(a).to));
    return path;
  };
  for (const RoutedFlow& f : job.flows) {
    core::FlowPlan fp;
    fp.worker = g.name(f.worker);
    fp.ps = g.name(f.ps);
    fp.aggregation_node = g.name(f.agg);
    fp.path = names(f.worker, f.arcs);
    fp.fraction = f.fraction;
    p.flows.push_back(std::move(fp));
  }
  for (const RoutedStream& st : job.streams) {
    core::AggregatorPlan ap;
    ap.switch_id = g.name(st.sw);
    ap.ps = g.name(st.ps);
    ap.path = names(st.sw, st.arcs);
    p.aggregator_paths.push_back(std::move(ap));
  }
  return p;
}

using NodePair = std::pair<int, int>;                     // (switch or worker, PS)
using Range = std::pair<double, double>;                  // [begin, end) of the chunk space
using RangesOf = std::map<NodePair, std::vector<Range>>;  // (switch, PS) -> ranges it carries

double ShareOf(const std::map<int, double>& share, int ps) {
  auto it = share.find(ps);
  return it == share.end() ? 0.0 : it->second;
}

// Latency of each stream's route to its PS: its own arcs, then its via's (re-aggregation).
std::map<NodePair, double> StreamLatencies(const Network& network, const RoutedJob& job) {
  std::map<NodePair, const RoutedStream*> stream_of;
  std::map<NodePair, double> stream_latency;
  for (const RoutedStream& st : job.streams) stream_of[{st.sw, st.ps}] = &st;
  for (const RoutedStream& st : job.streams) {
    double lat = 0;
    const RoutedStream* cur = &st;
    // Follow re-aggregation to the PS (bounded: a malformed cycle stops after every stream).
    for (size_t hop = 0; cur != nullptr && hop <= job.streams.size(); ++hop) {
      for (int a : cur->arcs) lat += network.latency_us(a);
      if (cur->via < 0) break;
      auto it = stream_of.find({cur->via, cur->ps});
      cur = it == stream_of.end() ? nullptr : it->second;
    }
    stream_latency[{st.sw, st.ps}] = lat;
  }
  return stream_latency;
}

// The chunk range of each flow: a (worker, PS)'s flows cover [0, 1) in order. A stream carries
// the union of the ranges aggregated at its switch (one tag per range, docs/routing.md).
RangesOf FlowRanges(const core::Graph& g, const RoutedJob& job,
                    const std::map<int, double>& share) {
  std::map<NodePair, double> offset;  // (worker, ps) -> where its next flow starts
  RangesOf ranges;
  for (const RoutedFlow& f : job.flows) {
    double& at = offset[{f.worker, f.ps}];
    const double begin = at;
    at += f.fraction;
    if (g.is_switch(f.agg) && ShareOf(share, f.ps) * f.fraction > 0) {
      ranges[{f.agg, f.ps}].emplace_back(begin, at);
    }
  }
  return ranges;
}

// The flows' loads on `up` and their down arcs in `tree`; the largest flow fraction of each
// aggregating switch in `stream_fraction`. Returns the longest route's latency (µs).
double AddFlowLoads(const Network& network, const RoutedJob& job,
                    const std::map<int, double>& share,
                    const std::map<NodePair, double>& stream_latency, std::map<int, double>* up,
                    std::map<int, std::set<int>>* tree,
                    std::map<NodePair, double>* stream_fraction) {
  const core::Graph& g = network.graph();
  double max_route_us = 0;
  for (const RoutedFlow& f : job.flows) {
    double c = ShareOf(share, f.ps) * f.fraction;
    if (c <= 0) continue;
    double lat = 0;
    for (int a : f.arcs) {
      Add(*up, network.ArcResource(a), c);
      lat += network.latency_us(a);
      (*tree)[f.ps].insert(Network::Reverse(a));
    }
    if (g.is_switch(f.agg)) {
      Add(*up, network.NodeResource(f.agg), c);
      double& frac = (*stream_fraction)[{f.agg, f.ps}];
      frac = std::max(frac, f.fraction);
      auto it = stream_latency.find({f.agg, f.ps});
      if (it != stream_latency.end()) lat += it->second;
    } else if (!f.arcs.empty()) {
      Add(*up, network.NodeResource(f.ps), c);
    }
    max_route_us = std::max(max_route_us, lat);
  }
  return max_route_us;
}

// A re-aggregating switch's stream carries the ranges of every stream it re-aggregates.
void PropagateRanges(const RoutedJob& job, RangesOf* ranges) {
  for (size_t pass = 0; pass < job.streams.size(); ++pass) {
    bool changed = false;
    for (const RoutedStream& st : job.streams) {
      if (st.via < 0) continue;
      auto it = ranges->find({st.sw, st.ps});
      if (it == ranges->end()) continue;
      std::vector<Range>& to = (*ranges)[{st.via, st.ps}];
      for (const auto& r : it->second) {
        if (std::find(to.begin(), to.end(), r) == to.end()) {
          to.push_back(r);
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
}

// Size of each stream: the measure of the union of its ranges (sorts each list).
void SizeStreams(RangesOf* ranges, std::map<NodePair, double>* stream_fraction) {
  for (auto& [key, list] : *ranges) {
    std::sort(list.begin(), list.end());
    double total = 0;
    double reach = 0;
    for (const auto& [b, e] : list) {
      const double from = std::max(b, reach);
      if (e > from) total += e - from;
      reach = std::max(reach, e);
    }
    (*stream_fraction)[key] = std::max((*stream_fraction)[key], std::min(1.0, total));
  }
}

// The streams' loads on `up` and their down arcs in `tree`.
void AddStreamLoads(const Network& network, const RoutedJob& job,
                    const std::map<int, double>& share,
                    const std::map<NodePair, double>& stream_fraction, std::map<int, double>* up,
                    std::map<int, std::set<int>>* tree) {
  for (const RoutedStream& st : job.streams) {
    auto it = stream_fraction.find({st.sw, st.ps});
    if (it == stream_fraction.end()) continue;  // nobody aggregates there: unused path
    double c = ShareOf(share, st.ps) * it->second;
    if (st.via >= 0) {
      Add(*up, network.NodeResource(st.via), c);  // one more input of the re-aggregating switch
    }
    if (st.arcs.empty()) continue;
    for (int a : st.arcs) {
      Add(*up, network.ArcResource(a), c);
      (*tree)[st.ps].insert(Network::Reverse(a));
    }
    if (st.via < 0) Add(*up, network.NodeResource(st.ps), c);
  }
}

// The memory limit of a job with aggregator grants. Per tag, as the data plane holds it: the
// job's tags on each switch (core::JobTagsOf, the derivation's own rule) share its grant there
// by core::SplitGrant; a tag has one window over its whole tree, the least of its non-zero
// shares (core::DeriveSwitchIntents: slots line up along a chain), and tag t of weight
// w = x_s * (range length) with window a sustains λ · w ≤ a · B · 8 / hold on every switch
// that gives it a region.
void ApplyMemoryLimit(const Network& network, const RoutedJob& job, JobUsage* usage) {
  const core::Graph& g = network.graph();
  const std::vector<core::JobTag> tags = core::JobTagsOf(g, RoutesOf(network, job));
  std::map<int, std::vector<size_t>> tags_at;  // switch -> its tags (indices), tag order
  for (size_t t = 0; t < tags.size(); ++t) {
    for (const std::string& id : tags[t].switches) tags_at[g.index(id)].push_back(t);
  }
  std::vector<int64_t> window(tags.size(), -1);
  std::map<std::pair<int, size_t>, int64_t> share;  // (switch, tag) -> its split of the grant
  for (const auto& [sw, at] : tags_at) {
    auto it = job.aggregators.find(sw);
    if (it == job.aggregators.end()) continue;
    std::vector<double> weights;
    for (size_t t : at) weights.push_back(tags[t].weight);
    const std::vector<int64_t> split = core::SplitGrant(it->second, weights);
    for (size_t k = 0; k < at.size(); ++k) {
      share[{sw, at[k]}] = split[k];
      if (split[k] > 0)
        window[at[k]] = window[at[k]] < 0 ? split[k] : std::min(window[at[k]], split[k]);
    }
  }
  for (const auto& [key, split] : share) {
    const auto [sw, t] = key;
    if (split <= 0 || !(tags[t].weight > 0)) continue;
    auto hold_it = job.hold_us.find(sw);
    const double hold = hold_it != job.hold_us.end() ? hold_it->second : usage->rtt_us;
    if (hold <= 0) continue;
    const int bytes = network.input().topology.switches[sw].ina.aggregator_bytes;
    const double cap = static_cast<double>(window[t]) * bytes * 8.0 / (hold * 1e3);
    const double limit = cap / tags[t].weight;
    if (limit < usage->memory_limit_gbps) {
      usage->memory_limit_gbps = limit;
      usage->memory_switch = sw;
    }
  }
}

}  // namespace

JobUsage ComputeUsage(const Network& network, const RoutedJob& job) {
  const core::Graph& g = network.graph();
  std::map<int, double> share;
  for (const auto& [ps, x] : job.shares) share[ps] += x;
  std::map<NodePair, double> stream_fraction;  // (switch, ps) -> largest fraction
  std::map<int, std::set<int>> tree;           // ps -> down arcs
  std::map<int, double> up;
  const std::map<NodePair, double> stream_latency = StreamLatencies(network, job);
  JobUsage usage;
  RangesOf ranges = FlowRanges(g, job, share);
  const double max_route_us =
      AddFlowLoads(network, job, share, stream_latency, &up, &tree, &stream_fraction);
  PropagateRanges(job, &ranges);
  SizeStreams(&ranges, &stream_fraction);
  AddStreamLoads(network, job, share, stream_fraction, &up, &tree);
  std::map<int, double> down;
  for (const auto& [ps, arcs] : tree) {
    double x = ShareOf(share, ps);
    for (int a : arcs) Add(down, network.ArcResource(a), x);
  }
  usage.up = ToVector(up);
  usage.down = ToVector(down);
  usage.rtt_us = 2 * max_route_us;
  if (!job.aggregators.empty()) ApplyMemoryLimit(network, job, &usage);
  return usage;
}

double SingleJobRate(const JobUsage& usage, const std::vector<double>& residual) {
  double rate = usage.memory_limit_gbps;
  for (const auto& [r, c] : usage.up) rate = std::min(rate, std::max(0.0, residual[r]) / c);
  return rate;
}

Evaluation FlowEvaluator::Evaluate(const std::vector<RoutedJob>& jobs) const {
  const Network& net = *network_;
  std::vector<JobUsage> usages;
  std::vector<VirtualFlow> up_flows, down_flows;
  usages.reserve(jobs.size());
  for (const RoutedJob& job : jobs) {
    usages.push_back(ComputeUsage(net, job));
    up_flows.push_back(VirtualFlow{usages.back().up, usages.back().memory_limit_gbps});
    down_flows.push_back(VirtualFlow{usages.back().down, kUnbounded});
  }
  FairShare up = MaxMinFairRates(net.residuals(), up_flows);
  FairShare down = MaxMinFairRates(net.residuals(), down_flows);
  Evaluation ev;
  ev.load_gbps.assign(net.num_resources(), 0.0);
  ev.down_load_gbps.assign(net.num_resources(), 0.0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const JobInput& in = net.input().jobs[jobs[j].job];
    const JobUsage& u = usages[j];
    JobEvaluation je;
    je.job_id = in.id;
    je.rate_gbps = up.rates[j];
    je.down_gbps = down.rates[j];
    je.rtt_us = u.rtt_us;
    int b = up.bottleneck[j];
    if (b >= 0) {
      je.bottleneck = net.ResourceName(b);
    } else if (u.memory_switch >= 0 && je.rate_gbps >= u.memory_limit_gbps * (1 - 1e-9)) {
      je.bottleneck = absl::StrCat("memory ", net.graph().name(u.memory_switch));
    }
    je.comm_ms = std::max(TransferMs(in.spec.gradient_bytes, je.rate_gbps),
                          TransferMs(in.spec.gradient_bytes, je.down_gbps));
    double compute = in.spec.compute_ms;
    int batch = jobs[j].batch_size > 0 ? jobs[j].batch_size : in.spec.batch_size;
    if (in.spec.batch_size > 0 && batch > 0)
      compute *= static_cast<double>(batch) / in.spec.batch_size;
    je.iteration_ms = compute + je.comm_ms;
    je.jct_ms = JobCompletionMs(0, in.spec.iterations, je.iteration_ms);
    if (!std::isinf(je.rate_gbps)) {
      for (const auto& [r, c] : u.up) ev.load_gbps[r] += je.rate_gbps * c;
    }
    if (!std::isinf(je.down_gbps)) {
      for (const auto& [r, c] : u.down) ev.down_load_gbps[r] += je.down_gbps * c;
    }
    ev.jobs.push_back(std::move(je));
  }
  return ev;
}

std::vector<double> FlowEvaluator::ResidualAfter(const std::vector<RoutedJob>& jobs) const {
  std::vector<double> residual = network_->residuals();
  if (jobs.empty()) return residual;
  Evaluation ev = Evaluate(jobs);
  for (size_t r = 0; r < residual.size(); ++r) {
    residual[r] = std::max(0.0, residual[r] - ev.load_gbps[r]);
  }
  return residual;
}

std::vector<std::string> FlowEvaluator::CapacityViolations(const Evaluation& evaluation) const {
  std::vector<std::string> out;
  for (int r = 0; r < network_->num_resources(); ++r) {
    double cap = network_->residual(r);
    for (const auto* loads : {&evaluation.load_gbps, &evaluation.down_load_gbps}) {
      double load = r < static_cast<int>(loads->size()) ? (*loads)[r] : 0.0;
      if (load > cap * (1 + 1e-6) + 1e-9) {
        out.push_back(absl::StrFormat("%s: %s %.9g > %.9g", network_->ResourceName(r),
                                      loads == &evaluation.load_gbps ? "up" : "down", load, cap));
      }
    }
  }
  return out;
}

core::JobPlan FlowEvaluator::ToJobPlan(const RoutedJob& job) const {
  const core::Graph& g = network_->graph();
  const JobInput& in = network_->input().jobs[job.job];
  core::JobPlan p = RoutesOf(*network_, job);
  for (const auto& [sw, n] : job.aggregators) p.aggregators[g.name(sw)] = n;
  p.batch_size = job.batch_size > 0 ? job.batch_size : in.spec.batch_size;
  p.priority = in.spec.priority;
  return p;
}

absl::StatusOr<Evaluation> EvaluatePlan(const PlanningInput& input, const core::Plan& plan) {
  return EvaluatePlan(input, plan, nullptr);
}

absl::StatusOr<Evaluation> EvaluatePlan(const PlanningInput& input, const core::Plan& plan,
                                        const HoldTimeFunction& hold_us) {
  auto net = Network::Create(input);
  if (!net.ok()) return net.status();
  FlowEvaluator evaluator(**net);
  std::vector<RoutedJob> jobs;
  for (const core::JobPlan& jp : plan.jobs) {
    auto job = evaluator.FromJobPlan(jp);
    if (!job.ok()) return job.status();
    if (hold_us) {
      for (const auto& [sw, n] : job->aggregators) {
        job->hold_us[sw] = hold_us(jp, (*net)->graph().name(sw));
      }
    }
    jobs.push_back(*std::move(job));
  }
  return evaluator.Evaluate(jobs);
}

absl::StatusOr<std::vector<JobEvaluation>> RescorePlan(const PlanningInput& input,
                                                       const HoldTimeFunction& hold_us,
                                                       core::Plan* plan) {
  auto net = Network::Create(input);
  if (!net.ok()) {
    return absl::InternalError(
        absl::StrCat("re-scoring the plan: its network cannot be built: ", net.status().message()));
  }
  FlowEvaluator evaluator(**net);
  std::vector<core::JobPlan*> scored;
  std::vector<RoutedJob> jobs;
  for (core::JobPlan& jp : plan->jobs) {
    if (!jp.ring.empty()) continue;
    auto job = evaluator.FromJobPlan(jp);
    if (!job.ok()) {
      return absl::InternalError(
          absl::StrCat("re-scoring planned job ", jp.job_id,
                       ": the flow model refuses it: ", job.status().message()));
    }
    if (hold_us) {
      for (const auto& [sw, n] : job->aggregators) {
        job->hold_us[sw] = hold_us(jp, (*net)->graph().name(sw));
      }
    }
    scored.push_back(&jp);
    jobs.push_back(*std::move(job));
  }
  Evaluation evaluation = evaluator.Evaluate(jobs);
  for (size_t k = 0; k < scored.size(); ++k) {
    scored[k]->rate_gbps = evaluation.jobs[k].rate_gbps;
    scored[k]->comm_ms = evaluation.jobs[k].comm_ms;
    scored[k]->iteration_ms = evaluation.jobs[k].iteration_ms;
  }
  return std::move(evaluation.jobs);
}

void ApplyEvaluation(const Evaluation& evaluation, core::Plan* plan) {
  for (size_t i = 0; i < plan->jobs.size() && i < evaluation.jobs.size(); ++i) {
    plan->jobs[i].rate_gbps = evaluation.jobs[i].rate_gbps;
    plan->jobs[i].comm_ms = evaluation.jobs[i].comm_ms;
    plan->jobs[i].iteration_ms = evaluation.jobs[i].iteration_ms;
  }
}

double JobCompletionMs(double wait_ms, int64_t iterations, double iteration_ms) {
  return wait_ms + static_cast<double>(iterations) * iteration_ms;
}

}  // namespace inac::scheduler
