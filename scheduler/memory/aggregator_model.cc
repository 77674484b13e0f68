#include "scheduler/memory/aggregator_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace inac::scheduler {

std::string_view MemoryPolicyName(MemoryPolicy policy) {
  switch (policy) {
    case MemoryPolicy::kNoIna:
      return "no_ina";
    case MemoryPolicy::kSwitchMl:
      return "switchml";
    case MemoryPolicy::kAtp:
      return "atp";
    case MemoryPolicy::kEsa:
      return "esa";
  }
  return "unknown";
}

std::optional<MemoryPolicy> ParseMemoryPolicy(std::string_view name) {
  for (MemoryPolicy p :
       {MemoryPolicy::kNoIna, MemoryPolicy::kSwitchMl, MemoryPolicy::kAtp, MemoryPolicy::kEsa}) {
    if (MemoryPolicyName(p) == name) return p;
  }
  return std::nullopt;
}

double HoldTimeUs(MemoryPolicy policy, const AggregationTiming& timing) {
  switch (policy) {
    case MemoryPolicy::kNoIna:
      return 0;
    case MemoryPolicy::kEsa:
      return timing.spread_us;
    case MemoryPolicy::kAtp:
    case MemoryPolicy::kSwitchMl:
      return timing.spread_us + timing.ps_rtt_us;
  }
  return 0;
}

int64_t WindowAggregators(double rate_gbps, double hold_us, int aggregator_bytes) {
  if (rate_gbps <= 0 || hold_us <= 0) return 0;
  // rate [Gbit/s] * hold [us] = rate * hold * 1e3 bits = rate * hold * 125 bytes.
  const double bytes_in_flight = rate_gbps * hold_us * 125.0;
  // Guard against 1e-12 noise turning an exact multiple into one more aggregator.
  return static_cast<int64_t>(std::ceil(bytes_in_flight / ChunkBytes(aggregator_bytes) - 1e-9));
}

double MemoryRateCapGbps(int64_t aggregators, double hold_us, int aggregator_bytes) {
  if (hold_us <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(aggregators) * ChunkBytes(aggregator_bytes) / (hold_us * 125.0);
}

double PathLatencyUs(const core::Graph& graph, const std::vector<std::string>& path,
                     const AggregatorTimingOptions& options) {
  double total = 0;
  for (size_t i = 1; i < path.size(); ++i) {
    const int from = graph.index(path[i - 1]);
    const int to = graph.index(path[i]);
    double hop = options.default_link_latency_us;
    if (from >= 0 && to >= 0) {
      const int arc = graph.ArcBetween(from, to);
      if (arc >= 0) {
        const auto& link = graph.topology().links[graph.arc(arc).link];
        if (link.latency_us.has_value()) hop = *link.latency_us;
      }
    }
    total += hop;
  }
  return total;
}

ChunkArrivalStats SampleChunkArrivals(const StragglerModel& model, int workers) {
  ChunkArrivalStats stats;
  if (model.distribution == StragglerDistribution::kNone || model.spread_us <= 0 || workers < 2 ||
      model.samples <= 0) {
    return stats;
  }
  // Own generator and own transforms (not std::*_distribution, whose output is not specified
  // across standard libraries): the figures are the same on every build.
  std::mt19937_64 rng(model.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(workers));
  auto unit = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  std::vector<double> offsets(workers);
  double range_sum = 0;
  double after_sum = 0;  // sum over chunks of sum_i (o_i - first): hold-weighted "still to come"
  for (int c = 0; c < model.samples; ++c) {
    for (double& o : offsets) {
      o = model.distribution == StragglerDistribution::kUniform
              ? unit() * model.spread_us
              : -std::log(unit()) * model.spread_us;
    }
    const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
    const double first = *lo;
    range_sum += *hi - first;
    for (double o : offsets) after_sum += o - first;  // the first contributes 0
  }
  stats.mean_range_us = range_sum / model.samples;
  // A preemption at t uniform in [first, last], weighted by last - first: fragment i is still to
  // come with probability (o_i - first) / (last - first); normalised over the n - 1 others.
  if (range_sum > 0) stats.remaining_at_preemption = after_sum / ((workers - 1) * range_sum);
  return stats;
}

AggregationTiming TimingAt(const core::Graph& graph, const core::JobPlan& job,
                           const std::string& switch_id, const AggregatorTimingOptions& options) {
  AggregationTiming timing;
  timing.spread_us = options.arrival_spread_us;
  if (options.stragglers.distribution != StragglerDistribution::kNone) {
    std::set<std::string> workers;
    for (const core::FlowPlan& flow : job.flows) {
      if (flow.aggregation_node == switch_id) workers.insert(flow.worker);
    }
    const ChunkArrivalStats stats =
        SampleChunkArrivals(options.stragglers, static_cast<int>(workers.size()));
    timing.spread_us += stats.mean_range_us;
    timing.remaining_at_preemption = stats.remaining_at_preemption;
  }
  // The aggregator is freed when the PS's result comes back through the switch: the round trip
  // runs over the route the data plane programs, which for a chain child goes on through its
  // parent to the PS (core::UpstreamRouteOf), not just to the parent.
  double one_way = -1;
  for (const core::AggregatorPlan& agg : job.aggregator_paths) {
    if (agg.switch_id != switch_id) continue;
    std::vector<std::string> route = core::UpstreamRouteOf(graph, job, agg.ps, switch_id);
    one_way =
        std::max(one_way, PathLatencyUs(graph, route.size() >= 2 ? route : agg.path, options));
  }
  if (one_way < 0) one_way = options.default_link_latency_us;
  timing.ps_rtt_us = 2 * one_way + options.host_turnaround_us;
  return timing;
}

double WorkerLineRateGbps(const core::Graph& graph, const std::vector<std::string>& workers) {
  double rate = std::numeric_limits<double>::infinity();
  for (const std::string& w : workers) {
    const int node = graph.index(w);
    if (node < 0) return 0;
    double best = 0;
    for (int arc : graph.out_arcs(node)) best = std::max(best, graph.arc(arc).gbps);
    rate = std::min(rate, best);
  }
  return std::isinf(rate) ? 0 : rate;
}

}  // namespace inac::scheduler
