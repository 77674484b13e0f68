// Decoding of the stored `jobs.spec` column on the snapshot's hot path. The column holds
// core::JobSpecToJson text; core::JobSpecFromJson (DOM + strict checks) costs ~20 us per job,
// which alone would put a 10,000-job snapshot over its 200 ms budget. This decoder reads exactly
// the shape JobSpecToJson writes with a SAX pass (no DOM); anything else -- an unknown or missing
// field, a model name, an out-of-range number -- falls back to core::JobSpecFromJson, so the result
// always equals what the core codec would return (tested in tests/storage/job_spec_codec_test.cc).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/job.h"

namespace inac::storage {

// DataLoss if the text is not a decodable job spec.
absl::StatusOr<core::JobSpec> DecodeStoredJobSpec(const std::string& text);

// The fast path alone, for tests: true and `spec` filled if the text has exactly the encoder's
// shape; false if it would fall back.
bool FastDecodeJobSpec(const std::string& text, core::JobSpec* spec);

}  // namespace inac::storage
