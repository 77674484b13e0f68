// The path-based routing LP shared by GRID and InArt, its randomised rounding and a local search
// (docs/routing.md section 3).
//
// Candidates (per job, per (worker w, PS s) pair): the aggregation options are s itself and every
// INA switch on one of the k shortest w -> s paths, plus the `extra_candidates` INA switches with
// the smallest detour hops(w, a) + hops(a, s); each option has its k shortest w -> a paths, and
// every (switch a, PS s) its k shortest a -> s paths (or, spread, k arc-diverse minimum-hop
// paths and the equal detours in a per-pair order: BuildCandidates). A baseline plan can be added
// to the candidates (its flows and streams become options) so that the LP models it too.
//
// LP (GRID's R-GRIA relaxation, path-based as the authors' IAR variant, with link constraints):
//   maximise λ (several jobs: maximise t with λ_j >= t, plus 1e-6 · Σ λ_j)
//   Σ_{a,p} r_{w,s,a,p} = x_s λ            every pair (free shares: = z_s with Σ_s z_s = λ)
//   Σ_p r_{w,s,a,p} <= Σ_q y_{a,s,q}       every pair and switch option a (a stream carries
//                                          each of its inputs)
//   Σ r + Σ y over paths crossing arc e <= residual_e
//   Σ r aggregated at switch a <= residual C_a
//   Σ r unaggregated at s + Σ_q y_{·,s,q} <= residual B_s
// Variables are Gbps. The optimum bounds λ of every plan whose routes are among the candidates
// (single-level aggregation, any split). Size: O(W · P · (options · k)) columns; with the job's
// workers grouped per ToR (GroupInterchangeablePairs) O(ToRs · P · (options · k)).
//
// Rounding: for every pair pick an option with probability proportional to its rate in the LP
// and a path in proportion to the path rates; every used (switch, PS) stream picks a path in
// proportion to y. Round 0 takes the largest value everywhere (deterministic rounding).
//
// Local search (ours, after the papers' rounding): repeatedly move one flow to another candidate
// (option, path), or one stream to another path, when the move lowers the load of a bottleneck
// resource without raising any resource to the bottleneck's utilisation; stops when no move
// helps or after a move budget. Deterministic. O(moves · W · options · k · L).
#pragma once

#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"
#include "scheduler/model/paths.h"

