#include "scheduler/memory/aggregator_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

AggregationTiming TimingAt(const core::Graph& graph, const core::JobPlan& job,
                           const std::string& switch_id, const AggregatorTimingOptions& options) {
  AggregationTiming timing;
  timing.spread_us = options.arrival_spread_us;
  double one_way = -1;
  for (const core::AggregatorPlan& agg : job.aggregator_paths) {
    if (agg.switch_id != switch_id) continue;
    one_way = std::max(one_way, PathLatencyUs(graph, agg.path, options));
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
