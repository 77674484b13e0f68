// InGo's batch-size choice (Bao, Zhao, Xu, Wang, Yang, IWQoS 2024), on INAC's reading of
// how batch size drives convergence. The paper's full text was not available: the convergence
// model is McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training", arXiv 1812.06162,
// section 2.2 and appendix A), the sharing model is the flow model's on/off sharing
// (scheduler/model/flow_model.h, OnOffFairRates). What is the paper's and what is INAC's:
// docs/batch-size.md.
//
// Units. `batch` is always the per-worker batch b (core::JobSpec::batch_size, as today); the
// global batch is B = n · b for a job of n workers.
//
// The model of one job j at per-worker batch b:
//   steps to the training target  S_j(b) = S_min · (1 + B_noise / (n b))
//   compute per iteration         t_j(b) = alpha + beta · b                       (ms)
//   communication per iteration   T_comm = G / λ_j   (G independent of b; λ_j from the routing)
//   completion                    C_j(b) = remaining_j · S_j(b) · (t_j(b) + T_comm)
// where λ_j is the job's rate when every job alternates computing t_j(b_j) and sending G at λ
// (OnOffFairRates over the routed coefficients of both directions, memory caps as private limits
// and, optionally, shared aggregator memory as a resource): a larger batch communicates a smaller
// fraction of the time, which frees links and memory for the other jobs. So C_j depends on every
// job's batch, and the choice is joint.
//
// Objective: the sum of the completions Σ_j C_j (equivalently the mean JCT of the jobs planned
// together); chosen, not the maximum, because the simulator and the papers report mean JCT.
//
// What is optimal and what is heuristic (the approximation argument):
//  - For fixed routing (coefficients), ChooseBatchSizes with a product of choice counts at most
//    BatchOptions::exhaustive_budget enumerates every combination: the result is the exact
//    optimum of the model over the allowed batch sizes ("exhaustive").
//  - Above the budget: coordinate descent ("coordinate_descent"). It starts from (a) every job at
//    its submitted batch, (b) the independent choice (each job's best batch with the others at
//    their submitted batch), (c) every job at its smallest and (d) at its largest batch, and from
//    each start repeatedly moves one job to the batch that minimises the *total* objective (the
//    other jobs re-evaluated on the shared links), until no single move improves by more than a
//    relative 1e-12; then, when a sweep costs at most BatchOptions::pair_budget evaluations, the
//    best move of two jobs at once, and single moves again. Provable: the objective never
//    increases along a descent, so the result is never worse than fixed batch sizes or than the
//    independent choice (both are starts); it stops after at most `max_passes` passes; when no
//    two jobs share a resource the objective is separable and the descent is exact. Not
//    provable: a constant-factor bound in general (the objective is neither separable nor convex
//    in the joint choice once jobs share a bottleneck). bench/ingo_bench.cc measures the gap to
//    the exhaustive optimum on small instances (goal: within 2 %).
//  - The routing is chosen first (GRID's LP and rounding maximise the smallest rate, which does
//    not depend on the batch sizes) and held fixed while batch sizes are chosen: the joint choice
//    is over batch sizes under that routing, not over (routing, batch) pairs.
//
// Pure and deterministic (no clock, no randomness). Cost: one OnOffFairRates per evaluated
// combination; exhaustive Π_j |choices_j| evaluations, coordinate descent at most
// 4 · (max_passes · Σ_j |choices_j| + max_pair_sweeps · pair_budget) evaluations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "scheduler/batch/noise_scale.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/model/network.h"

