#include "scheduler/planner.h"

#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/memory/memory_planner.h"

namespace inac::scheduler {
namespace {

// Version of the fingerprint's encoding: bump it when the encoding or what the planner depends
// on changes, so that stored plans are re-planned once.
constexpr const char* kFingerprintFormat = "inac-plan-inputs-v1";

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

}  // namespace

std::string PlanFingerprint(const PlanRequest& request) {
  const PlannerOptions& o = request.options;
  // nlohmann::json objects keep their keys sorted, so dump() is a canonical encoding.
  core::Json canonical = {{"format", kFingerprintFormat},
                          {"algorithm", o.algorithm},
                          {"memory_policy", o.memory_policy},
                          {"seed", o.seed},
                          {"rounds", o.rounds},
                          {"paths", o.paths},
                          {"lp_time_limit_s", o.lp_time_limit_s},
                          {"mip_time_limit_s", o.mip_time_limit_s},
                          {"topology_version", request.topology_version}};
  core::Json jobs = core::Json::array();
  std::vector<const core::Job*> sorted;
  for (const core::Job& job : request.jobs) sorted.push_back(&job);
  std::sort(sorted.begin(), sorted.end(),
            [](const core::Job* a, const core::Job* b) { return a->id < b->id; });
  for (const core::Job* job : sorted) {
    jobs.push_back({{"id", job->id}, {"spec", core::JobSpecToJson(job->spec)}});
  }
  canonical["jobs"] = std::move(jobs);
  return Sha256Hex(canonical.dump());
}

absl::StatusOr<PlannerOutput> ComputePlan(const PlanRequest& request) {
  if (request.topology == nullptr) return absl::InvalidArgumentError("planner: no topology");
  const PlannerOptions& o = request.options;
  std::optional<MemoryPolicy> policy = ParseMemoryPolicy(o.memory_policy);
  if (!policy) {
    return absl::InvalidArgumentError(absl::StrCat("unknown memory policy \"", o.memory_policy,
                                                   "\" (esa, atp, switchml, no_ina)"));
  }
  PlanningInput input;
  input.topology = *request.topology;
  input.seed = o.seed;
  input.options.rounds = o.rounds;
  input.options.paths = o.paths;
  input.options.lp_time_limit_s = o.lp_time_limit_s;
  input.options.mip_time_limit_s = o.mip_time_limit_s;
  // The data plane's intents aggregate at one level (core::DeriveSwitchIntents): no ATP
  // re-aggregation in a plan that is deployed.
  input.options.reaggregation = false;
  std::vector<const core::Job*> rings;
  for (const core::Job& job : request.jobs) {
    if (job.spec.allreduce == core::AllReduce::kRing) {
      rings.push_back(&job);
    } else {
      input.jobs.push_back(JobInput{job.id, job.spec});
    }
  }
  PlannerOutput out;
  core::Plan& plan = out.plan;
  if (!input.jobs.empty()) {
    auto routed = PlanRouting(o.algorithm, input);
    if (!routed.ok()) return routed.status();
    plan = std::move(routed->plan);
    for (size_t j = 0; j < input.jobs.size() && j < routed->diagnostics.size(); ++j) {
      out.reports[input.jobs[j].id].diagnostics = routed->diagnostics[j];
    }
    core::Graph graph(input.topology);
    std::vector<MemoryJobState> states;
    for (const core::Job& job : request.jobs) {
      states.push_back(MemoryJobStateFromJob(job, request.now_ms));
    }
    MemoryPlannerOptions mem;
    mem.policy = *policy;
    if (absl::Status s = AssignAggregators(graph, states, request.previous, mem, &plan); !s.ok()) {
      return s;
    }
    // Re-score with the memory caps the allocation implies, with the hold time the grants were
    // sized with (one hold-time model: GrantHoldUs), not the route's round trip.
    auto evaluation =
        EvaluatePlan(input, plan, [&](const core::JobPlan& jp, const std::string& sw) {
          return GrantHoldUs(graph, jp, sw, mem);
        });
    if (evaluation.ok()) {
      ApplyEvaluation(*evaluation, &plan);
      for (const JobEvaluation& e : evaluation->jobs) out.reports[e.job_id].evaluation = e;
    }
  }
  plan.algorithm = o.algorithm;
  // The memory layout of the data plane follows the policy (shared pools for esa/atp).
  plan.memory_policy = o.memory_policy;
  for (const core::Job* job : rings) {
    core::JobPlan jp;
    jp.job_id = job->id;
    jp.ring = job->spec.workers;
    jp.batch_size = job->spec.batch_size;
    jp.priority = job->spec.priority;
    plan.jobs.push_back(std::move(jp));
  }
  for (core::JobPlan& jp : plan.jobs) {
    if (jp.batch_size != 0) continue;
    for (const core::Job& job : request.jobs) {
      if (job.id == jp.job_id) jp.batch_size = job.spec.batch_size;
    }
  }
  std::sort(plan.jobs.begin(), plan.jobs.end(),
            [](const core::JobPlan& a, const core::JobPlan& b) { return a.job_id < b.job_id; });
  // A job aggregated differently than in the previous plan gets new tags (core/plan.h).
  core::CarryAggregationGenerations(request.previous, &plan);
  out.intents = core::DeriveSwitchIntents(*request.topology, plan);
  return out;
}

}  // namespace inac::scheduler
