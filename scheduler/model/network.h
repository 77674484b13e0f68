// The capacitated network of the flow-level model (docs/routing.md section 1): the indexed graph of
// a PlanningInput's topology and one "resource" per capacity the model knows.
//
// Resources are dense integers: [0, num_arcs) are directed link arcs (core::Graph arc ids, capacity
// Link::gbps, 0 for links that are down), then one per node: num_arcs + node is the processing
// capacity C_v of a switch (0 unless INA-capable) or the ingress capacity B_s of a host.
// residual(r) = max(0, capacity(r) - background load on r).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/topology.h"
#include "scheduler/model/planning_input.h"

namespace inac::scheduler {

class Network {
 public:
  // Builds the graph and the residual capacities. InvalidArgument (naming every unknown id) when
  // the background load refers to nodes or arcs that do not exist. Precondition: the topology is
  // valid (core::ValidateTopology). `input` is not owned and must outlive the Network.
  static absl::StatusOr<std::unique_ptr<Network>> Create(const PlanningInput& input);

  const PlanningInput& input() const { return *input_; }
  const core::Graph& graph() const { return graph_; }

  int num_arcs() const { return graph_.num_arcs(); }
  int num_resources() const { return graph_.num_arcs() + graph_.num_nodes(); }
  int ArcResource(int arc) const { return arc; }
  int NodeResource(int node) const { return graph_.num_arcs() + node; }
  bool IsArcResource(int r) const { return r < graph_.num_arcs(); }

  double capacity(int r) const { return capacity_[r]; }
  double residual(int r) const { return residual_[r]; }
  const std::vector<double>& residuals() const { return residual_; }
  // "arc s1->s3", "switch s1", "host ps".
  std::string ResourceName(int r) const;

  // Latency of an arc in microseconds (Link::latency_us or the default of the options).
  double latency_us(int arc) const;
  // The reverse arc of `arc` (same link, other direction).
  static int Reverse(int arc) { return arc ^ 1; }

 private:
  Network(const PlanningInput& input);

  const PlanningInput* input_;  // Not owned.
  core::Graph graph_;
  std::vector<double> capacity_;
  std::vector<double> residual_;
};

}  // namespace inac::scheduler