namespace inac::scheduler {

// McCandlish et al.'s steps-to-target model. S(B) = steps_min · (1 + noise_scale / B), B global.
struct ConvergenceModel {
  double steps_min = 0;    // S_min > 0: steps at infinite batch
  double noise_scale = 0;  // B_noise >= 0, in samples of the global batch
  double Steps(double global_batch) const;
};

// Per-iteration compute time of one worker at per-worker batch b: alpha_ms + beta_ms · b.
struct ComputeModel {
  double alpha_ms = 0;  // fixed overhead per iteration (>= 0)
  double beta_ms = 0;   // per sample (>= 0)
  double Ms(int per_worker_batch) const { return alpha_ms + beta_ms * per_worker_batch; }
};

// Share of compute_ms that does not scale with the batch when a spec gives no split (INAC's
// default; docs/batch-size.md).
inline constexpr double kDefaultFixedComputeFraction = 0.1;

// Default gradient noise scale (global batch, samples) of a built-in model (core/models.h), or
// nullopt for an unknown name. Sources and the reading of them: docs/batch-size.md.
std::optional<double> DefaultNoiseScale(std::string_view model);

// A job's batch-size model taken from its spec (what the planner and the simulator use):
//  - choices: spec.batch_sizes (sorted, unique) plus spec.batch_size; just {batch_size} when
//    batch_sizes is empty (today's behaviour: nothing to choose).
//  - compute: alpha = kDefaultFixedComputeFraction · compute_ms, beta = the rest / batch_size
//    (compute_ms is measured at batch_size).
//  - convergence: noise_scale from spec.noise_scale, else the model's default, else the
//    submitted global batch n · batch_size; steps_min from spec.steps_min, else from
//    target_epochs · dataset_size samples at the submitted batch (E(B) = E_min (1 + B/B_noise),
//    S_min = E_min / B_noise), else such that S(submitted) = spec.iterations (today's count).
// InvalidArgument when the spec has no workers, batch_size <= 0 or iterations <= 0 without
// steps_min/target_epochs.
struct JobBatchModel {
  int workers = 0;
  int submitted = 0;         // spec.batch_size
  std::vector<int> choices;  // ascending, contains `submitted`
  ConvergenceModel convergence;
  ComputeModel compute;
  double gradient_gbit = 0;  // G per iteration and worker stream, Gbit
};
absl::StatusOr<JobBatchModel> BatchModelFromSpec(const core::JobSpec& spec);

// One job of a batch problem: its model, the fraction of its target still to go and its usage
// per unit of rate (both directions, as the simulator's on/off traffic) with a private limit.
struct BatchJob {
  JobBatchModel model;
  double remaining = 1;  // in (0, 1]
  VirtualFlow flow;
};

struct BatchProblem {
  std::vector<double> capacity;  // per resource (Gbps, or aggregators for memory resources)
  std::vector<BatchJob> jobs;
};

// Builds a problem from routed jobs (RoutedJob::job indexes network.input().jobs, whose specs
// give the models). `remaining` per routed job (empty: all 1). With `shared_memory`, every
// aggregating INA switch with A_v > 0 becomes one more resource of capacity A_v aggregators,
// charged λ · stream share · hold / (8 · aggregator bytes) per job (hold: RoutedJob::hold_us of
// the switch, else the job's RTT): the dynamic, shared pools of ATP and ESA in mean-field form;
// routed jobs' aggregator grants (RoutedJob::aggregators) stay private caps either way.
// Errors: those of BatchModelFromSpec, InvalidArgument for a size mismatch.
struct BatchBuildOptions {
  bool shared_memory = false;
};
absl::StatusOr<BatchProblem> BuildBatchProblem(const Network& network,
                                               const std::vector<RoutedJob>& routed,
                                               const std::vector<double>& remaining,
                                               const BatchBuildOptions& options = {});

struct JobBatchOutcome {
  int batch = 0;               // per worker
  double rate_gbps = 0;        // λ while communicating
  double active_fraction = 0;  // communicating share of the iteration
  double compute_ms = 0;       // t(b)
  double comm_ms = 0;          // G / λ
  double iteration_ms = 0;
  double steps = 0;          // remaining · S(n b)
  double completion_ms = 0;  // steps · iteration_ms
};

struct BatchChoice {
  std::vector<JobBatchOutcome> jobs;  // problem order
  double objective_ms = 0;            // Σ completion_ms
  std::string method;  // "exhaustive", "coordinate_descent", "independent", "fixed", "given"
  int64_t evaluations = 0;
};

// Scores one combination (batches[j] per job; each must be one of the job's choices, else the
// job is scored at that batch anyway). Precondition: batches.size() == problem.jobs.size().
BatchChoice EvaluateBatches(const BatchProblem& problem, const std::vector<int>& batches);

struct BatchOptions {
  int64_t exhaustive_budget = 4096;  // combinations enumerated exactly
  int max_passes = 50;               // coordinate-descent passes per start
  // Pair moves (two jobs at once) when single moves are stuck, at most max_pair_sweeps per start,
  // when one sweep of them costs at most pair_budget evaluations
  // (Σ_{j<k} (|choices_j| - 1)(|choices_k| - 1)); 0: never.
  int64_t pair_budget = 2000;
  int max_pair_sweeps = 3;
  bool force_descent = false;  // skip the exhaustive search (bench, tests)
};

// The joint choice (see the header comment). Deterministic; ties keep the smaller batch.
BatchChoice ChooseBatchSizes(const BatchProblem& problem, const BatchOptions& options = {});
// Every combination, whatever the budget (for measuring the descent).
BatchChoice ExhaustiveBatchSizes(const BatchProblem& problem);
// Each job's best batch for its *own* completion with every other job at its submitted batch,
// all applied together (what jobs choosing alone would do).
BatchChoice IndependentBatchSizes(const BatchProblem& problem);
// Every job at its submitted batch.
BatchChoice FixedBatchSizes(const BatchProblem& problem);

// Hysteresis on a running set (the controller's re-choice): jobs whose last change is less than
// rule.min_interval_ms ago keep `current`; the others take `chosen`. The result is adopted only
// when its total predicted completion is below current's total · (1 - rule.hysteresis); otherwise
// every job keeps `current`. last_change_ms[j] < 0: never changed. Sizes must match the problem.
struct BatchUpdate {
  std::vector<int> batches;
  std::vector<bool> changed;
  double current_ms = 0;  // objective at `current`
  double next_ms = 0;     // objective at `batches`
};
BatchUpdate ApplyBatchHysteresis(const BatchProblem& problem, const std::vector<int>& current,
                                 const std::vector<int>& chosen,
                                 const std::vector<int64_t>& last_change_ms, int64_t now_ms,
                                 const BatchSwitchRule& rule);

}  // namespace inac::scheduler
