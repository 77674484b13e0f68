// The flow-level model that scores every routing algorithm and baseline: docs/routing.md section 1.
//
// A routed job (index form of core::JobPlan) costs, per unit of its rate λ (the per-worker sending
// rate, Gbps):
//   - arc e: Σ_s x_s · (Σ fractions of the flows toward s crossing e + Σ stream fractions of the
//     aggregators' streams toward s crossing e). A stream leaving an aggregator counts once
//     whatever its fan-in; with chunk-range splits (FlowPlan::fraction, aligned ranges: a
//     (worker, PS)'s flows cover [0, 1) in order) its size is the measure of the union of the
//     ranges aggregated there (one tag per range), with the ranges of re-aggregated streams.
//   - switch v (processing C_v): Σ_s x_s · Σ fractions of the flows aggregated at v.
//   - PS s (ingress B_s): x_s · (fractions of its unaggregated flows + its incoming streams).
//     A worker that is its own PS sends nothing over the network.
//   - two-level aggregation (ATP's re-aggregation at the PS's ToR): a stream whose `via` is a
//     switch u is aggregated again at u instead of reaching the PS: it charges its arcs (sw -> u)
//     and u's processing (one input, x_s · its size), not the PS; u's own stream is at least as
//     large as each stream it re-aggregates, and continues toward the PS (or a further via).
//   - memory, per aggregation tag as the data plane holds it: the job's tags on switch v are
//     those core::JobTagsOf finds there (DeriveSwitchIntents' own rule: the chunk ranges of flows
//     aggregated at v and of streams re-aggregated at v, cut at every worker's cut points per
//     PS), and its grant a_{j,v} of aggregators of B bytes is split over them by core::SplitGrant
//     (in proportion to their weights w_t = x_s · range length), as the switch's windows are; so
//     λ ≤ min over those tags of a_t · B · 8 / (hold_{j,v} · 1e3) / w_t, with a_t the tag's
//     window. hold_{j,v} is RoutedJob::hold_us[v] when set -- the planner
//     sets it from the memory model (HoldTimeUs in scheduler/memory/aggregator_model.h, the
//     same hold the grant was sized with) -- and otherwise RTT_j = 2 × the largest sum of link
//     latencies along a route worker -> aggregation node -> PS
//     (PlanningOptions::default_link_latency_us where unset).
//     A job whose JobPlan::aggregators is empty is uncapped (plans that do not allocate memory);
//     otherwise a switch without an entry (or holding none of the job's tags) is uncapped and an
//     entry of 0 caps the job at rate 0.
// The result goes back down a multicast tree per PS: the union of the reversed arcs of the job's
// routes toward that PS, each arc carrying the PS's share once (rate μ_j).
//
// Rates: the gradient push (up, λ_j) and the result broadcast (down, μ_j) are two pipelined
// phases, each scored the same way on the residual capacities (capacity − background): max-min
// fair progressive filling over the jobs -- raise every unfrozen rate together, freeze the jobs on
// the first saturated resource (or private memory cap), repeat. The phases are filled separately
// (a link direction carrying one job's push and another's broadcast is counted in each phase, not
// summed), so λ is the papers' minimum sending rate. One job alone gets
// λ = min_r residual_r / u_r. T_up = G/λ, T_down = G/μ, T_comm = max(T_up, T_down),
// T_iter = t(b) + T_comm with t linear in the batch size, JCT = wait + iterations · T_iter.
//
// Deterministic; O(J · F · L) to build the coefficients and O(J · (J + R)) for the filling.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/plan.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// One worker's stream (or a fraction of it) toward one PS, aggregated at `agg` (an INA switch or
// the PS itself), over `arcs` from the worker to `agg`.
struct RoutedFlow {
  int worker = -1;
  int ps = -1;
  int agg = -1;
  double fraction = 1;
  std::vector<int> arcs;
};

