// The built-in model table (docs/formats.md "Jobs"): fp32 gradient size and compute time per
// iteration on a V100, used to fill JobSpec::gradient_bytes / compute_ms from a model name and by
// the simulator's workload generator.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace inac::core {

struct ModelProfile {
  std::string_view name;
  int64_t gradient_bytes;
  double compute_ms;
};

// All built-in models, in table order.
std::span<const ModelProfile> BuiltinModels();
// nullptr for an unknown name. Names are matched exactly ("ResNet50", "BERT-large", ...), and
// case-insensitively as a fallback.
const ModelProfile* FindModel(std::string_view name);

}  // namespace inac::core
