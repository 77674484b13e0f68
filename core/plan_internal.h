// Internal to core/ (not part of core/plan.h's API): the helpers that both core/plan.cc
// (ChunkRangesOf, JobTagsOf, UpstreamRouteOf) and core/switch_intents.cc (DeriveSwitchIntents)
// read a plan with, so that the tags, ranges and routes a switch is programmed with are the same
// ones the controller and the agents are told about. Defined in core/plan.cc. Every function is
// pure: it reads the graph and the plan and returns values.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/plan.h"

namespace inac::core::plan_internal {

// Cuts the flows of one (job, PS) into aligned chunk ranges, at most `max_ranges` (see
// ChunkRangesOf).
std::vector<ChunkRange> RangesOf(const std::vector<const FlowPlan*>& flows, int max_ranges);

// Node indices of `path`; empty when a node is unknown.
std::vector<int> NodeIndices(const Graph& g, const std::vector<std::string>& path);

// A shortest path over up links from `from` to `to` (node indices), forwarding only through
// switches; empty if none.
std::vector<int> ShortestSwitchPath(const Graph& g, int from, int to);

// The plan's aggregator path of switch `sw` toward `ps` (node indices, sw first): ending at the
// PS, or at an INA switch with an aggregator path of its own toward the same PS (a chain's
// parent). Empty when the plan has no usable path.
std::vector<int> PlanUpstreamRoute(const Graph& g, const JobPlan& jp, const std::string& ps, int sw,
                                   int ps_node);

// Where switch `sw`'s upstream packets of a (job, PS) go: `route` to the PS, and `parent`, the
// switch that takes its aggregate as an input (-1: none). With `with_route` false only `parent`
// is resolved.
struct Upstream {
  std::vector<int> route;
  int parent = -1;
};
Upstream ResolveUpstream(const Graph& g, const JobPlan& jp, const std::string& ps, int sw,
                         int ps_node, bool with_route);

// A flow of a tag as DeriveSwitchIntents reads it: its node path (false when a node is unknown:
// the flow is not derived) and its aggregation switch (-1 when it is not aggregated at one).
bool DerivedFlow(const Graph& g, const FlowPlan& f, std::vector<int>* path, int* agg);

// Chains (two-level aggregation) of one tag: adds to `inputs` (switch -> its input nodes) every
// programmed parent with its child as an input, recursively, and, with `route_of`, each
// aggregating switch's upstream route.
void ResolveChains(const Graph& g, const JobPlan& jp, const std::string& ps, int ps_node,
                   std::map<int, std::set<int>>* inputs, std::map<int, std::vector<int>>* route_of);

}  // namespace inac::core::plan_internal