// The aggregated stream of switch `sw` toward `ps` over `arcs`: to the PS, or, when `via` >= 0,
// to the INA switch `via`, which re-aggregates it with its own inputs for the same PS (two-level
// aggregation; `via` must have a stream toward `ps` of its own, and chains must end at the PS).
// In core::AggregatorPlan a re-aggregated stream is a path that ends at `via` instead of the PS.
struct RoutedStream {
  int sw = -1;
  int ps = -1;
  std::vector<int> arcs;
  int via = -1;
};

// Index form of a core::JobPlan on a Network.
struct RoutedJob {
  int job = -1;                                // index into PlanningInput::jobs
  std::vector<std::pair<int, double>> shares;  // (PS node, x_s), sum 1
  std::vector<RoutedFlow> flows;
  std::vector<RoutedStream> streams;
  std::map<int, int64_t> aggregators;  // switch node -> aggregators; empty: uncapped
  std::map<int, double> hold_us;       // switch node -> aggregator hold time; unset: RTT_j
  int batch_size = 0;
};

// Per-unit-rate coefficients of one routed job (see the header comment).
struct JobUsage {
  std::vector<std::pair<int, double>> up;    // (resource, coefficient), resource-sorted, unique
  std::vector<std::pair<int, double>> down;  // arcs of the multicast trees
  double memory_limit_gbps = kUnbounded;     // min over capped switches of cap / coefficient
  int memory_switch = -1;                    // the switch giving memory_limit_gbps
  double rtt_us = 0;
};

// Builds the coefficients. Precondition: `job` refers to nodes/arcs of `network`.
JobUsage ComputeUsage(const Network& network, const RoutedJob& job);

// A virtual flow for MaxMinFairRates: coefficients on shared resources and a private rate limit.
struct VirtualFlow {
  std::vector<std::pair<int, double>> coefficients;
  double limit = kUnbounded;
};

struct FairShare {
  std::vector<double> rates;    // per flow; kUnbounded when nothing limits it
  std::vector<int> bottleneck;  // resource that froze the flow; -1 for its private limit/none
};

// Max-min fair progressive filling of `flows` over `capacity` (resource-indexed, >= 0).
FairShare MaxMinFairRates(const std::vector<double>& capacity,
                          const std::vector<VirtualFlow>& flows);

// A job that alternates computing and communicating (on/off traffic) for OnOffFairRates. `flow`
// holds the coefficients of both directions (per unit of the job's rate λ, Gbps per worker
// stream) and its private limit; each iteration it computes `compute_s` seconds, then sends
// `gradient_gbit` per stream at λ.
struct OnOffJob {
  VirtualFlow flow;
  double gradient_gbit = 0;  // > 0
  double compute_s = 0;      // >= 0
};

struct OnOffShare {
  std::vector<double> rates;            // λ_j while communicating; kUnbounded if nothing limits
  std::vector<double> active_fraction;  // f_j = (G/λ) / (compute + G/λ), in [0, 1]
  std::vector<int> bottleneck;          // resource that froze the job; -1: its own line rate/limit
};

// Flow-level sharing of on/off jobs (mean-field processor sharing; Bonald & Massoulié, "Impact of
// fairness on Internet performance", SIGMETRICS 2001: on a link of capacity C whose other
// traffic has mean load ρC, a flow is served at about C(1 − ρ)). A job's average rate is
// x_j(λ) = G / (compute + G/λ). Progressive filling in λ: all unfrozen jobs rise together; a
// resource saturates when its mean load Σ_j coeff_rj · x_j(λ_j) reaches its capacity, and the
// jobs crossing it freeze; a job also freezes at its burst cap min(limit, min_r C_r / coeff_rj)
// (alone on its links it cannot send faster). With compute_s = 0 for every job this is exactly
// MaxMinFairRates. Mean loads never exceed capacities (up to 1e-9 relative).
// Deterministic; O(stages · B · nnz) with B ≤ 64 bisection steps per stage that saturates a
// resource, one pass per stage otherwise. Precondition: capacities >= 0, gradient_gbit > 0.
OnOffShare OnOffFairRates(const std::vector<double>& capacity, const std::vector<OnOffJob>& jobs);

// λ of one job alone on `residual`: min(memory limit, min_r residual_r / up_r).
double SingleJobRate(const JobUsage& usage, const std::vector<double>& residual);

