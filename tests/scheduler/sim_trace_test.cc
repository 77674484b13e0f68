#include "scheduler/sim/trace.h"

#include <gtest/gtest.h>

#include "core/models.h"

namespace inac::scheduler {
namespace {

TEST(TraceCodecTest, ParsesCsvWithModelDefaultsAndExplicitHosts) {
  const std::string csv =
      "# a comment\n"
      "name,arrival_s,model,workers,iterations,priority\n"
      "a,0,ResNet50,4,1000,0\n"
      "\n"
      "b,2.5,vgg16,2,10,3\r\n";
  std::vector<core::Problem> problems;
  auto jobs = ParseTrace(csv, &problems);
  ASSERT_TRUE(jobs.has_value()) << core::FormatProblems(problems);
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].model, "ResNet50");
  EXPECT_EQ((*jobs)[0].gradient_bytes, core::FindModel("ResNet50")->gradient_bytes);
  EXPECT_DOUBLE_EQ((*jobs)[0].compute_ms, 323);
  EXPECT_EQ((*jobs)[1].model, "VGG16");  // canonical name
  EXPECT_DOUBLE_EQ((*jobs)[1].arrival_s, 2.5);
  EXPECT_EQ((*jobs)[1].priority, 3);
}

TEST(TraceCodecTest, ParsesJsonObjectAndArray) {
  const std::string json = R"({"jobs": [
      {"name": "x", "arrival_s": 1, "gradient_bytes": 1000, "compute_ms": 5,
       "hosts": ["h1", "h2"], "parameter_servers": ["h3"], "iterations": 7}]})";
  std::vector<core::Problem> problems;
  auto jobs = ParseTrace(json, &problems);
  ASSERT_TRUE(jobs.has_value()) << core::FormatProblems(problems);
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].workers, 2);
  EXPECT_EQ((*jobs)[0].parameter_servers, std::vector<std::string>{"h3"});
  auto bare = ParseTrace(R"([{"model": "GoogLeNet", "workers": 2, "iterations": 1}])", &problems);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ((*bare)[0].name, "job-0001");
}

TEST(TraceCodecTest, ReportsEveryProblemWithItsPath) {
  const std::string csv =
      "name,arrival_s,model,workers,iterations,colour\n"
      "a,-1,NoSuchNet,0,0,red\n"
      "b,zero,ResNet50,2,5,blue\n"
      "c,1,ResNet50\n";
  std::vector<core::Problem> problems;
  EXPECT_FALSE(ParseTrace(csv, &problems).has_value());
  const std::string all = core::FormatProblems(problems);
  EXPECT_NE(all.find("unknown column \"colour\""), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].model"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].arrival_s"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].workers"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].iterations"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[1].arrival_s: line 3: not a number"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[2]: line 4: 3 cells"), std::string::npos) << all;
}

TEST(TraceCodecTest, JsonProblems) {
  std::vector<core::Problem> problems;
  EXPECT_FALSE(ParseTrace("{\"jobs\": [", &problems).has_value());
  problems.clear();
  EXPECT_FALSE(ParseTrace(R"({"jobs": [{"workers": "two", "iterations": 1, "gradient_bytes": 5,
                   "compute_ms": 1, "speed": 3}], "extra": 1})",
                          &problems)
                   .has_value());
  const std::string all = core::FormatProblems(problems);
  EXPECT_NE(all.find("extra: unknown field"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].workers: must be an integer"), std::string::npos) << all;
  EXPECT_NE(all.find("jobs[0].speed: unknown field"), std::string::npos) << all;
}

TEST(TraceCodecTest, CsvRoundTrip) {
  std::vector<TraceJob> jobs = {{.name = "one",
                                 .arrival_s = 0.125,
                                 .model = "AlexNet",
                                 .gradient_bytes = 5,
                                 .compute_ms = 2.5,
                                 .workers = 3,
                                 .iterations = 9,
                                 .priority = 1},
                                {.name = "two",
                                 .arrival_s = 1.0 / 3,
                                 .gradient_bytes = 77,
                                 .compute_ms = 0,
                                 .workers = 2,
                                 .hosts = {"h1", "h2"},
                                 .parameter_servers = {"h9"},
                                 .iterations = 1}};
  std::vector<core::Problem> problems;
  auto back = ParseTrace(TraceToCsv(jobs), &problems);
  ASSERT_TRUE(back.has_value()) << core::FormatProblems(problems);
  EXPECT_EQ(*back, jobs);
}

TEST(TraceGeneratorTest, ArrivalProcessSyntax) {
  EXPECT_EQ(ParseArrivalProcess("all-at-zero")->kind, ArrivalProcess::Kind::kAllAtZero);
  auto p = ParseArrivalProcess("poisson:2.5");
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->rate_per_s, 2.5);
  EXPECT_FALSE(ParseArrivalProcess("poisson:0").ok());
  EXPECT_FALSE(ParseArrivalProcess("poisson:x").ok());
  EXPECT_FALSE(ParseArrivalProcess("uniform").ok());
}

TEST(TraceGeneratorTest, DeterministicForASeedAndDrawsFromTheMix) {
  TraceGeneratorOptions o{.arrivals = {.kind = ArrivalProcess::Kind::kPoisson, .rate_per_s = 4},
                          .jobs = 400,
                          .seed = 7};
  auto a = GenerateTrace(o);
  auto b = GenerateTrace(o);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, *b);
  o.seed = 8;
  EXPECT_NE(*GenerateTrace(o), *a);
  double last = 0;
  std::set<std::string> models;
  std::set<int> workers;
  for (const TraceJob& j : *a) {
    EXPECT_GE(j.arrival_s, last);
    last = j.arrival_s;
    models.insert(j.model);
    workers.insert(j.workers);
    EXPECT_EQ(j.iterations, 1000);
  }
  EXPECT_EQ(models.size(), core::BuiltinModels().size());
  EXPECT_EQ(workers, (std::set<int>{2, 4, 8}));
  // Mean inter-arrival time near 1 / rate (400 samples: within 15 %).
  EXPECT_NEAR(last / 400, 0.25, 0.25 * 0.15);
}

TEST(TraceGeneratorTest, AllAtZeroAndBadOptions) {
  auto a = GenerateTrace({.jobs = 5, .models = {"BERT-large"}});
  ASSERT_TRUE(a.ok());
  for (const TraceJob& j : *a) {
    EXPECT_DOUBLE_EQ(j.arrival_s, 0);
    EXPECT_EQ(j.model, "BERT-large");
  }
  EXPECT_FALSE(GenerateTrace({.jobs = 1, .models = {"nope"}}).ok());
  EXPECT_FALSE(GenerateTrace({.jobs = 1, .worker_counts = {}}).ok());
  EXPECT_FALSE(GenerateTrace({.jobs = -1}).ok());
}

}  // namespace
}  // namespace inac::scheduler
