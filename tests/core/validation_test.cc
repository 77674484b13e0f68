// Bad-input cases: each asserts the exact path and message the user sees.
#include "core/validation.h"

#include <gtest/gtest.h>

#include "core/json.h"

namespace inac::core {
namespace {

constexpr char kGoodTopology[] = R"({
  "switches": [{"id": "s1", "ina": {"capable": true, "processing_gbps": 9, "aggregators": 100}},
               {"id": "s2"}],
  "hosts": [{"id": "h1"}, {"id": "h2"}, {"id": "ps"}],
  "links": [{"a": "h1", "b": "s1", "gbps": 3}, {"a": "h2", "b": "s1", "gbps": 3},
            {"a": "s1", "b": "s2", "gbps": 3}, {"a": "s2", "b": "ps", "gbps": 9}]
})";

std::vector<Problem> TopologyProblems(const std::string& text) {
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseTopology(text, &problems).has_value());
  return problems;
}

// Replaces the first occurrence of `from` in the good topology.
std::string Patch(const std::string& from, const std::string& to) {
  std::string s = kGoodTopology;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

struct Case {
  const char* name;
  std::string text;
  std::string path;
  std::string message;
};

class BadTopologyTest : public testing::TestWithParam<Case> {};

TEST_P(BadTopologyTest, ReportsPathAndMessage) {
  const Case& c = GetParam();
  auto problems = TopologyProblems(c.text);
  ASSERT_FALSE(problems.empty());
  bool found = false;
  for (const Problem& p : problems) found |= p.path == c.path && p.message == c.message;
  EXPECT_TRUE(found) << "want " << c.path << ": " << c.message << "\ngot:\n"
                     << FormatProblems(problems);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadTopologyTest,
    testing::Values(
        Case{"UnknownNode", Patch(R"("b": "ps")", R"("b": "s9")"), "links[3].b",
             "unknown node \"s9\""},
        Case{"DuplicateSwitch", Patch(R"({"id": "s2"})", R"({"id": "s1"})"), "switches[1].id",
             "duplicate node id \"s1\" (first at switches[0])"},
        Case{"HostSameAsSwitch", Patch(R"({"id": "h2"})", R"({"id": "s2"})"), "hosts[1].id",
             "duplicate node id \"s2\" (first at switches[1])"},
        Case{"ZeroCapacity", Patch(R"("gbps": 9)", R"("gbps": 0)"), "links[3].gbps",
             "must be positive, got 0"},
        Case{"NegativeCapacity", Patch(R"("gbps": 9)", R"("gbps": -4)"), "links[3].gbps",
             "must be positive, got -4"},
        Case{"AbsurdCapacity", Patch(R"("gbps": 9)", R"("gbps": 5e7)"), "links[3].gbps",
             "5e+07 Gbps is absurd (limit 1e+06)"},
        Case{"CapacityAsString", Patch(R"("gbps": 9)", R"("gbps": "9")"), "links[3].gbps",
             "expected a number, got string"},
        Case{"UnknownField", Patch(R"({"id": "s2"})", R"({"id": "s2", "colour": "red"})"),
             "switches[1].colour", "unknown field"},
        Case{"UnknownTopLevelField", Patch(R"("switches")", R"("swiches")"), "swiches",
             "unknown field"},
        Case{"MissingGbps", Patch(R"(, "gbps": 9})", "}"), "links[3].gbps", "required"},
        Case{"CapableWithoutProcessing", Patch(R"("processing_gbps": 9, )", ""),
             "switches[0].ina.processing_gbps", "required"},
        Case{"SelfLoop", Patch(R"("a": "s1", "b": "s2")", R"("a": "s1", "b": "s1")"), "links[2].b",
             "link connects \"s1\" to itself"},
        Case{"DuplicateLink",
             Patch(R"({"a": "s2", "b": "ps", "gbps": 9})",
                   R"({"a": "s2", "b": "ps", "gbps": 9}, {"a": "s2", "b": "ps", "gbps": 9})"),
             "links[4].id", "duplicate link id \"s2~ps\""},
        Case{"HostWithoutLink", Patch(R"({"id": "ps"})", R"({"id": "ps"}, {"id": "lonely"})"),
             "hosts[3]", "host \"lonely\" has no link"},
        Case{"Disconnected", Patch(R"({"a": "s1", "b": "s2", "gbps": 3}, )", ""), "",
             "topology is disconnected: 2 node(s) unreachable from s1 (s2, ps)"},
        Case{"BadStatus", Patch(R"("gbps": 9})", R"("gbps": 9, "status": "flaky"})"),
             "links[3].status", "must be \"up\" or \"down\", got \"flaky\""},
        Case{"BadAddress", Patch(R"({"id": "h1"})", R"({"id": "h1", "address": "10.0.0.300"})"),
             "hosts[0].address", "not an IPv4 address: \"10.0.0.300\""},
        Case{"NegativeAggregators", Patch(R"("aggregators": 100)", R"("aggregators": -5)"),
             "switches[0].ina.aggregators", "must be between 0 and 10^9, got -5"},
        Case{"FractionalAggregators", Patch(R"("aggregators": 100)", R"("aggregators": 1.5)"),
             "switches[0].ina.aggregators", "expected an integer, got 1.5"},
        Case{"SwitchesNotArray", R"({"switches": {}, "hosts": [], "links": []})", "switches",
             "expected an array, got object"},
        Case{"NotAnObject", "[1, 2]", "", "expected an object, got array"},
        Case{"MalformedJson", "{\"switches\": [", "",
             "malformed JSON: [json.exception.parse_error.101] parse error at line 1, column 15: "
             "syntax error while parsing value - unexpected end of input; expected '[', '{', or "
             "a literal"},
        Case{"EmptyId", Patch(R"({"id": "s2"})", R"({"id": ""})"), "switches[1].id",
             "must not be empty"},
        Case{"HostToHostLink",
             Patch(R"({"a": "h2", "b": "s1", "gbps": 3})", R"({"a": "h2", "b": "h1", "gbps": 3})"),
             "links[1]", "links two hosts (h2, h1); hosts attach to switches"},
        Case{
            "DuplicatePort",
            Patch(
                R"({"a": "h1", "b": "s1", "gbps": 3}, {"a": "h2", "b": "s1", "gbps": 3})",
                R"({"a": "h1", "b": "s1", "gbps": 3, "b_port": 4}, {"a": "h2", "b": "s1", "gbps": 3, "b_port": 4})"),
            "links[1].b_port", "port 4 of s1 used twice"},
        Case{
            "UnknownTarget",
            Patch(
                R"({"id": "s2"})",
                R"({"id": "s2", "p4runtime": {"address": "127.0.0.1:9", "device_id": 2, "target": "tofino2"}})"),
            "switches[1].p4runtime.target",
            "must be \"emulator\", \"bmv2\" or \"tofino\", got \"tofino2\""},
        Case{
            "TofinoNotYet",
            Patch(
                R"({"id": "s2"})",
                R"({"id": "s2", "p4runtime": {"address": "127.0.0.1:9", "device_id": 2, "target": "tofino"}})"),
            "switches[1].p4runtime.target",
            "\"tofino\" is not supported yet: no Tofino build of ina.p4 ships with INAC (use "
            "\"bmv2\" or \"emulator\")"}),
    [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(ValidateTopologyTest, StructuralAndSemanticProblemsAreReportedTogether) {
  // docs/formats.md's example: an unknown field in one element, an unknown node in another.
  std::string text = Patch(R"({"id": "s2"})", R"({"id": "s2", "colour": "red"})");
  const std::string last = R"({"a": "s2", "b": "ps", "gbps": 9})";
  text.replace(text.find(last), last.size(), last + R"(, {"a": "s2", "b": "s9", "gbps": 9})");
  EXPECT_EQ(FormatProblems(TopologyProblems(text)),
            FormatProblems(
                {{"switches[1].colour", "unknown field"}, {"links[4].b", "unknown node \"s9\""}}));
  // A semantic problem of an element that failed to decode is not echoed: links[3] lost its
  // gbps (required), so its "must be positive" is left out.
  std::string broken = Patch(R"(, "gbps": 9})", "}");
  const auto problems = TopologyProblems(broken);
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "links[3].gbps");
  // A whole-document problem stops there.
  EXPECT_EQ(TopologyProblems("[1, 2]").size(), 1u);
}

TEST(ValidateTopologyTest, GoodTopologyHasNoProblems) {
  std::vector<Problem> problems;
  auto t = ParseTopology(kGoodTopology, &problems);
  ASSERT_TRUE(t.has_value()) << FormatProblems(problems);
  EXPECT_EQ(t->links[0].id, "h1~s1");
}

TEST(ValidateTopologyTest, ReportsEveryProblemAtOnce) {
  std::string text = Patch(R"("b": "ps")", R"("b": "s9")");
  auto pos = text.find(R"("gbps": 3)");
  text.replace(pos, 9, R"("gbps": -1)");
  auto problems = TopologyProblems(text);
  // The bad capacity, the bad reference, and the PS left without a link by it.
  EXPECT_EQ(FormatProblems(problems),
            "links[0].gbps: must be positive, got -1\n"
            "links[3].b: unknown node \"s9\"\n"
            "hosts[2]: host \"ps\" has no link\n");
}

// --- Jobs ---

std::vector<Problem> JobProblems(const std::string& job_json) {
  std::vector<Problem> topo_problems;
  auto t = ParseTopology(kGoodTopology, &topo_problems);
  EXPECT_TRUE(t.has_value());
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseJobsFile(R"({"jobs": [)" + job_json + "]}", &*t, &problems).has_value());
  return problems;
}

class BadJobTest : public testing::TestWithParam<Case> {};

TEST_P(BadJobTest, ReportsPathAndMessage) {
  const Case& c = GetParam();
  auto problems = JobProblems(c.text);
  bool found = false;
  for (const Problem& p : problems) found |= p.path == c.path && p.message == c.message;
  EXPECT_TRUE(found) << "want " << c.path << ": " << c.message << "\ngot:\n"
                     << FormatProblems(problems);
}

std::string Job(const std::string& extra) {
  return R"({"name": "j", "workers": ["h1", "h2"], "parameter_servers": ["ps"],
             "gradient_bytes": 1000, "compute_ms": 10, "iterations": 5, "batch_size": 32)" +
         extra + "}";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadJobTest,
    testing::Values(
        Case{
            "WorkerIsItsOwnPs",
            R"({"name": "j", "workers": ["h1", "ps"], "parameter_servers": ["ps"], "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].parameter_servers[0]",
            "host \"ps\" is both a worker and a parameter server of this job"},
        Case{
            "UnknownWorker",
            R"({"name": "j", "workers": ["h1", "h7"], "parameter_servers": ["ps"], "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].workers[1]", "unknown host \"h7\""},
        Case{
            "SwitchAsWorker",
            R"({"name": "j", "workers": ["s1"], "parameter_servers": ["ps"], "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].workers[0]", "\"s1\" is a switch, not a host"},
        Case{"UnknownModel", Job(R"(, "model": "GPT-9")"), "jobs[0].model",
             "unknown model \"GPT-9\" (known: AlexNet, ResNet50, ResNet101, ResNet152, VGG16, "
             "VGG19, BERT-large, GoogLeNet)"},
        Case{"NegativeIterations",
             Job("").replace(Job("").find("\"iterations\": 5"), 15, "\"iterations\": -5"),
             "jobs[0].iterations", "must be positive, got -5"},
        Case{
            "DuplicateWorker",
            R"({"name": "j", "workers": ["h1", "h1"], "parameter_servers": ["ps"], "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].workers[1]", "duplicate worker \"h1\""},
        Case{"BatchSizeNotAllowed", Job(R"(, "batch_sizes": [16, 64])"), "jobs[0].batch_size",
             "batch_size 32 is not one of batch_sizes"},
        Case{"BadAllreduce", Job(R"(, "allreduce": "tree")"), "jobs[0].allreduce",
             "must be \"ps\" or \"ring\", got \"tree\""},
        Case{"RingWithPs", Job(R"(, "allreduce": "ring")"), "jobs[0].parameter_servers",
             "allreduce \"ring\" takes no parameter servers"},
        Case{
            "WorkersNotStrings",
            R"({"name": "j", "workers": ["h1", 7], "parameter_servers": ["ps"], "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].workers[1]", "expected a string, got number"},
        Case{
            "MissingGradient",
            R"({"name": "j", "workers": ["h1"], "parameter_servers": ["ps"], "compute_ms": 1, "iterations": 1, "batch_size": 1})",
            "jobs[0].gradient_bytes", "required"},
        Case{"UnknownJobField", Job(R"(, "gpus": 8)"), "jobs[0].gpus", "unknown field"}),
    [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(ValidateJobTest, ModelFillsSizes) {
  std::vector<Problem> problems;
  auto specs = ParseJobsFile(
      R"({"jobs": [{"name": "r", "model": "ResNet50", "workers": ["h1", "h2"], "parameter_servers": ["ps"], "iterations": 10, "batch_size": 64}]})",
      nullptr, &problems);
  ASSERT_TRUE(specs.has_value()) << FormatProblems(problems);
  EXPECT_EQ((*specs)[0].gradient_bytes, 102236160);
  EXPECT_EQ((*specs)[0].compute_ms, 323);
  EXPECT_EQ((*specs)[0].allreduce, AllReduce::kPs);
  EXPECT_EQ((*specs)[0].tenant, "default");
}

TEST(ValidateJobTest, DisconnectedHostsAreReported) {
  std::vector<Problem> problems;
  std::string text = Patch(R"({"a": "s1", "b": "s2", "gbps": 3})",
                           R"({"a": "s1", "b": "s2", "gbps": 3, "status": "down"})");
  auto t = ParseTopology(text, &problems);
  ASSERT_TRUE(t.has_value()) << FormatProblems(problems);
  JobSpec spec;
  spec.name = "j";
  spec.workers = {"h1"};
  spec.parameter_servers = {"ps"};
  spec.gradient_bytes = 1;
  spec.iterations = 1;
  spec.batch_size = 1;
  auto found = ValidateJobSpec(spec, &*t, "jobs[0]");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(FormatProblem(found[0]),
            "jobs[0].parameter_servers[0]: host \"ps\" is not connected to h1 over links that "
            "are up");
  // The kind travels as data (the controller waits for an unreachable host, fails a missing one).
  EXPECT_EQ(found[0].kind, ProblemKind::kUnreachable);
  spec.parameter_servers = {"h9"};
  found = ValidateJobSpec(spec, &*t, "jobs[0]");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, ProblemKind::kUnknownNode);
  spec.parameter_servers = {"s1"};
  found = ValidateJobSpec(spec, &*t, "jobs[0]");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, ProblemKind::kUnknownNode);
}

TEST(ValidateJobTest, StructuralAndSemanticProblemsOfDifferentJobsTogether) {
  std::vector<Problem> topo_problems;
  auto t = ParseTopology(kGoodTopology, &topo_problems);
  ASSERT_TRUE(t.has_value());
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseJobsFile(
      R"({"jobs": [
        {"name": "a", "model": "ResNet50", "workers": ["h1"], "parameter_servers": ["ps"],
         "iterations": 1, "batch_size": 1, "gpus": 8},
        {"name": "b", "model": "ResNet50", "workers": ["h9"], "parameter_servers": ["ps"],
         "iterations": 1, "batch_size": 1}]})",
      &*t, &problems));
  ASSERT_EQ(problems.size(), 2u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "jobs[0].gpus");
  EXPECT_EQ(problems[1].path, "jobs[1].workers[0]");
}

TEST(ValidateJobTest, EmptyJobsFile) {
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseJobsFile(R"({"jobs": []})", nullptr, &problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(FormatProblem(problems[0]), "jobs: a job file needs at least one job");
}

}  // namespace
}  // namespace inac::core
