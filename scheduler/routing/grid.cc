#include "scheduler/routing/grid.h"

#include "scheduler/routing/lp_routing.h"

namespace inac::scheduler {

absl::StatusOr<RoutingResult> GridRouting::Route(const Network& network) const {
  LpRoutingConfig config;
  config.shares = [](const Network&, PathCache&, const std::vector<double>&,
                     int) -> std::optional<std::vector<double>> { return std::nullopt; };
  return RouteWithLp(network, config);
}

}  // namespace inac::scheduler