struct JobEvaluation {
  core::JobId job_id = 0;
  double rate_gbps = 0;  // λ: minimum per-worker sending rate (up)
  double down_gbps = 0;  // μ: result multicast rate
  double comm_ms = 0;
  double iteration_ms = 0;
  double jct_ms = 0;  // wait 0 + iterations × iteration_ms
  double rtt_us = 0;
  std::string bottleneck;  // resource that limits λ ("memory s1" for the memory cap)
};

struct Evaluation {
  std::vector<JobEvaluation> jobs;     // same order as the evaluated jobs
  std::vector<double> load_gbps;       // per resource: the planned jobs' push (up) load
  std::vector<double> down_load_gbps;  // per resource: their broadcast (down) load
};

// Scores routed jobs on `network`. Not owned: `network` must outlive the evaluator.
class FlowEvaluator {
 public:
  explicit FlowEvaluator(const Network& network) : network_(&network) {}

  Evaluation Evaluate(const std::vector<RoutedJob>& jobs) const;
  // Residual capacity after the evaluated push load of `jobs` (for planning later jobs around
  // them).
  std::vector<double> ResidualAfter(const std::vector<RoutedJob>& jobs) const;
  // Resources whose up or down load exceeds their residual capacity by more than a relative 1e-6,
  // as "arc a->b: up 3.2 > 3" strings. Empty when the evaluation respects every capacity.
  std::vector<std::string> CapacityViolations(const Evaluation& evaluation) const;

  // core::JobPlan <-> RoutedJob. FromJobPlan: InvalidArgument naming the first problem (unknown
  // job id or node, a path that does not follow up links or does not start/end where it should,
  // an aggregating switch without an aggregator path, shares not summing to 1, a chain of
  // re-aggregating switches that does not reach the PS). An aggregator path that ends at an INA
  // switch with an aggregator path of its own toward the same PS is a re-aggregated stream (via).
  absl::StatusOr<RoutedJob> FromJobPlan(const core::JobPlan& plan) const;
  core::JobPlan ToJobPlan(const RoutedJob& job) const;

  const Network& network() const { return *network_; }

 private:
  const Network* network_;
};

// Convenience for callers holding core types (simulator, controller): builds the network of
// `input`, evaluates every JobPlan of `plan` (job ids must be in input.jobs) and returns the
// evaluation in plan order. Errors as Network::Create and FlowEvaluator::FromJobPlan.
absl::StatusOr<Evaluation> EvaluatePlan(const PlanningInput& input, const core::Plan& plan);

// As above, with the memory cap's hold time of every (job, aggregating switch) from `hold_us`
// (microseconds; the planner passes scheduler::GrantHoldUs, the hold the grant was sized with).
using HoldTimeFunction =
    std::function<double(const core::JobPlan& job, const std::string& switch_id)>;
absl::StatusOr<Evaluation> EvaluatePlan(const PlanningInput& input, const core::Plan& plan,
                                        const HoldTimeFunction& hold_us);

// Re-scores every parameter-server JobPlan of `plan` (ring jobs are left alone) with the memory
// caps of its grants, hold times from `hold_us` (nullptr: RTT_j), writes rate_gbps, comm_ms and
// iteration_ms into those JobPlans and returns their evaluations in plan order. A plan the flow
// model refuses (FromJobPlan) is a defect of whoever built it, and a plan must never be published
// with rates that were not scored: Internal, naming the job and the evaluator's message (the plan
// is then left unchanged). Errors of Network::Create are Internal too.
absl::StatusOr<std::vector<JobEvaluation>> RescorePlan(const PlanningInput& input,
                                                       const HoldTimeFunction& hold_us,
                                                       core::Plan* plan);

// Writes rate_gbps, comm_ms and iteration_ms of `evaluation` into the JobPlans of `plan` (same
// order).
void ApplyEvaluation(const Evaluation& evaluation, core::Plan* plan);

// Job completion time: wait + iterations × iteration time.
double JobCompletionMs(double wait_ms, int64_t iterations, double iteration_ms);

}  // namespace inac::scheduler
