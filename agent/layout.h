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

// A PS with several threads splits its shard into blocks of this many consecutive gradient
// chunks, dealt round-robin to its threads (agent/ps.h PsOptions::threads); workers never put
// chunks of two blocks into one GSO send (agent/udp_socket.h), so the kernel can steer each send
// whole. 64: every kernel with UDP GSO takes at least 64 segments per send.
inline constexpr int64_t kSteeringBlock = 64;

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

// Which tag carries each gradient chunk: owners[g] = the index into `layout.tags` of the tag whose
// chunks include gradient chunk g (every chunk has exactly one; tags with 0 chunks own none).
std::vector<uint32_t> ChunkOwners(const Layout& layout);

// Whether a run continues from `from` to `to`, a newer configuration of the same job (a re-plan
// while the agents run). Both agents key their state by gradient chunk (iteration, g), so a
// re-plan may change the tag values, the aggregation, the grants and how each PS's shard is cut
// into chunk ranges (grid-split re-plans do), even in the middle of an iteration. What it may not
// change: the job, the number of chunks, and for every gradient chunk its PS (id and address) and
// the members who send it (worker ids and addresses): otherwise FailedPrecondition, naming the
// first difference (other PSs, shares or members: the agents must be restarted). Also refused: a
// tag value that both configurations carry with other lanes (a packet of the old configuration
// would be read as the new one's; the controller gives a re-cut job a new generation,
// core::AggregationTag).
absl::Status CheckContinuation(const JobConfig& from, const Layout& from_layout,
                               const JobConfig& to, const Layout& to_layout);

}  // namespace inac::agent
