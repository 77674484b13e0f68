// How a gradient of N int32 lanes maps onto a job's aggregation tags. Worker and PS both call
// ComputeLayout, so they agree on which lanes every (tag, chunk) carries (docs/agents.md,
// "Layout").
//
// Contract:
//  - The gradient is cut into C = ceil(N / 62) chunks of 62 lanes; only the very last chunk of the
//    gradient may be short (its missing lanes travel as zeros).
//  - PS shards: the PSs in the order they first appear in `tags`, each with the share of its tags
//    (all tags of a PS must carry the same share; shares are normalised by their sum). Shard p
//    gets the chunks [round(S_p * C), round(S_{p+1} * C)) where S_p is the sum of the normalised
//    shares before p, and the last shard ends at C: contiguous, whole chunks, the last PS takes
//    the rest.
//  - Within a shard of K chunks, a tag with range [begin, end) carries the shard's chunks
//    [round(begin * K), round(end * K)). The ranges of one PS must tile [0, 1) (sorted by begin,
//    no gap, no overlap, within 1e-6), otherwise FailedPrecondition: lanes would be left out.
//  - Chunk k of a tag is the 62 lanes from first_lane + 62 k (fewer for the last chunk of the
//    gradient); on the wire it is chunk number iteration * chunks + k.
// So every lane belongs to exactly one (tag, chunk). A tag may get 0 chunks (tiny gradients).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/job_config.h"

namespace inac::agent {

struct TagSpan {
  uint32_t tag = 0;
  size_t tag_index = 0;     // index into JobConfig::tags
  int64_t first_chunk = 0;  // gradient chunk index of the tag's chunk 0
  int64_t chunks = 0;
  int64_t first_lane = 0;
  int64_t lanes = 0;  // lanes of the gradient the tag covers (<= 62 * chunks)

  // Lanes [begin, end) of the gradient carried by the tag's chunk k (0 <= k < chunks).
  int64_t ChunkBegin(int64_t k) const { return first_lane + 62 * k; }
  int64_t ChunkEnd(int64_t k) const;
};

struct Layout {
  int64_t lanes = 0;          // N
  int64_t chunks = 0;         // C = ceil(N / 62)
  std::vector<TagSpan> tags;  // one per JobConfig::tags, same order
};

// InvalidArgument for lanes < 0; FailedPrecondition when the config has no tags or the ranges of a
// PS do not tile [0, 1) or its tags disagree on the share.
absl::StatusOr<Layout> ComputeLayout(const JobConfig& config, int64_t lanes);

// How a newer configuration of the same job continues a run (a re-plan while the agents run):
// for every tag of `from`, the index of the tag of `to` that carries the same lanes (same
// first_lane, chunks and lanes in the layouts) to the same PS from the same members (by worker
// id and address, in any order). Its value may differ: a re-plan that aggregates the job
// elsewhere changes the tags' generation (core::AggregationTag). FailedPrecondition, naming the
// first difference, when `to` cuts the gradient differently (other PSs, shares, ranges or
// members) or belongs to another job: a run cannot continue across such a change.
absl::StatusOr<std::vector<size_t>> MatchTags(const JobConfig& from, const Layout& from_layout,
                                              const JobConfig& to, const Layout& to_layout);

}  // namespace inac::agent
