// The one planner: what the controller runs on every re-plan and what `inac plan` prints, from the
// same inputs and the same defaults, so that "what the controller would do" is true.
//
// Contract:
//  - ComputePlan is pure and deterministic for a request: routing of the parameter-server jobs
//    (scheduler::PlanRouting with options.algorithm, seed, rounds, paths and time limits, and
//    single-level aggregation -- PlanningOptions::reaggregation false -- as the data plane), then
//    aggregator memory (scheduler::AssignAggregators with options.memory_policy, each job's
//    memory state taken at now_ms), then re-scoring with the memory caps (EvaluatePlan), then
//    ring all-reduce jobs (ring in worker order, no switch state: Rina is a later issue), batch
//    sizes, jobs sorted by id, aggregation generations carried from `previous`
//    (core::CarryAggregationGenerations) and the switch intents (core::DeriveSwitchIntents).
//    Plan::version and Plan::solve_ms are left 0 and Plan::fingerprint empty: the caller numbers
//    plans, owns the clock, and fingerprints what it watches (the controller: every active job,
//    also those it cannot place now).
//  - Errors: InvalidArgument for an unknown algorithm or memory policy and for jobs the
//    algorithms refuse; the routing and memory planners' errors otherwise.
//  - PlanFingerprint is a stable digest of what a plan depends on: format version, options, the
//    topology version and every job's id and spec, as SHA-256 (OpenSSL) of a canonical encoding,
//    in hex. Equal inputs give equal fingerprints across builds and machines; the controller
//    re-plans when it changes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"
#include "scheduler/model/flow_model.h"
#include "scheduler/routing/routing_algorithm.h"

namespace inac::scheduler {

// The planner's options, with the defaults of both the controller (`inac serve`, config file
// "controller") and `inac plan`.
struct PlannerOptions {
  std::string algorithm = "grid";     // a RoutingAlgorithmNames() entry
  std::string memory_policy = "esa";  // esa | atp | switchml | no_ina
  uint64_t seed = 1;
  int rounds = 8;  // randomised rounding repetitions (GRID/InArt)
  int paths = 4;   // candidate paths per (source, destination)
  double lp_time_limit_s = 60;
  double mip_time_limit_s = 30;
};

struct PlanRequest {
  const core::Topology* topology = nullptr;  // not owned; required
  int64_t topology_version = 0;              // only for the fingerprint
  std::vector<core::Job> jobs;               // ids unique; their state and progress matter
  const core::Plan* previous = nullptr;      // not owned; nullable
  int64_t now_ms = 0;                        // the caller's clock, for memory priorities (age)
  PlannerOptions options;
};

// What a job's routing said about it (parameter-server jobs only).
struct JobReport {
  JobEvaluation evaluation;    // after the memory caps
  JobDiagnostics diagnostics;  // how the routing planned it
};

struct PlannerOutput {
  core::Plan plan;
  std::vector<core::SwitchIntent> intents;  // DeriveSwitchIntents(topology, plan), version 0
  std::map<core::JobId, JobReport> reports;
};

absl::StatusOr<PlannerOutput> ComputePlan(const PlanRequest& request);

std::string PlanFingerprint(const PlanRequest& request);

}  // namespace inac::scheduler
