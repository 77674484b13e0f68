#include "server/plan_fingerprint.h"

#include <openssl/evp.h>

#include <algorithm>
#include <vector>

#include "core/json.h"

namespace inac::server {
namespace {

// Version of the fingerprint's encoding: bump it when the encoding or what the planner depends
// on changes, so that stored plans are re-planned once. v3: large jobs get spread candidates and
// grid-split closes streams: equal inputs now plan differently. v4: grid-split solves
// its LPs with the primal simplex (another optimal vertex of the degenerate LPs: other split
// plans for equal inputs).
// v6: the default algorithm is `trees`, grants are split over a job's tags by their traffic
// and sized with the ranges, chain children hold to the PS: equal inputs plan differently.
constexpr const char* kFingerprintFormat = "inac-plan-inputs-v6";

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

std::string PlanFingerprint(const scheduler::PlanRequest& request) {
  const scheduler::PlannerOptions& o = request.options;
  // core::Json keeps insertion order: the keys below are inserted in a fixed order and the jobs
  // sorted by id, so dump() is a canonical encoding.
  core::Json canonical = {{"format", kFingerprintFormat},
                          {"algorithm", o.algorithm},
                          {"memory_policy", o.memory_policy},
                          {"seed", o.seed},
                          {"rounds", o.rounds},
                          {"paths", o.paths},
                          {"spread_min_columns", o.spread_min_columns},
                          {"split_max_ranges", o.split_max_ranges},
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

}  // namespace inac::server
