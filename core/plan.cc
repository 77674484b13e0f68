// core/plan.h: the tag numbering, route classes, chunk ranges, job tags and upstream routes of a
// plan, and the helpers of core/plan_internal.h they share with DeriveSwitchIntents
// (core/switch_intents.cc).
#include "core/plan.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/plan_internal.h"

namespace inac::core {

const JobPlan* Plan::FindJob(JobId id) const {
  for (const JobPlan& j : jobs) {
    if (j.job_id == id) return &j;
  }
  return nullptr;
}

int MaxRangesPerShard(int ps_count) {
  ps_count = std::clamp(ps_count, 1, kMaxParameterServersPerJob);
  return kMaxRangesPerShard * (kMaxParameterServersPerJob / ps_count);
}

uint32_t AggregationTag(JobId job_id, int ps_index, int range, uint32_t generation, int ps_count) {
  ps_count = std::clamp(ps_count, 1, kMaxParameterServersPerJob);
  const uint32_t block = static_cast<uint32_t>(range / kMaxRangesPerShard);
  const uint32_t slot = kMaxRangesPerShard * (static_cast<uint32_t>(ps_count) * block +
                                              static_cast<uint32_t>(ps_index)) +
                        static_cast<uint32_t>(range % kMaxRangesPerShard);
  const uint32_t base = static_cast<uint32_t>(job_id) * kTagSlotsPerJob + slot;
  return ((generation & 3u) << kTagGenerationShift) | (base & kTagBaseMask);
}

namespace {

// What decides a job's input bitmaps: per PS and worker, its flows' aggregation nodes and
// fractions in plan order (RangesOf cuts the ranges from them).
std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, int64_t>>>
AggregationShape(const JobPlan& job) {
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, int64_t>>> out;
  for (const auto& [ps, share] : job.ps_shares) out[{ps, ""}];
  for (const FlowPlan& f : job.flows) {
    if (f.path.empty()) continue;
    out[{f.ps, f.worker}].push_back({f.aggregation_node, std::llround(f.fraction * 1e9)});
  }
  return out;
}

}  // namespace

void CarryAggregationGenerations(const Plan* previous, Plan* next) {
  for (JobPlan& job : next->jobs) {
    const JobPlan* old = previous != nullptr ? previous->FindJob(job.job_id) : nullptr;
    if (old == nullptr) {
      job.generation = 0;
    } else if (AggregationShape(*old) == AggregationShape(job)) {
      job.generation = old->generation;
    } else {
      job.generation = old->generation + 1;
    }
  }
}

const char* RouteClassName(RouteClass cls) {
  switch (cls) {
    case RouteClass::kRaw:
      return "raw";
    case RouteClass::kUpstream:
      return "upstream";
    case RouteClass::kResult:
      return "result";
  }
  return "raw";
}

std::optional<RouteClass> ParseRouteClass(const std::string& name) {
  for (RouteClass c : {RouteClass::kRaw, RouteClass::kUpstream, RouteClass::kResult}) {
    if (name == RouteClassName(c)) return c;
  }
  return std::nullopt;
}

uint64_t NodeMac(const Topology& topology, const std::string& node_id) {
  return (uint64_t{0x0200} << 32) | NodeAddress(topology, node_id);
}

namespace plan_internal {

// Cuts the flows of one (job, PS) into aligned chunk ranges (see ChunkRangesOf).
std::vector<ChunkRange> RangesOf(const std::vector<const FlowPlan*>& flows, int max_ranges) {
  std::map<std::string, std::vector<const FlowPlan*>> by_worker;
  for (const FlowPlan* f : flows) by_worker[f->worker].push_back(f);
  auto key = [](double x) { return static_cast<int64_t>(std::llround(x * 1e9)); };
  std::set<int64_t> cuts = {0, key(1)};
  for (const auto& [w, fs] : by_worker) {
    double at = 0;
    for (const FlowPlan* f : fs) {
      at += f->fraction;
      if (at < 1 - 1e-9) cuts.insert(key(at));
    }
  }
  std::vector<int64_t> points(cuts.begin(), cuts.end());
  std::vector<ChunkRange> out;
  for (size_t k = 0; k + 1 < points.size() && static_cast<int>(k) < max_ranges; ++k) {
    ChunkRange range;
    range.index = static_cast<int>(k);
    range.begin = points[k] / 1e9;
    range.end = points[k + 1] / 1e9;
    const double mid = (range.begin + range.end) / 2;
    for (const auto& [w, fs] : by_worker) {
      double at = 0;
      for (const FlowPlan* f : fs) {
        if (mid >= at && mid < at + f->fraction) {
          range.flows.push_back(f);
          break;
        }
        at += f->fraction;
      }
    }
    out.push_back(std::move(range));
  }
  return out;
}

// Node indices of `path`; empty when a node is unknown.
std::vector<int> NodeIndices(const Graph& g, const std::vector<std::string>& path) {
  std::vector<int> out;
  out.reserve(path.size());
  for (const std::string& id : path) {
    const int v = g.index(id);
    if (v < 0) return {};
    out.push_back(v);
  }
  return out;
}

// A shortest path over up links from `from` to `to` (node indices), forwarding only through
// switches; empty if none.
std::vector<int> ShortestSwitchPath(const Graph& g, int from, int to) {
  std::vector<int> parent(g.num_nodes(), -1);
  std::deque<int> queue = {from};
  parent[from] = from;
  while (!queue.empty()) {
    int u = queue.front();
    queue.pop_front();
    if (u == to) break;
    if (u != from && !g.is_switch(u)) continue;
    for (int a : g.out_arcs(u)) {
      int v = g.arc(a).to;
      if (parent[v] >= 0) continue;
      parent[v] = u;
      queue.push_back(v);
    }
  }
  if (parent[to] < 0) return {};
  std::vector<int> path = {to};
  while (path.back() != from) path.push_back(parent[path.back()]);
  std::reverse(path.begin(), path.end());
  return path;
}

// The plan's aggregator path of switch `sw` toward `ps` (node indices, sw first): ending at the
// PS, or at an INA switch with an aggregator path of its own toward the same PS (a chain's
// parent). Empty when the plan has no usable path.
std::vector<int> PlanUpstreamRoute(const Graph& g, const JobPlan& jp, const std::string& ps, int sw,
                                   int ps_node) {
  for (const AggregatorPlan& ap : jp.aggregator_paths) {
    if (ap.ps != ps || ap.switch_id != g.name(sw)) continue;
    std::vector<int> up = NodeIndices(g, ap.path);
    if (up.size() < 2 || up.front() != sw) return {};
    if (up.back() == ps_node) return up;
    const int parent = up.back();
    if (!g.is_switch(parent) || !g.ina_capable(parent)) return {};
    for (const AggregatorPlan& other : jp.aggregator_paths) {
      if (other.ps == ps && other.switch_id == g.name(parent)) return up;
    }
    return {};
  }
  return {};
}

// Where switch `sw`'s upstream packets of a (job, PS) go: `route` to the PS, and `parent`, the
// switch that takes its aggregate as an input (-1: none). A chain is programmed when the plan's
// path ends at a parent whose own path reaches the PS and the whole route visits no node twice
// (one level: a parent re-aggregated elsewhere does not reach the PS itself); otherwise the
// switch sends to the PS over the plan's path, or a shortest path (only with `with_route`).
// (Upstream: core/plan_internal.h)
Upstream ResolveUpstream(const Graph& g, const JobPlan& jp, const std::string& ps, int sw,
                         int ps_node, bool with_route) {
  Upstream out;
  std::vector<int> route = PlanUpstreamRoute(g, jp, ps, sw, ps_node);
  const int parent = route.empty() ? -1 : route.back();
  if (parent >= 0 && parent != ps_node) {
    std::vector<int> rest = PlanUpstreamRoute(g, jp, ps, parent, ps_node);
    if (!rest.empty() && rest.back() == ps_node) {
      route.insert(route.end(), rest.begin() + 1, rest.end());
      if (std::set<int>(route.begin(), route.end()).size() == route.size()) {
        out.route = std::move(route);
        out.parent = parent;
        return out;
      }
    }
    if (with_route) out.route = ShortestSwitchPath(g, sw, ps_node);
    return out;
  }
  if (route.size() >= 2) {
    out.route = std::move(route);
  } else if (with_route) {
    out.route = ShortestSwitchPath(g, sw, ps_node);
  }
  return out;
}

// A flow of a tag as DeriveSwitchIntents reads it: its node path (false when a node is unknown:
// the flow is not derived) and its aggregation switch (-1 when it is not aggregated at one).
bool DerivedFlow(const Graph& g, const FlowPlan& f, std::vector<int>* path, int* agg) {
  *path = NodeIndices(g, f.path);
  if (path->empty() || g.index(f.worker) < 0) return false;
  *agg = g.index(f.aggregation_node);
  if (*agg >= 0 && !g.is_switch(*agg)) *agg = -1;
  return true;
}

// Chains (two-level aggregation) of one tag: starting from the switches in `inputs` (switch ->
// its input nodes), adds every programmed parent with its child as an input, recursively (the
// parent aggregates the tag even without workers), and, with `route_of`, each aggregating
// switch's upstream route.
void ResolveChains(const Graph& g, const JobPlan& jp, const std::string& ps, int ps_node,
                   std::map<int, std::set<int>>* inputs,
                   std::map<int, std::vector<int>>* route_of) {
  std::vector<int> work;
  for (const auto& [sw, in] : *inputs) work.push_back(sw);
  std::set<int> seen(work.begin(), work.end());
  while (!work.empty()) {
    const int sw = work.back();
    work.pop_back();
    Upstream up = ResolveUpstream(g, jp, ps, sw, ps_node, route_of != nullptr);
    if (up.parent >= 0) {
      (*inputs)[up.parent].insert(sw);
      if (seen.insert(up.parent).second) work.push_back(up.parent);
    }
    if (route_of != nullptr) (*route_of)[sw] = std::move(up.route);
  }
}

}  // namespace plan_internal

using plan_internal::DerivedFlow;
using plan_internal::RangesOf;
using plan_internal::ResolveChains;
using plan_internal::ResolveUpstream;

std::vector<ChunkRange> ChunkRangesOf(const JobPlan& job, const std::string& ps) {
  std::vector<const FlowPlan*> flows;
  for (const FlowPlan& f : job.flows) {
    if (f.ps == ps && !f.path.empty()) flows.push_back(&f);
  }
  return RangesOf(flows, MaxRangesPerShard(static_cast<int>(job.ps_shares.size())));
}

std::vector<JobTag> JobTagsOf(const Graph& graph, const JobPlan& job) {
  std::vector<JobTag> out;
  const int ps_count = static_cast<int>(job.ps_shares.size());
  int ps_index = -1;
  for (const auto& [ps, share] : job.ps_shares) {
    ++ps_index;
    const int ps_node = graph.index(ps);
    if (ps_node < 0) continue;
    for (ChunkRange& range : ChunkRangesOf(job, ps)) {
      std::map<int, std::set<int>> inputs;  // as Deriver::AddTag
      for (const FlowPlan* f : range.flows) {
        std::vector<int> path;
        int agg = -1;
        if (DerivedFlow(graph, *f, &path, &agg) && agg >= 0) {
          inputs[agg].insert(graph.index(f->worker));
        }
      }
      ResolveChains(graph, job, ps, ps_node, &inputs, nullptr);
      JobTag t;
      t.ps = ps;
      t.tag = AggregationTag(job.job_id, ps_index, range.index, job.generation, ps_count);
      t.weight = share * (range.end - range.begin);
      for (const auto& [sw, in] : inputs) t.switches.push_back(graph.name(sw));
      std::sort(t.switches.begin(), t.switches.end());
      t.range = std::move(range);
      out.push_back(std::move(t));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const JobTag& a, const JobTag& b) { return BaseTag(a.tag) < BaseTag(b.tag); });
  return out;
}

std::vector<std::string> UpstreamRouteOf(const Graph& graph, const JobPlan& job,
                                         const std::string& ps, const std::string& switch_id) {
  const int sw = graph.index(switch_id);
  const int ps_node = graph.index(ps);
  if (sw < 0 || ps_node < 0) return {};
  std::vector<std::string> out;
  for (int v : ResolveUpstream(graph, job, ps, sw, ps_node, true).route) {
    out.push_back(graph.name(v));
  }
  return out;
}

std::vector<int64_t> SplitGrant(int64_t grant, const std::vector<double>& weights) {
  const size_t n = weights.size();
  std::vector<int64_t> out(n, 0);
  if (n == 0 || grant <= 0) return out;
  std::vector<double> w(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += w[i] = std::max(0.0, weights[i]);
  if (!(total > 0)) {
    std::fill(w.begin(), w.end(), 1.0);
    total = static_cast<double>(n);
  }
  std::vector<double> remainder(n);
  int64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const double quota = static_cast<double>(grant) * w[i] / total;
    out[i] = std::min<int64_t>(grant, static_cast<int64_t>(std::floor(quota)));
    remainder[i] = quota - static_cast<double>(out[i]);
    given += out[i];
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t k = 0; given < grant; k = (k + 1) % n, ++given) ++out[order[k]];
  while (given > grant) {  // rounding noise only
    size_t most = 0;
    for (size_t i = 1; i < n; ++i) most = out[i] > out[most] ? i : most;
    --out[most];
    --given;
  }
  if (grant < static_cast<int64_t>(n)) return out;
  // Aggregators per unit of weight (a tag of weight 0 needs none: it gives first).
  auto per_weight = [&](size_t k) {
    return w[k] > 0 ? static_cast<double>(out[k]) / w[k] : std::numeric_limits<double>::infinity();
  };
  for (size_t i = 0; i < n; ++i) {
    if (out[i] > 0) continue;
    size_t donor = n;  // exists: the n tags hold grant >= n aggregators, tag i none
    for (size_t j = 0; j < n; ++j) {
      if (out[j] >= 2 && (donor == n || per_weight(j) > per_weight(donor))) donor = j;
    }
    --out[donor];
    ++out[i];
  }
  return out;
}

}  // namespace inac::core
