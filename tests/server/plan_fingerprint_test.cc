// server::PlanFingerprint (server/plan_fingerprint.h): when the controller re-plans.
#include "server/plan_fingerprint.h"

#include <gtest/gtest.h>

#include "tests/fixtures/sample_jobs.h"

namespace inac::server {
namespace {

// Job `id` named "j<id>": a parameter-server job of `workers` with the PS `ps`.
core::Job JobOf(core::JobId id, std::vector<std::string> workers, std::string ps) {
  const fixtures::PsJobNumbers numbers{
      .gradient_bytes = 1000000, .compute_ms = 10, .iterations = 100, .batch_size = 16};
  return core::Job{.id = id,
                   .spec = fixtures::PsJobSpec("j" + std::to_string(id), std::move(workers),
                                               {std::move(ps)}, numbers)};
}

TEST(PlanFingerprintTest, FingerprintIsStableCanonicalAndSensitive) {
  scheduler::PlanRequest request;
  request.topology_version = 7;
  request.jobs = {JobOf(1, {"a", "b"}, "c"), JobOf(2, {"d"}, "e")};
  request.options.algorithm = "grid";
  const std::string fp = PlanFingerprint(request);
  // A fixed value: SHA-256 of the canonical encoding, the same on every build and machine (it is
  // stored with each plan and compared after a restart). Change it only with the format version
  // (v2: ring jobs planned as Rina, two-level ATP deployed; v3: spread candidates for large jobs,
  // grid-split closes streams, the spread_min_columns option; v4: grid-split's LPs with the
  // primal simplex; v5: grid-split tries fewer chunk ranges, the split_max_ranges option; v6:
  // trees is the default, grants split over tags by their traffic, chain children hold to the PS).
  EXPECT_EQ(fp, "c4bef34c128b14fd22179c572418f230023408205a7878fc772e7a32ae0bfb70");
  std::swap(request.jobs[0], request.jobs[1]);
  EXPECT_EQ(PlanFingerprint(request), fp) << "job order does not matter";
  request.options.rounds = 9;
  EXPECT_NE(PlanFingerprint(request), fp);
  request.options.rounds = scheduler::PlannerOptions{}.rounds;
  request.options.spread_min_columns = 0;
  EXPECT_NE(PlanFingerprint(request), fp);
  request.options.spread_min_columns = scheduler::PlannerOptions{}.spread_min_columns;
  request.options.split_max_ranges = 16;
  EXPECT_NE(PlanFingerprint(request), fp);
  request.options.split_max_ranges = scheduler::PlannerOptions{}.split_max_ranges;
  request.topology_version = 8;
  EXPECT_NE(PlanFingerprint(request), fp);
  request.topology_version = 7;
  request.jobs[0].spec.priority = 3;
  EXPECT_NE(PlanFingerprint(request), fp);
}

}  // namespace
}  // namespace inac::server
