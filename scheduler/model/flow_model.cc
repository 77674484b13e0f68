#include "scheduler/model/flow_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace inac::scheduler {
namespace {

constexpr double kRelTol = 1e-9;

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

}  // namespace

JobUsage ComputeUsage(const Network& network, const RoutedJob& job) {
  const core::Graph& g = network.graph();
  std::map<int, double> share;
  for (const auto& [ps, x] : job.shares) share[ps] += x;
  auto share_of = [&](int ps) {
    auto it = share.find(ps);
    return it == share.end() ? 0.0 : it->second;
  };
  std::map<std::pair<int, int>, double> stream_fraction;  // (switch, ps) -> largest fraction
  std::map<std::pair<int, int>, double> stream_latency;   // own arcs, then via's, to the PS
  std::map<std::pair<int, int>, const RoutedStream*> stream_of;
  std::map<int, std::set<int>> tree;  // ps -> down arcs
  std::map<int, double> up;
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
  JobUsage usage;
  double max_route_us = 0;
  // The chunk range of each flow: a (worker, PS)'s flows cover [0, 1) in order. A stream carries
  // the union of the ranges aggregated at its switch (one tag per range, docs/routing.md).
  std::map<std::pair<int, int>, double> offset;  // (worker, ps) -> where its next flow starts
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> ranges;  // (switch, ps)
  for (const RoutedFlow& f : job.flows) {
    double& at = offset[{f.worker, f.ps}];
    const double begin = at;
    at += f.fraction;
    if (g.is_switch(f.agg) && share_of(f.ps) * f.fraction > 0) {
      ranges[{f.agg, f.ps}].emplace_back(begin, at);
    }
  }
  for (const RoutedFlow& f : job.flows) {
    double c = share_of(f.ps) * f.fraction;
    if (c <= 0) continue;
    double lat = 0;
    for (int a : f.arcs) {
      Add(up, network.ArcResource(a), c);
      lat += network.latency_us(a);
      tree[f.ps].insert(Network::Reverse(a));
    }
    if (g.is_switch(f.agg)) {
      Add(up, network.NodeResource(f.agg), c);
      double& frac = stream_fraction[{f.agg, f.ps}];
      frac = std::max(frac, f.fraction);
      auto it = stream_latency.find({f.agg, f.ps});
      if (it != stream_latency.end()) lat += it->second;
    } else if (!f.arcs.empty()) {
      Add(up, network.NodeResource(f.ps), c);
    }
    max_route_us = std::max(max_route_us, lat);
  }
  // A re-aggregating switch's stream carries the ranges of every stream it re-aggregates.
  for (size_t pass = 0; pass < job.streams.size(); ++pass) {
    bool changed = false;
    for (const RoutedStream& st : job.streams) {
      if (st.via < 0) continue;
      auto it = ranges.find({st.sw, st.ps});
      if (it == ranges.end()) continue;
      std::vector<std::pair<double, double>>& to = ranges[{st.via, st.ps}];
      for (const auto& r : it->second) {
        if (std::find(to.begin(), to.end(), r) == to.end()) {
          to.push_back(r);
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  // Size of each stream: the measure of the union of its ranges.
  for (auto& [key, list] : ranges) {
    std::sort(list.begin(), list.end());
    double total = 0;
    double reach = 0;
    for (const auto& [b, e] : list) {
      const double from = std::max(b, reach);
      if (e > from) total += e - from;
      reach = std::max(reach, e);
    }
    stream_fraction[key] = std::max(stream_fraction[key], std::min(1.0, total));
  }
  for (const RoutedStream& st : job.streams) {
    auto it = stream_fraction.find({st.sw, st.ps});
    if (it == stream_fraction.end()) continue;  // nobody aggregates there: unused path
    double c = share_of(st.ps) * it->second;
    if (st.via >= 0) {
      Add(up, network.NodeResource(st.via), c);  // one more input of the re-aggregating switch
    }
    if (st.arcs.empty()) continue;
    for (int a : st.arcs) {
      Add(up, network.ArcResource(a), c);
      tree[st.ps].insert(Network::Reverse(a));
    }
    if (st.via < 0) Add(up, network.NodeResource(st.ps), c);
  }
  std::map<int, double> down;
  for (const auto& [ps, arcs] : tree) {
    double x = share_of(ps);
    for (int a : arcs) Add(down, network.ArcResource(a), x);
  }
  usage.up = ToVector(up);
  usage.down = ToVector(down);
  usage.rtt_us = 2 * max_route_us;
  if (!job.aggregators.empty()) {
    // Per tag, as the data plane holds it: the job's tags on each switch (core::JobTagsOf, the
    // derivation's own rule) share its grant there by core::SplitGrant; a tag has one window over
    // its whole tree, the least of its non-zero shares (core::DeriveSwitchIntents: slots line up
    // along a chain), and tag t of weight w = x_s * (range length) with window a sustains
    // λ · w ≤ a · B · 8 / hold on every switch that gives it a region.
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
      const double hold = hold_it != job.hold_us.end() ? hold_it->second : usage.rtt_us;
      if (hold <= 0) continue;
      const int bytes = network.input().topology.switches[sw].ina.aggregator_bytes;
      const double cap = static_cast<double>(window[t]) * bytes * 8.0 / (hold * 1e3);
      const double limit = cap / tags[t].weight;
      if (limit < usage.memory_limit_gbps) {
        usage.memory_limit_gbps = limit;
        usage.memory_switch = sw;
      }
    }
  }
  return usage;
}

OnOffShare OnOffFairRates(const std::vector<double>& capacity, const std::vector<OnOffJob>& jobs) {
  const int n = static_cast<int>(jobs.size());
  OnOffShare out;
  out.rates.assign(n, 0.0);
  out.active_fraction.assign(n, 0.0);
  out.bottleneck.assign(n, -1);
  // Average rate at λ (per worker stream).
  auto average = [&](int j, double lambda) {
    if (lambda <= 0) return 0.0;
    if (std::isinf(lambda)) {
      return jobs[j].compute_s > 0 ? jobs[j].gradient_gbit / jobs[j].compute_s : kUnbounded;
    }
    return jobs[j].gradient_gbit / (jobs[j].compute_s + jobs[j].gradient_gbit / lambda);
  };
  std::vector<char> frozen(n, 0);
  std::vector<double> cap(n, kUnbounded);  // burst cap
  std::vector<int> cap_resource(n, -1);
  int active = 0;
  for (int j = 0; j < n; ++j) {
    cap[j] = jobs[j].flow.limit;
    for (const auto& [r, c] : jobs[j].flow.coefficients) {
      if (c <= 0) continue;
      const double alone = std::max(0.0, capacity[r]) / c;
      if (alone < cap[j]) {
        cap[j] = alone;
        cap_resource[j] = r;
      }
    }
    if (std::isinf(cap[j])) {
      out.rates[j] = kUnbounded;
      frozen[j] = 1;
    } else if (cap[j] <= 0) {
      frozen[j] = 1;
      out.bottleneck[j] = cap_resource[j];
    } else {
      ++active;
    }
  }
  std::vector<double> fixed_load(capacity.size(), 0.0);  // mean load of frozen jobs
  for (int j = 0; j < n; ++j) {
    if (!frozen[j] || std::isinf(out.rates[j])) continue;
    for (const auto& [r, c] : jobs[j].flow.coefficients)
      fixed_load[r] += c * average(j, out.rates[j]);
  }
  std::vector<double> load(capacity.size(), 0.0);
  std::vector<int> touched;
  std::vector<char> mark(capacity.size(), 0);
  // Mean loads at level t of the resources the unfrozen jobs cross; true when one exceeds its
  // capacity by more than the tolerance.
  auto evaluate = [&](double t) {
    for (int r : touched) load[r] = fixed_load[r];
    bool over = false;
    for (int j = 0; j < n; ++j) {
      if (frozen[j]) continue;
      const double x = average(j, t);
      for (const auto& [r, c] : jobs[j].flow.coefficients) load[r] += c * x;
    }
    for (int r : touched) {
      if (load[r] > capacity[r] * (1 + kRelTol) + 1e-12) over = true;
    }
    return over;
  };
  std::vector<char> saturated_here(capacity.size(), 0);
  double level = 0;
  while (active > 0) {
    touched.clear();
    double t_hi = kUnbounded;
    for (int j = 0; j < n; ++j) {
      if (frozen[j]) continue;
      t_hi = std::min(t_hi, cap[j]);
      for (const auto& [r, c] : jobs[j].flow.coefficients) {
        if (!mark[r]) {
          mark[r] = 1;
          touched.push_back(r);
        }
      }
    }
    for (int r : touched) mark[r] = 0;
    double t = t_hi;
    if (evaluate(t_hi)) {
      double lo = level;
      double hi = t_hi;
      for (int it = 0; it < 64 && hi - lo > kRelTol * std::max(1e-9, hi); ++it) {
        const double mid = 0.5 * (lo + hi);
        if (evaluate(mid)) {
          hi = mid;
        } else {
          lo = mid;
        }
      }
      t = lo;
    }
    evaluate(t);
    // Saturated resources at t: within the tolerance of capacity (the tightest one at least).
    for (int r : touched) saturated_here[r] = 0;
    int tightest = -1;
    double tightest_ratio = -1;
    for (int r : touched) {
      const double ratio = capacity[r] > 0 ? load[r] / capacity[r] : kUnbounded;
      if (ratio > tightest_ratio) {
        tightest_ratio = ratio;
        tightest = r;
      }
      if (load[r] >= capacity[r] * (1 - 1e-7)) saturated_here[r] = 1;
    }
    const bool at_cap = t >= t_hi * (1 - kRelTol);
    if (!at_cap && tightest >= 0) saturated_here[tightest] = 1;
    int froze = 0;
    for (int j = 0; j < n; ++j) {
      if (frozen[j]) continue;
      int via = -1;
      for (const auto& [r, c] : jobs[j].flow.coefficients) {
        if (saturated_here[r]) {
          via = r;
          break;
        }
      }
      const bool capped = cap[j] <= t * (1 + kRelTol);
      if (via < 0 && !capped) continue;
      frozen[j] = 1;
      --active;
      ++froze;
      out.rates[j] = capped ? cap[j] : t;
      out.bottleneck[j] = via >= 0 ? via : cap_resource[j];
      const double x = average(j, out.rates[j]);
      for (const auto& [r, c] : jobs[j].flow.coefficients) fixed_load[r] += c * x;
    }
    level = t;
    if (froze == 0) break;  // cannot happen: the tightest resource or a cap freezes someone
  }
  for (int j = 0; j < n; ++j) {
    if (!frozen[j]) out.rates[j] = level;
  }
  for (int j = 0; j < n; ++j) {
    const double lambda = out.rates[j];
    if (std::isinf(lambda)) {
      out.active_fraction[j] = 0;
    } else if (lambda <= 0) {
      out.active_fraction[j] = 1;
    } else {
      const double comm = jobs[j].gradient_gbit / lambda;
      out.active_fraction[j] = comm / (jobs[j].compute_s + comm);
    }
  }
  return out;
}

FairShare MaxMinFairRates(const std::vector<double>& capacity,
                          const std::vector<VirtualFlow>& flows) {
  const int n = static_cast<int>(flows.size());
  FairShare out;
  out.rates.assign(n, 0.0);
  out.bottleneck.assign(n, -1);
  std::vector<char> frozen(n, 0);
  std::vector<double> remaining = capacity;
  std::vector<double> sum(capacity.size(), 0.0);
  std::vector<char> saturated(capacity.size(), 0);
  int active = 0;
  for (int f = 0; f < n; ++f) {
    if (flows[f].coefficients.empty() && std::isinf(flows[f].limit)) {
      out.rates[f] = kUnbounded;
      frozen[f] = 1;
    } else if (flows[f].limit <= 0) {
      frozen[f] = 1;
    } else {
      ++active;
    }
  }
  std::vector<int> touched;
  while (active > 0) {
    touched.clear();
    for (int f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      for (const auto& [r, c] : flows[f].coefficients) {
        if (sum[r] == 0) touched.push_back(r);
        sum[r] += c;
      }
    }
    double delta = kUnbounded;
    int argmin = -1;
    for (int r : touched) {
      double d = std::max(0.0, remaining[r]) / sum[r];
      if (d < delta) {
        delta = d;
        argmin = r;
      }
    }
    for (int f = 0; f < n; ++f) {
      if (!frozen[f]) delta = std::min(delta, flows[f].limit - out.rates[f]);
    }
    if (std::isinf(delta)) break;  // cannot happen: every active flow has a coefficient or limit
    delta = std::max(0.0, delta);
    for (int f = 0; f < n; ++f) {
      if (!frozen[f]) out.rates[f] += delta;
    }
    for (int r : touched) {
      const double before = remaining[r];
      remaining[r] -= delta * sum[r];
      // The resource that set the step is full (no rounding residue left). Compared with what
      // is left *before* the step: a step set by a private limit leaves the tightest resource
      // part-full, and it must not freeze the flows crossing it.
      if (r == argmin && delta * sum[r] >= before - 1e-12) remaining[r] = 0;
      if (remaining[r] <= kRelTol * std::max(1.0, capacity[r])) saturated[r] = 1;
    }
    int froze = 0;
    for (int f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      if (out.rates[f] >= flows[f].limit * (1 - kRelTol)) {
        frozen[f] = 1;
        ++froze;
        continue;
      }
      for (const auto& [r, c] : flows[f].coefficients) {
        if (saturated[r]) {
          frozen[f] = 1;
          out.bottleneck[f] = r;
          ++froze;
          break;
        }
      }
    }
    for (int r : touched) sum[r] = 0;
    if (froze == 0) {
      // Numerical corner: freeze the flows on the tightest resource so the loop terminates.
      if (argmin < 0) break;
      saturated[argmin] = 1;
      for (int f = 0; f < n; ++f) {
        if (frozen[f]) continue;
        for (const auto& [r, c] : flows[f].coefficients) {
          if (r == argmin) {
            frozen[f] = 1;
            out.bottleneck[f] = r;
            ++froze;
            break;
          }
        }
      }
      if (froze == 0) break;
    }
    active -= froze;
  }
  return out;
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

absl::StatusOr<RoutedJob> FlowEvaluator::FromJobPlan(const core::JobPlan& plan) const {
  const core::Graph& g = network_->graph();
  const std::vector<JobInput>& jobs = network_->input().jobs;
  RoutedJob job;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].id == plan.job_id) job.job = static_cast<int>(i);
  }
  if (job.job < 0) return absl::InvalidArgumentError(absl::StrCat("unknown job ", plan.job_id));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("job ", plan.job_id, ": ", what));
  };
  if (plan.ps_shares.empty()) return bad("no parameter-server shares (ring plans are not scored)");
  double total = 0;
  for (const auto& [ps, x] : plan.ps_shares) {
    int v = g.index(ps);
    if (v < 0 || !g.is_host(v)) return bad(absl::StrCat("unknown parameter server ", ps));
    if (!(x >= 0)) return bad(absl::StrCat("negative share for ", ps));
    job.shares.emplace_back(v, x);
    total += x;
  }
  if (std::abs(total - 1) > 1e-6) return bad(absl::StrCat("shares sum to ", total));
  auto to_arcs = [&](const std::vector<std::string>& path, std::vector<int>* arcs) -> absl::Status {
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      int u = g.index(path[i]);
      int v = g.index(path[i + 1]);
      int a = (u >= 0 && v >= 0) ? g.ArcBetween(u, v) : -1;
      if (a < 0) return bad(absl::StrCat("no up link ", path[i], " -> ", path[i + 1]));
      arcs->push_back(a);
    }
    return absl::OkStatus();
  };
  std::set<std::pair<int, int>> aggregating;
  for (const core::FlowPlan& f : plan.flows) {
    RoutedFlow rf;
    rf.worker = g.index(f.worker);
    rf.ps = g.index(f.ps);
    rf.agg = g.index(f.aggregation_node);
    rf.fraction = f.fraction;
    if (rf.worker < 0 || rf.ps < 0 || rf.agg < 0) {
      return bad(absl::StrCat("flow ", f.worker, " -> ", f.ps, " names an unknown node"));
    }
    if (rf.agg != rf.ps && !g.ina_capable(rf.agg)) {
      return bad(absl::StrCat("flow ", f.worker, " aggregated at ", f.aggregation_node,
                              ", which is neither its PS nor an INA switch"));
    }
    if (!(f.fraction > 0 && f.fraction <= 1)) return bad("flow fraction outside (0, 1]");
    if (f.path.empty() || f.path.front() != f.worker || f.path.back() != f.aggregation_node) {
      return bad(absl::StrCat("flow ", f.worker, " path must run from the worker to ",
                              f.aggregation_node));
    }
    absl::Status s = to_arcs(f.path, &rf.arcs);
    if (!s.ok()) return s;
    if (g.is_switch(rf.agg)) aggregating.insert({rf.agg, rf.ps});
    job.flows.push_back(std::move(rf));
  }
  std::set<std::pair<int, int>> streamed;
  for (const core::AggregatorPlan& a : plan.aggregator_paths) {
    const int sw = g.index(a.switch_id), ps = g.index(a.ps);
    if (sw >= 0 && ps >= 0) streamed.insert({sw, ps});
  }
  std::map<std::pair<int, int>, int> via_of;
  for (const core::AggregatorPlan& a : plan.aggregator_paths) {
    RoutedStream st;
    st.sw = g.index(a.switch_id);
    st.ps = g.index(a.ps);
    if (st.sw < 0 || st.ps < 0) return bad("aggregator path names an unknown node");
    if (a.path.empty() || a.path.front() != a.switch_id) {
      return bad(absl::StrCat("aggregator path of ", a.switch_id, " must start at it"));
    }
    if (a.path.back() != a.ps) {
      // Re-aggregated at the switch it ends at (two-level aggregation).
      const int via = g.index(a.path.back());
      if (via < 0 || via == st.sw || !g.is_switch(via) || !g.ina_capable(via) ||
          !streamed.count({via, st.ps})) {
        return bad(absl::StrCat("aggregator path of ", a.switch_id, " must run to ", a.ps,
                                " or to an INA switch that aggregates for it"));
      }
      st.via = via;
      via_of[{st.sw, st.ps}] = via;
    }
    absl::Status s = to_arcs(a.path, &st.arcs);
    if (!s.ok()) return s;
    job.streams.push_back(std::move(st));
  }
  for (const auto& [key, first] : via_of) {
    int at = first;
    for (size_t hop = 0;; ++hop) {
      auto it = via_of.find({at, key.second});
      if (it == via_of.end()) break;
      if (hop > via_of.size()) {
        return bad(absl::StrCat("the re-aggregation chain from ", g.name(key.first),
                                " never reaches ", g.name(key.second)));
      }
      at = it->second;
    }
  }
  for (const auto& [sw, ps] : aggregating) {
    if (!streamed.count({sw, ps})) {
      return bad(
          absl::StrCat(g.name(sw), " aggregates for ", g.name(ps), " but has no aggregator path"));
    }
  }
  for (const auto& [sw, n] : plan.aggregators) {
    int v = g.index(sw);
    if (v < 0 || !g.is_switch(v)) return bad(absl::StrCat("aggregators on unknown switch ", sw));
    job.aggregators[v] = n;
  }
  job.batch_size = plan.batch_size;
  return job;
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
