// InArt: in-network aggregation with route selection over several parameter servers (Bao et al.,
// "InArt: In-Network Aggregation with Route Selection for Accelerating Distributed Training",
// WWW 2024), its two phases:
//
// Phase 1 (model split; the paper's Lagrange-multiplier step, inferred form -- the full text was
// not available). Each PS s either receives its share aggregated in the network (mode "agg": per
// unit of share it takes d_s = m_s + u_s streams, m_s the distinct nearest INA switches on the
// workers' shortest paths to s, u_s the workers without one) or directly (mode "direct": d_s =
// workers). With capacities B_s (PS ingress left) and K = min_v C_v / n_v (switch v aggregating
// n_v workers), the problem max λ s.t. x_s λ d_s <= B_s, λ Σ_{agg} x_s <= K, Σ x_s = 1 is linear
// in x for a fixed mode; its KKT conditions make every binding constraint tight and give the
// closed form λ = min(Σ_agg B_s/d_s, K) + Σ_direct B_s/d_s, x_s = (B_s/d_s)·θ/λ (θ = the switch
// scaling for agg PSs, 1 otherwise): PSs with more headroom get more. The modes are enumerated
// (2^P, P <= 12; greedy flips beyond) and the best λ kept (ties: more aggregation).
//
// Phase 2 (routing with the shares fixed): the routing LP of scheduler/routing/routing_lp.h with
// link, switch and PS constraints, randomised rounding per (PS, worker) pair and per path (R
// rounds, seeded), local search, single-level ATP floor. lp_bound_gbps is the LP with free shares
// (a bound over every split, not only phase 1's).
//
// Complexity: phase 1 O(2^P · P + W · P · L); phase 2 as GRID. Deterministic for a seed.
#pragma once

#include <vector>

#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

struct ShareSplit {
  std::vector<double> shares;    // aligned with the job's parameter_servers, sum 1
  std::vector<bool> aggregated;  // mode per PS
  double lambda_estimate = 0;    // phase 1's λ (ignores links)
};

// Phase 1 for `job` on `residual`. Equal shares when nothing has capacity.
ShareSplit InArtShares(const Network& network, PathCache& paths,
                       const std::vector<double>& residual, int job);

class InArtRouting : public RoutingAlgorithm {
 public:
  std::string_view name() const override { return "inart"; }
  absl::StatusOr<RoutingResult> Route(const Network& network) const override;
};

}  // namespace inac::scheduler
