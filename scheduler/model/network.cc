#include "scheduler/model/network.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inac::scheduler {

Network::Network(const PlanningInput& input) : input_(&input), graph_(input.topology) {}

absl::StatusOr<std::unique_ptr<Network>> Network::Create(const PlanningInput& input) {
  std::unique_ptr<Network> net(new Network(input));
  const core::Graph& g = net->graph_;
  const int n_res = net->num_resources();
  net->capacity_.assign(n_res, 0.0);
  for (int a = 0; a < g.num_arcs(); ++a) {
    const core::Link& link = input.topology.links[g.arc(a).link];
    net->capacity_[a] = link.status == core::LinkStatus::kUp ? g.arc(a).gbps : 0.0;
  }
  for (int v = 0; v < g.num_nodes(); ++v) {
    net->capacity_[net->NodeResource(v)] =
        g.is_switch(v) ? (g.ina_capable(v) ? g.processing_gbps(v) : 0.0) : g.host_ingress_gbps(v);
  }
  net->residual_ = net->capacity_;
  std::vector<std::string> unknown;
  const BackgroundLoad& bg = input.background;
  for (const BackgroundLoad::ArcLoad& l : bg.arcs) {
    int from = g.index(l.from);
    int to = g.index(l.to);
    int arc = (from >= 0 && to >= 0) ? g.ArcBetween(from, to) : -1;
    if (arc < 0) {
      unknown.push_back(absl::StrCat("arc ", l.from, "->", l.to));
      continue;
    }
    net->residual_[arc] -= l.gbps;
  }
  for (const auto& [id, gbps] : bg.switch_processing_gbps) {
    int v = g.index(id);
    if (v < 0 || !g.is_switch(v)) {
      unknown.push_back(absl::StrCat("switch ", id));
      continue;
    }
    net->residual_[net->NodeResource(v)] -= gbps;
  }
  for (const auto& [id, gbps] : bg.host_ingress_gbps) {
    int v = g.index(id);
    if (v < 0 || !g.is_host(v)) {
      unknown.push_back(absl::StrCat("host ", id));
      continue;
    }
    net->residual_[net->NodeResource(v)] -= gbps;
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("background load refers to unknown ", absl::StrJoin(unknown, ", ")));
  }
  for (double& r : net->residual_) r = std::max(0.0, r);
  return net;
}

std::string Network::ResourceName(int r) const {
  if (IsArcResource(r)) {
    const core::Graph::Arc& a = graph_.arc(r);
    return absl::StrCat("arc ", graph_.name(a.from), "->", graph_.name(a.to));
  }
  int v = r - graph_.num_arcs();
  return absl::StrCat(graph_.is_switch(v) ? "switch " : "host ", graph_.name(v));
}

double Network::latency_us(int arc) const {
  const core::Link& link = input_->topology.links[graph_.arc(arc).link];
  return link.latency_us.value_or(input_->options.default_link_latency_us);
}

}  // namespace inac::scheduler
