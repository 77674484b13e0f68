// The CLI's offline verbs as real `inac` processes: `inac sim` (docs/memory.md section 6)
// and `inac plan` (docs/routing.md). Checks exit codes (0; 2 for bad input with every
// problem on stderr), the JSON they print and the files they write. No controller, no switches.
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "core/json.h"
#include "tests/system/harness.h"

namespace inac::systest {
namespace {

class CliOfflineTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("offline");
    ASSERT_FALSE(dir_.empty());
    // 2 leaves x 8 hosts, one spine; INA at the leaves with 500 aggregators each.
    const CliRun topo = RunInac(
        "topo generate leaf-spine --leaves 2 --spines 1 --hosts-per-leaf 8 --aggregators 500 > " +
            dir_ + "/topo.json",
        dir_);
    ASSERT_EQ(topo.exit, 0) << topo.out;
    topology_ = dir_ + "/topo.json";
  }
  void TearDown() override {
    std::error_code ignored;
    if (!HasFailure()) std::filesystem::remove_all(dir_, ignored);
  }

  // The JSON printed by a successful run (stdout only).
  static Json StdoutJson(const CliRun& run) {
    const std::string out = run.out.substr(0, run.out.find("--stderr--"));
    return Json::parse(out, nullptr, /*allow_exceptions=*/false);
  }

  std::string dir_;
  std::string topology_;
};

TEST_F(CliOfflineTest, SimGeneratesATraceAndReportsEveryJob) {
  const std::string timeline = dir_ + "/timeline.csv";
  const CliRun run = RunInac("sim --topology " + topology_ +
                                 " --generate all-at-zero --jobs 6 --iterations 40 --seed 3"
                                 " --policy esa --json --timeline " +
                                 timeline,
                             dir_);
  ASSERT_EQ(run.exit, 0) << run.out;
  const Json j = StdoutJson(run);
  ASSERT_TRUE(j.is_object()) << run.out;
  EXPECT_EQ(j.at("policy"), "esa");
  EXPECT_EQ(j.at("traffic"), "onoff");
  ASSERT_EQ(j.at("jobs").size(), 6u);
  EXPECT_EQ(j.at("summary").at("jobs"), 6);
  double sum = 0;
  for (const Json& job : j.at("jobs")) {
    EXPECT_GT(job.at("jct_s").get<double>(), 0);
    EXPECT_GE(job.at("finish_s").get<double>(), job.at("start_s").get<double>());
    sum += job.at("jct_s").get<double>();
  }
  EXPECT_NEAR(j.at("summary").at("mean_jct_s").get<double>(), sum / 6, 1e-6);
  EXPECT_TRUE(j.at("summary").at("switches").contains("lf0"));
  // The timeline: a header and one row per arrival, start, milestone and completion.
  std::ifstream in(timeline);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "time_s,event,job,running,waiting,aggregators_in_use,fallback_gbps");
  int rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  EXPECT_EQ(rows, 6 * (1 + 1 + 9 + 1));
}

TEST_F(CliOfflineTest, SimSameSeedSameResultAndContinuousTrafficIsSlower) {
  const std::string args = "sim --topology " + topology_ +
                           " --generate poisson:0.5 --jobs 8 --iterations 200 --seed 9"
                           " --policy atp --json";
  const CliRun a = RunInac(args, dir_);
  const CliRun b = RunInac(args, dir_);
  ASSERT_EQ(a.exit, 0) << a.out;
  ASSERT_EQ(b.exit, 0) << b.out;
  EXPECT_EQ(StdoutJson(a), StdoutJson(b));
  // Continuous traffic charges links and memory with every job's burst rate all the time.
  const CliRun c = RunInac(args + " --traffic continuous", dir_);
  ASSERT_EQ(c.exit, 0) << c.out;
  EXPECT_EQ(StdoutJson(c).at("traffic"), "continuous");
  EXPECT_GT(StdoutJson(c).at("summary").at("mean_jct_s").get<double>(),
            StdoutJson(a).at("summary").at("mean_jct_s").get<double>());
}

