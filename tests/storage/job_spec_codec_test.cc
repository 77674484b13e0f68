// The snapshot's fast job-spec decoder must agree with core::JobSpecFromJson on everything the
// encoder writes, and fall back (not guess) on anything else.
#include "storage/job_spec_codec.h"

#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/storage/test_util.h"

namespace inac::storage {
namespace {

core::JobSpec CoreDecode(const std::string& text) {
  std::vector<core::Problem> problems;
  auto json = core::ParseJsonText(text, &problems);
  EXPECT_TRUE(json.has_value());
  core::JobSpec spec = core::JobSpecFromJson(*json, "", &problems);
  EXPECT_TRUE(problems.empty()) << core::FormatProblems(problems);
  return spec;
}

TEST(JobSpecCodecTest, FastPathMatchesCoreDecoderOnEncoderOutput) {
  std::vector<core::JobSpec> specs;
  specs.push_back(testing::SampleSpec("ps", "tenant-a"));
  core::JobSpec ring = testing::SampleSpec("ring");
  ring.parameter_servers.clear();
  ring.allreduce = core::AllReduce::kRing;
  ring.batch_sizes.clear();
  ring.compute_ms = 40;  // integral: encoded as a JSON integer
  specs.push_back(ring);
  core::JobSpec odd = testing::SampleSpec("name with \"quotes\" and \\ and ünïcode");
  odd.priority = -5;
  odd.gradient_bytes = (int64_t{1} << 40);
  odd.compute_ms = 0.001;
  odd.workers = {};
  specs.push_back(odd);
  for (const core::JobSpec& spec : specs) {
    std::string text = core::JobSpecToJson(spec).dump();
    core::JobSpec fast;
    ASSERT_TRUE(FastDecodeJobSpec(text, &fast)) << text;
    EXPECT_EQ(fast, CoreDecode(text)) << text;
    EXPECT_EQ(fast, spec) << text;
    auto decoded = DecodeStoredJobSpec(text);
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, spec);
  }
}

TEST(JobSpecCodecTest, OtherShapesFallBackToTheCoreDecoder) {
  core::JobSpec with_model = testing::SampleSpec("m");
  with_model.model = "ResNet50";
  std::string text = core::JobSpecToJson(with_model).dump();
  core::JobSpec fast;
  EXPECT_FALSE(FastDecodeJobSpec(text, &fast));
  auto decoded = DecodeStoredJobSpec(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, CoreDecode(text));

  // Missing allreduce: the core decoder's default applies.
  core::Json json = core::JobSpecToJson(testing::SampleSpec("x"));
  json.erase("allreduce");
  EXPECT_FALSE(FastDecodeJobSpec(json.dump(), &fast));
  EXPECT_EQ(*DecodeStoredJobSpec(json.dump()), CoreDecode(json.dump()));

  for (const std::string bad :
       {R"({"name": 1})", R"([1, 2])", "not json", R"({"name":"a","extra":true})"}) {
    EXPECT_FALSE(FastDecodeJobSpec(bad, &fast)) << bad;
    EXPECT_EQ(DecodeStoredJobSpec(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

}  // namespace
}  // namespace inac::storage
