// Upper bounds on a job's rate that hold for EVERY plan the data plane can run, not only for the
// plans among one algorithm's candidates (docs/routing.md section 3b, "Plan families the
// data plane runs", and section 3c). RoutingResult::lp_bound_gbps is the optimum of GRID's LP over
// GRID's own candidate paths and aggregation nodes: plans outside them beat it (GRID's setting (a),
// fat-tree k = 8, 100 workers: 18 Gbps, while a deployable two-level plan sustains 74.5). The two
// LPs below range over ARCS (any path) and any aggregation switch, solved by CLP
// (scheduler/lp/linear_program.h).
//
// What the data plane runs (api/p4/ina.p4, core::DeriveSwitchIntents). A (job, PS) shard is cut
// into aligned chunk ranges, one aggregation tag each. Per tag, each worker's range is summed at
// one INA switch -- at most 64 inputs per tag per switch (ina.p4's 64-bit input bitmap) -- or sent
// raw to the PS; each aggregating switch sends one stream per tag (the range's length) to the PS
// or (chains) to a parent switch, which counts it as one input of its own tag. A plan's rate is
// what the flow model (scheduler/model/flow_model.h) charges, every resource at its residual.
//
// The model. Variables in Gbps; λ the per-worker sending rate, maximised. P the job's PSs, A the
// INA switches with residual processing > 0 (a switch without it cannot aggregate at rate > 0),
// W_s the job's workers other than s. Measures below are of chunk-range sets of a shard, scaled by
// x_s·λ (the shard's volume).
//   X_s                 x_s·λ, Σ_s X_s = λ (free shares; one PS: X = λ). Every plan has shares.
//   r_{w,s,d}           worker w's part of shard s summed at d ∈ A ∪ {s} (d = s: raw to the PS):
//                       Σ_d r_{w,s,d} = X_s for w ≠ s. Every range of w for s goes to exactly one
//                       node (a worker that is its own PS sends nothing for its own shard).
//   y_{a,s}             a's stream for s = the measure of the union of the ranges a aggregates
//                       (the flow model's stream size): r_{w,s,a} ≤ y_{a,s} (w's ranges at a are
//                       disjoint pieces of that union) and y_{a,s} ≤ X_s (a union of ranges of
//                       one shard).
//   fan-in              Σ_w r_{w,s,a} + Σ_c z_{c,a,s} ≤ 64·y_{a,s}: every chunk of a's union is
//                       in one tag, which has at most 64 inputs at a; integrating the number of
//                       inputs covering a chunk over the union gives the inequality.
//   chains only         z_{c,p,s}: the part of c's stream re-aggregated at p (c ≠ p ∈ A);
//                       y_{c,s} = t_{c,s} + Σ_p z_{c,p,s} (each chunk of c's union leaves c once,
//                       to the PS -- t -- or to one parent; a real child has one parent for all
//                       its tags, which the LP does not need); z_{c,p,s} ≤ y_{p,s} (what p
//                       re-aggregates is in p's union). Single level: t_{a,s} = y_{a,s}, no z.
//   processing          Σ_{w,s} r_{w,s,a} + Σ_{c,s} z_{c,a,s} ≤ residual C_a (the flow model
//                       charges a switch every input it sums, a re-aggregated stream as one).
//   PS ingress          Σ_w r_{w,s,s} + Σ_a t_{a,s} ≤ residual B_s (raw inputs plus the streams
//                       ending at s, as the flow model charges the PS).
//   PS coverage         Σ_w r_{w,s,s} + Σ_a t_{a,s} ≥ ⌈W_s / 64^L⌉·X_s: every chunk of the shard
//                       reaches s summed over all W_s workers; a stream covers at most 64 workers
//                       per chunk (L = 1, single level) or 64² (L = 2: chains of two levels, the
//                       one level of re-aggregation DeriveSwitchIntents programs); a raw chunk
//                       covers one. For W_s ≤ 4096 the chained constant is 1, which holds for
//                       chains of any depth (the evaluator's too): every chunk reaches s at least
//                       once.
//   routing             multi-commodity flow over arcs, aggregated BY DESTINATION: one
//                       commodity per a ∈ A, supplied by the workers' Σ_s r_{w,s,a} at the
//                       worker and, with chains, by Σ_s z_{c,a,s} at each child c; one commodity
//                       per PS s, supplied by the raw r_{w,s,s} at the worker and t_{a,s} at each
//                       a. Any plan's routes (paths, with any chunk split) decompose into such
//                       flows, by destination. Hosts do not forward (paths never transit a
//                       host): a host's arcs are in a commodity only as its source (out-arcs) or
//                       its destination (in-arcs). Arcs out of a commodity's destination are
//                       left out (flow leaving it could only return in a cycle). Per arc:
//                       Σ over commodities ≤ residual; arcs with residual 0 are left out.
// Size reductions (valid relaxations, the optimum is still a bound): the job's workers behind one
// ToR -- single-homed hosts (one up link, to a switch), not a PS of the job -- form one group of m
// workers with columns R = Σ_{w in group} r_w supplied at the ToR: Σ_d R_{g,s,d} = m·X_s,
// R_{g,s,a} ≤ m·y_{a,s}, and the members' access arcs (each carries that worker's whole λ) as
// λ ≤ their smallest residual. Other workers are their own sources with their own arcs.
// Not modelled, so the bounds are above what plans reach when they bind: aggregator memory (it
// only lowers rates: flow_model.h's λ ≤ a·B·8 / hold), the result broadcast (the down phase), a
// plan's finitely many tags and one parent per child. Every constraint above holds for every
// deployable plan, so λ of every such plan alone on `residual` is at most the LP optimum (tested:
// every algorithm's evaluated rate on random fabrics, tests/scheduler/routing_bounds_test.cc).
//
// Size: (|A| + |P|) · (switch arcs + source hosts' arcs) flow columns, plus groups · |P| ·
// (|A| + 1) aggregation columns (chains: + |A|² · |P|); rows (|A| + |P|) · switches + arcs +
// groups · |P| · |A|. Measured (Release, shared 2-core machine, seed 1, build + solve; the build
// is < 1 % of it): GRID's setting (k = 8, 6 hosts per edge switch, one PS) with INA on the 32
// edge switches ~18,000 columns, 0.2-0.5 s; with a random 20 % of the switches ~9,000 columns,
// 0.1-0.2 s. Fat-tree k = 16 (edge INA, 256 workers, 4 PSs): ~600,000 columns, CLP does not
// finish within 60 s (the closed form is returned). Fat-tree k = 32 (edge INA, 1024 workers,
// 4 PSs): ~18 million columns, above kMaxBoundColumns: not built (closed form). Flow columns per
// destination are what grows; column generation over paths would be the way to scale.
// tests/scheduler/routing_bounds_test.cc (DISABLED_Figures, run by hand) prints these figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {

