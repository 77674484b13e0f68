#include "storage/job_spec_codec.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/json.h"

namespace inac::storage {

namespace {

// SAX handler for the flat object JobSpecToJson emits. Any deviation sets `ok = false` and stops
// the parse (returning false from a callback aborts nlohmann's parser).
class SpecSax {
 public:
  explicit SpecSax(core::JobSpec* spec) : spec_(spec) {}
  bool ok() const { return ok_ && depth_ == 0 && (seen_ & kRequired) == kRequired; }

  bool null() { return Fail(); }
  bool boolean(bool) { return Fail(); }
  bool number_integer(int64_t v) { return Integer(v); }
  bool number_unsigned(uint64_t v) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Fail();
    return Integer(static_cast<int64_t>(v));
  }
  bool number_float(double v, const std::string&) {
    if (field_ != kComputeMs || in_array_ || !std::isfinite(v)) return Fail();
    spec_->compute_ms = v;
    return Done();
  }
  bool string(std::string& v) {
    if (in_array_) {
      if (field_ == kWorkers) {
        spec_->workers.push_back(std::move(v));
      } else if (field_ == kParameterServers) {
        spec_->parameter_servers.push_back(std::move(v));
      } else {
        return Fail();
      }
      return true;
    }
    switch (field_) {
      case kName:
        spec_->name = std::move(v);
        return Done();
      case kTenant:
        spec_->tenant = std::move(v);
        return Done();
      case kAllReduce:
        if (v == "ps") {
          spec_->allreduce = core::AllReduce::kPs;
        } else if (v == "ring") {
          spec_->allreduce = core::AllReduce::kRing;
        } else {
          return Fail();
        }
        return Done();
      default:
        return Fail();
    }
  }
  bool binary(std::vector<std::uint8_t>&) { return Fail(); }
  bool start_object(std::size_t) {
    if (depth_ != 0) return Fail();
    ++depth_;
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool key(std::string& k) {
    field_ = FieldOf(k);
    if (field_ == kUnknown || (seen_ & Bit(field_))) return Fail();
    return true;
  }
  bool start_array(std::size_t) {
    if (in_array_ || (field_ != kWorkers && field_ != kParameterServers && field_ != kBatchSizes)) {
      return Fail();
    }
    in_array_ = true;
    return true;
  }
  bool end_array() {
    in_array_ = false;
    return Done();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return Fail();
  }

 private:
  enum Field {
    kName,
    kTenant,
    kPriority,
    kWorkers,
    kParameterServers,
    kAllReduce,
    kGradientBytes,
    kComputeMs,
    kIterations,
    kBatchSize,
    kBatchSizes,
    kUnknown
  };
  static constexpr unsigned Bit(Field f) { return 1u << f; }
  // Every field JobSpecToJson always writes (batch_sizes is optional; "model" is not handled).
  static constexpr unsigned kRequired = (1u << kBatchSizes) - 1;

  static Field FieldOf(const std::string& k) {
    static const char* const kNames[] = {
        "name",       "tenant",         "priority",   "workers",    "parameter_servers",
        "allreduce",  "gradient_bytes", "compute_ms", "iterations", "batch_size",
        "batch_sizes"};
    for (int i = 0; i < kUnknown; ++i) {
      if (k == kNames[i]) return static_cast<Field>(i);
    }
    return kUnknown;
  }

  bool Integer(int64_t v) {
    auto fits_int = [](int64_t x) {
      return x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max();
    };
    if (in_array_) {
      if (field_ != kBatchSizes || !fits_int(v)) return Fail();
      spec_->batch_sizes.push_back(static_cast<int>(v));
      return true;
    }
    switch (field_) {
      case kPriority:
        if (!fits_int(v)) return Fail();
        spec_->priority = static_cast<int>(v);
        return Done();
      case kGradientBytes:
        spec_->gradient_bytes = v;
        return Done();
      case kComputeMs:
        spec_->compute_ms = static_cast<double>(v);
        return Done();
      case kIterations:
        spec_->iterations = v;
        return Done();
      case kBatchSize:
        if (!fits_int(v)) return Fail();
        spec_->batch_size = static_cast<int>(v);
        return Done();
      default:
        return Fail();
    }
  }
  bool Done() {
    seen_ |= Bit(field_);
    return true;
  }
  bool Fail() {
    ok_ = false;
    return false;
  }

  core::JobSpec* spec_;
  Field field_ = kUnknown;
  unsigned seen_ = 0;
  int depth_ = 0;
  bool in_array_ = false;
  bool ok_ = true;
};

}  // namespace

bool FastDecodeJobSpec(const std::string& text, core::JobSpec* spec) {
  *spec = core::JobSpec();
  SpecSax sax(spec);
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(text, &sax);
  } catch (const std::exception&) {
    return false;
  }
  return parsed && sax.ok();
}

absl::StatusOr<core::JobSpec> DecodeStoredJobSpec(const std::string& text) {
  core::JobSpec spec;
  if (FastDecodeJobSpec(text, &spec)) return spec;
  std::vector<core::Problem> problems;
  std::optional<core::Json> json = core::ParseJsonText(text, &problems);
  if (json) spec = core::JobSpecFromJson(*json, "", &problems);
  if (!problems.empty()) {
    return absl::DataLossError(
        absl::StrCat("stored job spec does not decode: ", core::FormatProblems(problems)));
  }
  return spec;
}

}  // namespace inac::storage
