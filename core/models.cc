#include "core/models.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace inac::core {

namespace {
constexpr int64_t kMiB = 1024 * 1024;
// The table of docs/formats.md ("Jobs"): fp32 gradient sizes and V100 compute time per iteration.
// Fractional MiB sizes are rounded down to whole bytes.
constexpr std::array<ModelProfile, 8> kModels = {{
    {"AlexNet", 233 * kMiB, 255},
    {"ResNet50", 97 * kMiB + kMiB / 2, 323},
    {"ResNet101", 170 * kMiB, 295},
    {"ResNet152", 230 * kMiB, 421},
    {"VGG16", 528 * kMiB, 425},
    {"VGG19", 548 * kMiB, 520},
    {"BERT-large", 1279 * kMiB, 229},
    {"GoogLeNet", 25 * kMiB, 251},
}};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

std::span<const ModelProfile> BuiltinModels() { return kModels; }

const ModelProfile* FindModel(std::string_view name) {
  for (const ModelProfile& m : kModels) {
    if (m.name == name) return &m;
  }
  for (const ModelProfile& m : kModels) {
    if (EqualsIgnoreCase(m.name, name)) return &m;
  }
  return nullptr;
}

}  // namespace inac::core