namespace inac::scheduler {

struct AggregationOption {
  int agg = -1;             // INA switch or the PS
  std::vector<Path> paths;  // worker -> agg
  // For an `extra_candidates` switch (off the worker's paths): its place in the detour order,
  // 0 first (TrimDetours drops the last). -1: the PS, an on-path switch, or a route of a plan
  // added by AddPlanToCandidates.
  int detour = -1;
};

struct PairCandidates {
  int worker = -1;
  int ps_index = -1;  // into JobCandidates::ps
  std::vector<AggregationOption> options;
};

struct JobCandidates {
  int job = -1;
  std::vector<int> ps;                                       // PS nodes
  std::vector<double> shares;                                // x_s, aligned with ps
  std::vector<PairCandidates> pairs;                         // pairs with worker != PS
  std::vector<std::pair<int, int>> local;                    // (worker, ps_index) with worker == PS
  std::map<std::pair<int, int>, std::vector<Path>> streams;  // (switch, PS node) -> paths
  // Interchangeable pairs merged in the LP (GroupInterchangeablePairs): each entry lists pair
  // indices (into `pairs`) modelled by one group of columns; empty: every pair alone.
  std::vector<std::vector<int>> groups;
  bool spread = false;  // built with BuildCandidates(..., spread = true)
};

// Candidates for `job` with the given PS nodes and shares. `spread` (PlanningOptions::
// spread_candidates): every path list is PathCache::GetDiverse's instead of Get's (Yen's), and
// equal detours are taken in a per-(ToR, PS) hashed order instead of by node id -- by node id and
// Yen's arc-id order every ToR of a large fat-tree picks the same few switches and core links.
JobCandidates BuildCandidates(const Network& network, PathCache& paths, int job,
                              const std::vector<int>& ps, const std::vector<double>& shares,
                              int extra_candidates, bool spread = false);
// Drops the detour options (AggregationOption::detour) from the last rank down, and the streams
// only they used, until the job's LP (CountLpColumns) has at most `max_columns` columns or no
// detour is left. Returns the number of detour ranks kept. Deterministic.
int TrimDetours(int64_t max_columns, JobCandidates* candidates);
// The LP columns of the job alone: λ, the shares, one column per path of every option of a pair
// -- of a group of pairs when JobCandidates::groups is set -- and per stream its paths (and its
// total when grouped).
int64_t CountLpColumns(const JobCandidates& candidates);
// Adds the routes of `plan` (flows aggregated at switches or PSs of the candidates, streams) as
// options/paths. Flows toward a PS that is not among the candidates' PSs are ignored.
void AddPlanToCandidates(const Network& network, const RoutedJob& plan, JobCandidates* candidates);

// Symmetry reduction of the LP (docs/routing.md section 7: k=32 / 1024 workers). The job's
// workers behind one ToR -- single-homed hosts on the same switch, not among the job's PSs, with a
// pair toward every PS -- are interchangeable for the LP: their candidates differ only in the first
// arc (each worker's own access link), and that arc carries λ whatever the routing (Σ_s x_s λ). So
// the LP needs one group of columns per (ToR, PS, option, path) instead of one per worker:
// BuildRoutingLp models group g of m workers by columns R = Σ_w r_w (demand Σ R = m·x_s λ, coupling
// Σ_p R <= m·Σ_q y, the access links as Σ R / m <= the smallest of the members' residuals, or
// against every member's row when a member also works for another job of a joint LP; each stream's
// total Σ_q y as one column of its own) and RoundChoice gives the members back their own (option,
// path) by apportioning them in proportion to R. Exact: the
// even split R / m of a grouped solution is a solution of the per-worker LP and the sum of a
// per-worker solution one of the grouped LP, so both have the same optimum (the LP bound does
// not change). Before grouping, the members' options are made equal: each member gets the union
// of the group's options (routes added by AddPlanToCandidates may differ per worker), in the
// order they first appear. Sets `candidates->groups` (every pair in exactly one group, in pair
// order of their first member; singleton groups for the other pairs). Deterministic; O(pairs ·
// options · k · L).
void GroupInterchangeablePairs(const Network& network, JobCandidates* candidates);

// One integral choice: per pair (option, path); per used (switch, PS node) the stream path.
struct Choice {
  std::vector<std::pair<int, int>> pair;
  std::map<std::pair<int, int>, int> stream;
};

// The routed job of a choice (shares from the candidates; PSs with share 0 are dropped).
RoutedJob ToRoutedJob(const Network& network, const JobCandidates& candidates,
                      const Choice& choice);

struct RoutingLp {
  lp::LinearProgram program;
  std::vector<int> lambda;        // column per job
  int t = -1;                     // common floor column with several jobs
  std::vector<double> load_cost;  // per column: arcs crossed (the tie-breaking objective)
  // One job: an upper bound on λ from the workers' egress (every unit a worker that is not a PS
  // sends leaves over its out arcs, so λ <= Σ of their residuals); kInfinity otherwise.
  double egress_bound = lp::kInfinity;
  struct JobColumns {
    // Per group of JobCandidates::groups (per pair when there are none), option, path: columns
    // of the group's total rate (the options and paths of its first member).
    std::vector<std::vector<std::vector<int>>> r;
    std::vector<std::vector<int>> members;  // per entry of r: its pairs (one without groups)
    std::map<std::pair<int, int>, std::vector<int>> y;  // (switch, PS node) -> path columns
    std::vector<int> z;                                 // per PS, free shares only
  };
  std::vector<JobColumns> jobs;
};

// Builds the LP over `residual` for the jobs' candidates. With `free_shares` the PS shares are
// variables (z_s); otherwise JobCandidates::shares are fixed.
//
// `max_fan_in` > 0 (grid-split) adds two families of cuts valid for every single-level plan in
// which no switch sums more than `max_fan_in` inputs per tag (the data plane's input bitmap),
// W_s being the number of workers of shard s that are not s itself:
//   Σ_{w,p} r_{w,s,a,p} <= max_fan_in · Σ_q y_{a,s,q}   per stream (a, s), when W_s > max_fan_in
//     (each range a aggregates has at most max_fan_in inputs);
//   Σ_{a,q} y_{a,s,q} + Σ_{w,p} r_{w,s,s,p} >= ceil(W_s / max_fan_in) · x_s λ   per shard, when
//     W_s > max_fan_in (every chunk reaches its PS as at least that many partial sums or raw
//     chunks).
// Neither binds with at most max_fan_in workers per shard.
RoutingLp BuildRoutingLp(const Network& network, const std::vector<double>& residual,
                         const std::vector<JobCandidates>& jobs, bool free_shares,
                         int max_fan_in = 0);

struct LpOutcome {
  lp::Solution solution;
  // Per job: λ of the solution's primal point (0 without one). Equal to the LP optimum only when
  // solution.status is kOptimal; after a time limit it is what the stopped solver reached, which
  // is NOT a bound -- use `bound`.
  std::vector<double> lambda;
  // A proven upper bound on the LP optimum of λ (one job only; nullopt for several jobs, whose
  // objective is the common floor t): the optimum when solved; after a time limit the smaller of
  // the dual (Lagrangian) bound of the solver's last duals and RoutingLp::egress_bound (a primal
  // simplex stopped early has far-from-feasible duals, whose bound alone can be astronomically
  // weak); nullopt when neither is finite.
  std::optional<double> bound;
  // How `bound` was obtained: "lp_optimum", "dual_bound" (the Lagrangian bound of the stopped
  // solver's duals), "egress_bound" (RoutingLp::egress_bound, when smaller), "none" (no bound),
  // "" for several jobs.
  std::string bound_source;
  std::vector<std::vector<double>> shares;  // per job, per PS: z_s / λ (free shares only)
};

// Solves with CLP within `time_limit_s`, in two steps: the largest λ (the bound), then, with λ
// held at its optimum, the least total network load (Σ rate × hops) -- among the LP optima the
// one without needless detours, whose rounding is closer to a good integral plan. Internal if CLP
// fails. A solve stopped by the time limit keeps its primal point for the rounding (when it has
// one) and reports only a dual bound (LpOutcome::bound). `warm`: lp::WarmStart of the first stage
// (for solves whose optimum value alone is used, such as standalone bounds). `simplex`: how the
// first stage runs cold (lp::Simplex).
absl::StatusOr<LpOutcome> SolveRoutingLp(const RoutingLp& lp,
                                         const std::vector<JobCandidates>& jobs, bool free_shares,
                                         double time_limit_s, const lp::WarmStart& warm = {},
                                         lp::Simplex simplex = lp::Simplex::kAutomatic);

// Randomised rounding of job `j` of the LP solution; `rng` nullptr = deterministic (argmax). A
// group of m pairs: without `rng` its members are dealt to options in proportion to the option
// rates by largest remainders, then within each option to paths the same way, so the members'
// choices keep the LP's aggregate up to one member per option and path; with `rng` each member
// draws its option, then its path, in proportion to the rates (as a pair alone does). For m = 1
// this is the per-pair rule.
Choice RoundChoice(const JobCandidates& candidates, const RoutingLp::JobColumns& columns,
                   const std::vector<double>& values, std::mt19937_64* rng);

// Improves `choice` for one job alone on `residual` (see the header comment).
void LocalSearch(const Network& network, const std::vector<double>& residual,
                 const JobCandidates& candidates, int max_moves, Choice* choice);

}  // namespace inac::scheduler