// Inputs of one aggregation switch per tag (ina.p4's 64-bit input bitmap).
inline constexpr int kBoundMaxFanIn = 64;
// Levels of aggregation ChainedBound's PS coverage assumes beyond 64² workers per shard (the data
// plane programs one level of re-aggregation). Below 64² + 1 workers it does not matter.
inline constexpr int kBoundChainLevels = 2;
// Above this many columns the LPs are not built (CLP would need gigabytes and far longer than
// any planning time limit): the bounds return the closed form (status "too_large: closed_form").
inline constexpr int64_t kMaxBoundColumns = 4'000'000;

struct RateBound {
  // Proven upper bound on λ (Gbps): the LP optimum when status is "optimal"; after a time limit
  // the smaller of the Lagrangian bound of the solver's last duals (lp::Solution::best_bound) and
  // the closed form; the closed form when the LP is too large. The closed form: the grouped
  // workers' access links, the other workers' egress, Σ_s B_s / ⌈W_s / 64^L⌉ (PS ingress over
  // coverage). +infinity when nothing bounds λ (a job whose only worker is its only PS).
  double gbps = 0;
  // lp::SolveStatusName of the solve ("optimal", "feasible", "no_solution", "unbounded") with
  // ": dual_bound" or ": closed_form" appended when gbps is not the optimum, or
  // "too_large: closed_form" (not solved, above kMaxBoundColumns).
  std::string status;
  // Size of the LP (of the LP that would have been built when too large).
  int columns = 0, rows = 0;
};

// Upper bound on λ (per-worker sending rate, Gbps) of job `job` (index into network.input().jobs)
// alone on `residual` (resource-indexed as Network; nullptr: network.residuals()), over every
// single-level plan (every (worker, chunk range) summed at one switch or raw at the PS, any paths,
// any split, any shares). InvalidArgument: bad job index, a ring all-reduce job, no workers,
// unknown hosts, `residual` of the wrong size; Internal when CLP fails. Deterministic unless the
// time limit stops the solver (then the bound may differ between runs, and stays valid).
absl::StatusOr<RateBound> SingleLevelBound(const Network& network, int job,
                                           const std::vector<double>* residual = nullptr,
                                           double time_limit_s = 60);

// As SingleLevelBound, over every plan with re-aggregation (chains of aggregating switches of any
// depth; the PS coverage as in the header comment). A valid bound for single-level plans too, so
// ChainedBound >= SingleLevelBound.
absl::StatusOr<RateBound> ChainedBound(const Network& network, int job,
                                       const std::vector<double>* residual = nullptr,
                                       double time_limit_s = 60);

// The size the LP of SingleLevelBound (chains = false) or ChainedBound would have, without
// building it (for callers deciding whether to ask).
struct BoundSize {
  int64_t columns = 0;
  int64_t rows = 0;
};
absl::StatusOr<BoundSize> RateBoundSize(const Network& network, int job, bool chains,
                                        const std::vector<double>* residual = nullptr);

}  // namespace inac::scheduler