TEST_F(CliOfflineTest, SimReplaysACsvTraceAndPrintsATable) {
  const std::string trace = WriteFile(dir_ + "/trace.csv",
                                      "# two jobs with their hosts\n"
                                      "name,arrival_s,model,workers,hosts,parameter_servers,"
                                      "iterations\n"
                                      "bert,0,BERT-large,2,h0_0;h0_1,h1_0,20\n"
                                      "resnet,0.5,ResNet50,2,h0_2;h1_1,h1_2,30\n");
  const CliRun run =
      RunInac("sim --topology " + topology_ + " --trace " + trace + " --policy switchml", dir_);
  ASSERT_EQ(run.exit, 0) << run.out;
  EXPECT_NE(run.out.find("bert"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("resnet"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("policy switchml, routing atp, traffic onoff: 2 jobs"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("mean JCT"), std::string::npos) << run.out;
}

TEST_F(CliOfflineTest, SimRefusesBadInputWithEveryProblem) {
  const CliRun flags = RunInac("sim --topology " + topology_ +
                                   " --generate all-at-zero --policy lru --traffic bursty"
                                   " --milestone 0",
                               dir_);
  EXPECT_EQ(flags.exit, 2) << flags.out;
  for (const char* problem : {"--policy must be", "--traffic must be onoff or continuous",
                              "--milestone must be in (0, 1]", "--generate needs --jobs"}) {
    EXPECT_NE(flags.out.find(problem), std::string::npos) << problem << "\n" << flags.out;
  }
  const CliRun both = RunInac(
      "sim --topology " + topology_ + " --generate all-at-zero --jobs 2 --trace x.csv", dir_);
  EXPECT_EQ(both.exit, 2);
  EXPECT_NE(both.out.find("exactly one of --trace FILE and --generate"), std::string::npos)
      << both.out;
  const std::string trace = WriteFile(dir_ + "/bad.csv",
                                      "name,arrival_s,model,workers,hosts,iterations\n"
                                      "a,0,NoSuchNet,2,h0_0;h0_1,10\n"
                                      "b,-1,ResNet50,0,,10\n");
  const CliRun bad = RunInac("sim --topology " + topology_ + " --trace " + trace, dir_);
  EXPECT_EQ(bad.exit, 2) << bad.out;
  EXPECT_NE(bad.out.find("NoSuchNet"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("line 3"), std::string::npos) << bad.out;
  const CliRun missing = RunInac("sim --topology " + dir_ +
                                     "/none.json --generate all-at-zero"
                                     " --jobs 1",
                                 dir_);
  EXPECT_EQ(missing.exit, 2) << missing.out;
}

TEST_F(CliOfflineTest, PlanPrintsAPlanAndRefusesUnknownHosts) {
  const std::string jobs = WriteFile(dir_ + "/jobs.json", R"({"jobs": [{
      "name": "j", "workers": ["h0_0", "h0_1", "h1_0"], "parameter_servers": ["h1_1"],
      "allreduce": "ps", "gradient_bytes": 100000000, "compute_ms": 100, "iterations": 10,
      "batch_size": 32}]})");
  const CliRun run = RunInac(
      "plan --topology " + topology_ + " --jobs " + jobs + " --algorithm grid --compact", dir_);
  ASSERT_EQ(run.exit, 0) << run.out;
  const Json plan = StdoutJson(run);
  ASSERT_TRUE(plan.is_object()) << run.out;
  EXPECT_EQ(plan.at("algorithm"), "grid");
  ASSERT_EQ(plan.at("jobs").size(), 1u);
  EXPECT_EQ(plan.at("jobs")[0].at("flows").size(), 3u);  // one flow per worker
  const std::string bad = WriteFile(dir_ + "/bad-jobs.json", R"({"jobs": [{
      "name": "j", "workers": ["nowhere"], "parameter_servers": ["h1_1"], "allreduce": "ps",
      "gradient_bytes": 1000, "compute_ms": 1, "iterations": 1, "batch_size": 1}]})");
  const CliRun refused =
      RunInac("plan --topology " + topology_ + " --jobs " + bad + " --algorithm grid", dir_);
  EXPECT_EQ(refused.exit, 2) << refused.out;
  EXPECT_NE(refused.out.find("nowhere"), std::string::npos) << refused.out;
  // Planner options of the plan's fingerprint: a good value plans (another fingerprint), a bad
  // one is a clear error naming the flag. Spread candidates for every job (below -1: bad);
  // grid-split's range cap (outside 0..64: bad).
  for (const auto& [flag, good, bad_value] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--spread-min-columns", "0", "-2"}, {"--split-max-ranges", "8", "65"}}) {
    const CliRun ok = RunInac("plan --topology " + topology_ + " --jobs " + jobs +
                                  " --algorithm grid --compact " + flag + " " + good,
                              dir_);
    ASSERT_EQ(ok.exit, 0) << flag << ": " << ok.out;
    EXPECT_NE(StdoutJson(ok).at("fingerprint"), plan.at("fingerprint")) << flag;
    const CliRun refused_flag = RunInac(
        "plan --topology " + topology_ + " --jobs " + jobs + " " + flag + " " + bad_value, dir_);
    EXPECT_EQ(refused_flag.exit, 2) << refused_flag.out;
    EXPECT_NE(refused_flag.out.find(flag), std::string::npos) << refused_flag.out;
  }
}

}  // namespace
}  // namespace inac::systest
