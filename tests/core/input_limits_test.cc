// Input limits: strict JSON text (no repeated key, bounded nesting) and a bound
// on every string, array and number of a topology or job spec, each refusal a Problem at the JSON
// path of the offending value. Limits: core/validation.h, docs/formats.md "Limits".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/generators.h"
#include "core/json.h"
#include "core/status.h"
#include "core/validation.h"

namespace inac::core {
namespace {

bool HasProblem(const std::vector<Problem>& problems, const std::string& path,
                const std::string& message_part = "") {
  for (const Problem& p : problems) {
    if (p.path == path && p.message.find(message_part) != std::string::npos) return true;
  }
  return false;
}

bool HasProblemAt(const std::vector<Problem>& problems, const std::string& path) {
  return HasProblem(problems, path, "");
}

// --- JSON text ------------------------------------------------------------------------------

std::vector<Problem> TextProblems(const std::string& text) {
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseJsonText(text, &problems).has_value()) << text.substr(0, 200);
  return problems;
}

TEST(JsonTextTest, DuplicateTopLevelKeyIsRefusedWithItsPath) {
  auto problems = TextProblems(R"({"name": "a", "tenant": "t", "name": "b"})");
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "name");
  EXPECT_EQ(problems[0].message, "duplicate key \"name\"");
}

TEST(JsonTextTest, DuplicateNestedKeyIsRefusedWithItsPath) {
  auto problems = TextProblems(R"({"links": [{"a": "x", "b": "y", "gbps": 1},
                                             {"a": "x", "gbps": 2, "b": "y", "gbps": 3}]})");
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "links[1].gbps");
  EXPECT_EQ(problems[0].message, "duplicate key \"gbps\"");

  problems = TextProblems(R"({"a": [[1, {"x": 1}], [2, {"y": {"z": 0, "z": 1}}]]})");
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "a[1][1].y.z");

  problems = TextProblems(R"([{"k": 1}, {"k": 2, "k": 3}])");
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "[1].k");
}

TEST(JsonTextTest, DuplicateKeyInALargeObjectIsFound) {
  // Beyond the scanned size the keys are looked up in a hash set.
  std::string text = "{";
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&text, "\"k", i, "\": ", i, ", ");
  text += "\"k500\": 0}";
  auto problems = TextProblems(text);
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "k500");
  // ... and the first repeat after exactly the scanned size too.
  for (int n : {15, 16, 17}) {
    std::string small = "{";
    for (int i = 0; i < n; ++i) absl::StrAppend(&small, "\"k", i, "\": 0, ");
    small += "\"k0\": 1}";
    EXPECT_TRUE(HasProblemAt(TextProblems(small), "k0")) << n;
  }
}

TEST(JsonTextTest, SameKeyInDifferentObjectsIsFine) {
  std::vector<Problem> problems;
  auto json = ParseJsonText(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}]})", &problems);
  ASSERT_TRUE(json.has_value()) << FormatProblems(problems);
  EXPECT_EQ((*json)["b"][1]["a"], 2);
}

TEST(JsonTextTest, BuildsTheSameDocumentAsNlohmann) {
  const std::string text =
      R"({"z": 1, "a": [1, -2, 18446744073709551615, 2.5, "s", true, false, null, {}, []],
          "m": {"y": {"x": "\u00e9"}, "b": 0.0}, "": 3})";
  std::vector<Problem> problems;
  auto json = ParseJsonText(text, &problems);
  ASSERT_TRUE(json.has_value()) << FormatProblems(problems);
  const Json expected = Json::parse(text);
  EXPECT_EQ(*json, expected);
  EXPECT_EQ(json->dump(), expected.dump());  // member order and number types too
  EXPECT_TRUE((*json)["a"][1].is_number_integer());
  EXPECT_TRUE((*json)["a"][2].is_number_unsigned());
  EXPECT_TRUE((*json)["a"][3].is_number_float());
  // Scalars as whole documents.
  EXPECT_EQ(ParseJsonText("42", &problems).value(), Json(42));
  EXPECT_EQ(ParseJsonText(R"("s")", &problems).value(), Json("s"));
  EXPECT_TRUE(problems.empty());
}

TEST(JsonTextTest, LargeObjectParses) {
  // 100,000 distinct keys in about 1.5 MB: the parser appends members without searching them.
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) absl::StrAppend(&text, i ? ", " : "", "\"key", i, "\": ", i);
  text += "}";
  std::vector<Problem> problems;
  auto json = ParseJsonText(text, &problems);
  ASSERT_TRUE(json.has_value()) << FormatProblems(problems);
  EXPECT_EQ(json->size(), 100000u);
  EXPECT_EQ(json->begin().key(), "key0");
}

TEST(JsonTextTest, NestingIsBounded) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  std::vector<Problem> problems;
  EXPECT_TRUE(ParseJsonText(nested(kMaxJsonDepth), &problems).has_value())
      << FormatProblems(problems);
  problems = TextProblems(nested(kMaxJsonDepth + 1));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  std::string path;
  for (int i = 0; i < kMaxJsonDepth; ++i) path += "[0]";
  EXPECT_EQ(problems[0].path, path);
  EXPECT_EQ(problems[0].message, "nested deeper than 64 levels of arrays and objects");

  // Objects count too, and the path names the keys.
  std::string objects;
  for (int i = 0; i < kMaxJsonDepth + 1; ++i) objects += "{\"a\": ";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  problems = TextProblems(objects);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path.size(), 2u * kMaxJsonDepth - 1);  // "a.a...a"
}

TEST(JsonTextTest, MegabyteOfOpenBracketsIsRefusedCheaply) {
  auto problems = TextProblems(std::string(1 << 20, '['));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].message.find("nested deeper than"), std::string::npos);
  problems = TextProblems(std::string(1 << 19, '[') + std::string(1 << 19, ']'));
  ASSERT_EQ(problems.size(), 1u);
}

TEST(JsonTextTest, NonFiniteAndMalformedNumbersAreRefused) {
  for (const char* text : {R"({"gbps": 1e999})", R"({"gbps": -1e400})", R"({"gbps": NaN})",
                           R"({"gbps": Infinity})", R"({"gbps": 1.})", R"({"gbps": 01})"}) {
    auto problems = TextProblems(text);
    ASSERT_EQ(problems.size(), 1u) << text;
    EXPECT_EQ(problems[0].path, "") << text;
    EXPECT_NE(problems[0].message.find("malformed JSON"), std::string::npos) << text;
  }
}

TEST(JsonTextTest, ParseErrorsKeepTheirMessage) {
  auto problems = TextProblems(R"({"a": 1} x)");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message.rfind("malformed JSON: [json.exception.parse_error.101]", 0), 0u)
      << problems[0].message;
}

TEST(JsonTextTest, DocumentParsersReportTheDuplicatePath) {
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseJobsFile(R"({"jobs": [{"name": "a", "workers": ["h1", "h2"],
      "gradient_bytes": 1, "compute_ms": 1, "iterations": 1, "batch_size": 1, "iterations": 2}]})",
                             nullptr, &problems));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "jobs[0].iterations");
  // What the REST layer sends: the path is the error's field.
  EXPECT_EQ(FieldOf(ProblemsError(problems)), "jobs[0].iterations");

  problems.clear();
  EXPECT_FALSE(ParseTopology(R"({"switches": [{"id": "s1", "ina": {"capable": true,
      "processing_gbps": 9, "capable": false}}], "hosts": [], "links": []})",
                             &problems));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "switches[0].ina.capable");
}

// --- Topology limits ------------------------------------------------------------------------

// One switch `s` with two hosts; `Edit` changes it before validation.
Topology SmallTopology() {
  Topology t;
  t.switches.push_back(Switch{"s", {true, 10, 100, kDefaultAggregatorBytes}, std::nullopt});
  t.hosts.push_back(Host{"h1", std::nullopt, std::nullopt});
  t.hosts.push_back(Host{"h2", std::nullopt, std::nullopt});
  t.links.push_back(Link{"l1", "h1", "s", 10});
  t.links.push_back(Link{"l2", "h2", "s", 10});
  return t;
}

TEST(TopologyLimitsTest, SmallTopologyIsValid) {
  auto problems = ValidateTopology(SmallTopology());
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
}

TEST(TopologyLimitsTest, IdLengths) {
  Topology t = SmallTopology();
  const std::string longest(kMaxIdBytes, 'x');
  t.hosts[0].id = longest;
  t.links[0].a = longest;
  t.links[0].id = std::string(kMaxLinkIdBytes, 'l');
  t.switches[0].id = std::string(kMaxIdBytes, 's');
  for (Link& l : t.links) l.b = t.switches[0].id;
  auto problems = ValidateTopology(t);
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);

  t.hosts[0].id += "x";
  t.links[0].a = t.hosts[0].id;
  t.links[0].id += "l";
  t.switches[0].id += "s";
  for (Link& l : t.links) l.b = t.switches[0].id;
  problems = ValidateTopology(t);
  EXPECT_TRUE(HasProblem(problems, "hosts[0].id", "longer than 128 bytes (got 129)"))
      << FormatProblems(problems);
  EXPECT_TRUE(HasProblem(problems, "switches[0].id", "longer than 128 bytes"));
  EXPECT_TRUE(HasProblem(problems, "links[0].id", "longer than 257 bytes (got 258)"));
  // The over-long ids are still nodes: no echo of "unknown node".
  EXPECT_FALSE(HasProblemAt(problems, "links[0].a"));
  EXPECT_EQ(problems.size(), 3u) << FormatProblems(problems);
}

TEST(TopologyLimitsTest, DefaultLinkIdOfTwoLongestIdsFits) {
  EXPECT_EQ(DefaultLinkId(std::string(kMaxIdBytes, 'a'), std::string(kMaxIdBytes, 'b')).size(),
            kMaxLinkIdBytes);
}

TEST(TopologyLimitsTest, IdCharacters) {
  for (const std::string good : {"s", "S1", "leaf-1.rack_3:dc@eu+x~y", "0", "h0_0_0"}) {
    EXPECT_EQ(IdProblem(good, kMaxIdBytes), "") << good;
  }
  EXPECT_EQ(IdProblem("a/b", kMaxIdBytes),
            "invalid character '/' at byte 1 (ids use letters, digits and ._-~:@+, starting with "
            "a letter or digit)");
  EXPECT_EQ(IdProblem("", kMaxIdBytes), "must not be empty");
  for (const std::string& bad : std::vector<std::string>{
           "a b", " a", "-a", ".", "..", "~a", "a\nb", std::string("a\0b", 3), "caf\xc3\xa9", "a?b",
           "a#b", "a%2Fb", "a,b", "a\"b", "a\\b", "a\x7f"}) {
    EXPECT_NE(IdProblem(bad, kMaxIdBytes), "") << bad;
  }
  EXPECT_NE(IdProblem("a\nb", kMaxIdBytes).find("\\x0a"), std::string::npos);

  Topology t = SmallTopology();
  t.switches[0].id = "spine/1";
  for (Link& l : t.links) l.b = "spine/1";
  t.links[1].id = "l 2";
  auto problems = ValidateTopology(t);
  EXPECT_TRUE(HasProblem(problems, "switches[0].id", "invalid character '/' at byte 5"));
  EXPECT_TRUE(HasProblem(problems, "links[1].id", "invalid character ' ' at byte 1"));
  EXPECT_EQ(problems.size(), 2u) << FormatProblems(problems);
}

TEST(TopologyLimitsTest, TinyCapacityIsRefused) {
  // core/validation.h's example: a link of 1e-300 Gbps.
  std::vector<Problem> problems;
  EXPECT_FALSE(ParseTopology(R"({"switches": [{"id": "s"}], "hosts": [{"id": "h"}],
                                 "links": [{"a": "h", "b": "s", "gbps": 1e-300}]})",
                             &problems));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "links[0].gbps");
  EXPECT_EQ(problems[0].message, "1e-300 Gbps is below the minimum of 0.001 Gbps");
}

TEST(TopologyLimitsTest, CapacityBoundaries) {
  struct Field {
    const char* path;
    void (*set)(Topology&, double);
    bool zero_ok;
  };
  const Field fields[] = {
      {"links[0].gbps", [](Topology& t, double v) { t.links[0].gbps = v; }, false},
      {"hosts[0].ingress_gbps", [](Topology& t, double v) { t.hosts[0].ingress_gbps = v; }, false},
      {"switches[0].ina.processing_gbps",
       [](Topology& t, double v) { t.switches[0].ina.processing_gbps = v; }, false},
      {"switches[0].ina.processing_gbps",
       [](Topology& t, double v) {
         t.switches[0].ina.capable = false;
         t.switches[0].ina.processing_gbps = v;
       },
       true},
  };
  for (const Field& f : fields) {
    SCOPED_TRACE(f.path);
    for (double ok : {kMinGbps, 1.0, kMaxGbps}) {
      Topology t = SmallTopology();
      f.set(t, ok);
      auto problems = ValidateTopology(t);
      EXPECT_TRUE(problems.empty()) << ok << "\n" << FormatProblems(problems);
    }
    for (double bad : {1e-300, 4.9e-324, 0.000999, kMaxGbps * (1 + 1e-9), -1.0}) {
      Topology t = SmallTopology();
      f.set(t, bad);
      EXPECT_TRUE(HasProblemAt(ValidateTopology(t), f.path)) << bad;
    }
    Topology t = SmallTopology();
    f.set(t, 0);
    EXPECT_EQ(ValidateTopology(t).empty(), f.zero_ok);
  }
}

TEST(TopologyLimitsTest, NumberBoundaries) {
  auto check = [](const char* path, void (*set)(Topology&, bool over)) {
    SCOPED_TRACE(path);
    Topology ok = SmallTopology();
    set(ok, false);
    auto problems = ValidateTopology(ok);
    EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
    Topology bad = SmallTopology();
    set(bad, true);
    EXPECT_TRUE(HasProblemAt(ValidateTopology(bad), path)) << FormatProblems(ValidateTopology(bad));
  };
  check("links[0].latency_us", [](Topology& t, bool over) {
    t.links[0].latency_us = over ? std::nextafter(kMaxLatencyUs, 1e300) : kMaxLatencyUs;
  });
  check("switches[0].ina.aggregators",
        [](Topology& t, bool over) { t.switches[0].ina.aggregators = kMaxAggregators + over; });
  check("switches[0].ina.aggregator_bytes", [](Topology& t, bool over) {
    t.switches[0].ina.aggregator_bytes = kMaxAggregatorBytes + (over ? 4 : 0);
  });
  check("hosts[0].address", [](Topology& t, bool over) {
    t.hosts[0].address = over ? "0010.000.000.001" : "010.000.000.001";
  });
  check("links[0].b_port",
        [](Topology& t, bool over) { t.links[0].b_port = kMaxPort + (over ? 1 : 0); });
  check("switches[0].p4runtime.address", [](Topology& t, bool over) {
    std::string address = "h:1";
    address += std::string(kMaxAddressBytes - address.size() + over, '0');
    t.switches[0].p4runtime = P4RuntimeEndpoint{address, 1, TargetKind::kBmv2};
  });
  check("switches[0].p4runtime.address", [](Topology& t, bool over) {
    t.switches[0].p4runtime =
        P4RuntimeEndpoint{over ? "host: 1" : "unix:/run/s1.sock", 1, TargetKind::kBmv2};
  });
}

TEST(TopologyLimitsTest, ArraySizes) {
  auto nodes = [](size_t switches, size_t hosts, size_t links) {
    Topology t;
    for (size_t i = 0; i < switches; ++i) t.switches.push_back({absl::StrCat("s", i), {}, {}});
    for (size_t i = 0; i < hosts; ++i) t.hosts.push_back({absl::StrCat("h", i), {}, {}});
    for (size_t i = 0; i < links; ++i) {
      t.links.push_back(Link{absl::StrCat("l", i), "s0", absl::StrCat("h", i % hosts), 1});
    }
    return ValidateTopology(t);
  };
  // Other problems (a disconnected graph) may be reported; only the counts are looked at.
  const auto at_max = nodes(kMaxSwitches, kMaxHosts, kMaxLinks);
  EXPECT_FALSE(HasProblemAt(at_max, "switches"));
  EXPECT_FALSE(HasProblemAt(at_max, "hosts"));
  EXPECT_FALSE(HasProblemAt(at_max, "links"));
  EXPECT_TRUE(
      HasProblem(nodes(kMaxSwitches + 1, 1, 1), "switches", "at most 16384 switches, got 16385"));
  EXPECT_TRUE(HasProblem(nodes(1, kMaxHosts + 1, 1), "hosts", "at most 65536 hosts, got 65537"));
  EXPECT_TRUE(HasProblem(nodes(1, 1, kMaxLinks + 1), "links", "at most 262144 links, got 262145"));
}

TEST(TopologyLimitsTest, FatTreeK32FitsAndParses) {
  // The largest topology the project uses (README, bench/topo_bench.cc), through text.
  Topology t = GenerateFatTree(32, GeneratorOptions{}).value();
  EXPECT_EQ(t.switches.size(), 1280u);
  EXPECT_EQ(t.hosts.size(), 8192u);
  std::vector<Problem> problems;
  auto back = ParseTopology(TopologyToJson(t).dump(), &problems);
  ASSERT_TRUE(back.has_value()) << FormatProblems(problems);
  EXPECT_EQ(*back, t);
}

TEST(TopologyLimitsTest, FatTreeK64FitsTheArrayBounds) {
  Topology t = GenerateFatTree(64, GeneratorOptions{}).value();
  EXPECT_LE(t.switches.size(), kMaxSwitches);
  EXPECT_LE(t.hosts.size(), kMaxHosts);
  EXPECT_LE(t.links.size(), kMaxLinks);
}

// --- Job limits -----------------------------------------------------------------------------

JobSpec GoodSpec() {
  JobSpec s;
  s.name = "j";
  s.tenant = "vision";
  s.workers = {"h1", "h2"};
  s.parameter_servers = {"ps"};
  s.gradient_bytes = 1000;
  s.compute_ms = 10;
  s.iterations = 5;
  s.batch_size = 32;
  return s;
}

TEST(JobLimitsTest, GoodSpecIsValid) {
  auto problems = ValidateJobSpec(GoodSpec(), nullptr, "");
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
}

// `set(spec, false)` puts the limit (accepted), `set(spec, true)` one past it (refused at `path`).
void CheckBoundary(const std::string& path, void (*set)(JobSpec&, bool over),
                   const std::string& message_part = "") {
  SCOPED_TRACE(path);
  JobSpec ok = GoodSpec();
  set(ok, false);
  auto problems = ValidateJobSpec(ok, nullptr, "jobs[3]");
  EXPECT_TRUE(problems.empty()) << FormatProblems(problems);
  JobSpec bad = GoodSpec();
  set(bad, true);
  problems = ValidateJobSpec(bad, nullptr, "jobs[3]");
  EXPECT_TRUE(HasProblem(problems, "jobs[3]." + path, message_part)) << FormatProblems(problems);
}

TEST(JobLimitsTest, StringBoundaries) {
  CheckBoundary(
      "name", [](JobSpec& s, bool over) { s.name = std::string(kMaxJobNameBytes + over, 'n'); },
      "longer than 256 bytes (got 257)");
  CheckBoundary(
      "tenant", [](JobSpec& s, bool over) { s.tenant = std::string(kMaxTenantBytes + over, 't'); },
      "longer than 63 bytes (got 64)");
  CheckBoundary(
      "workers[1]",
      [](JobSpec& s, bool over) { s.workers[1] = std::string(kMaxIdBytes + over, 'w'); },
      "longer than 128 bytes");
  CheckBoundary(
      "parameter_servers[0]",
      [](JobSpec& s, bool over) { s.parameter_servers[0] = std::string(kMaxIdBytes + over, 'p'); },
      "longer than 128 bytes");
}

TEST(JobLimitsTest, StringCharacters) {
  // An oversized string: a 100,000-character tenant.
  JobSpec s = GoodSpec();
  s.tenant = std::string(100000, 't');
  auto problems = ValidateJobSpec(s, nullptr, "");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(FormatProblem(problems[0]), "tenant: longer than 63 bytes (got 100000)");

  CheckBoundary(
      "tenant", [](JobSpec& s, bool over) { s.tenant = over ? "team b" : "team-b"; },
      "invalid character ' '");
  CheckBoundary(
      "tenant", [](JobSpec& s, bool over) { s.tenant = over ? "" : "t"; }, "must not be empty");
  // Names are free text (UTF-8, spaces), without control characters.
  CheckBoundary(
      "name", [](JobSpec& s, bool over) { s.name = over ? "a\tb" : "r\xc3\xa9sum\xc3\xa9 job #2"; },
      "control character U+0009 at byte 1");
  CheckBoundary(
      "name", [](JobSpec& s, bool over) { s.name = over ? "a\xc2\x85" : "a\xc2\xa0"; },
      "control character U+0085");
  CheckBoundary(
      "workers[0]", [](JobSpec& s, bool over) { s.workers[0] = over ? "h/1" : "h:1"; },
      "invalid character '/'");
}

TEST(JobLimitsTest, InvalidReferencesAreNotLookedUpInTheTopology) {
  Topology t = SmallTopology();
  JobSpec s = GoodSpec();
  s.workers = {"h1", "h 2"};
  s.parameter_servers = {"h2"};
  auto problems = ValidateJobSpec(s, &t, "");
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "workers[1]");
  EXPECT_EQ(problems[0].kind, ProblemKind::kInvalid);
}

TEST(JobLimitsTest, NumberBoundaries) {
  CheckBoundary("priority",
                [](JobSpec& s, bool over) { s.priority = kMaxPriority + (over ? 1 : 0); });
  CheckBoundary("priority",
                [](JobSpec& s, bool over) { s.priority = -kMaxPriority - (over ? 1 : 0); });
  CheckBoundary("gradient_bytes",
                [](JobSpec& s, bool over) { s.gradient_bytes = kMaxGradientBytes + over; });
  CheckBoundary("gradient_bytes", [](JobSpec& s, bool over) { s.gradient_bytes = over ? 0 : 1; });
  CheckBoundary("compute_ms", [](JobSpec& s, bool over) {
    s.compute_ms = over ? std::nextafter(kMaxComputeMs, 1e300) : kMaxComputeMs;
  });
  CheckBoundary("compute_ms", [](JobSpec& s, bool over) { s.compute_ms = over ? -1e-300 : 0; });
  CheckBoundary("iterations", [](JobSpec& s, bool over) { s.iterations = kMaxIterations + over; });
  CheckBoundary("iterations", [](JobSpec& s, bool over) { s.iterations = over ? 0 : 1; });
  CheckBoundary(
      "batch_size", [](JobSpec& s, bool over) { s.batch_size = kMaxBatchSize + (over ? 1 : 0); },
      "larger than 1048576 (2^20), got 1048577");
  CheckBoundary("batch_size", [](JobSpec& s, bool over) { s.batch_size = over ? 0 : 1; });
  CheckBoundary("batch_sizes[1]", [](JobSpec& s, bool over) {
    s.batch_sizes = {s.batch_size, kMaxBatchSize + (over ? 1 : 0)};
  });
}

TEST(JobLimitsTest, ArrayBoundaries) {
  CheckBoundary(
      "workers",
      [](JobSpec& s, bool over) {
        s.workers.clear();
        for (size_t i = 0; i < kMaxWorkersPerJob + over; ++i) {
          s.workers.push_back(absl::StrCat("w", i));
        }
      },
      "at most 16384 workers, got 16385");
  CheckBoundary("parameter_servers", [](JobSpec& s, bool over) {
    s.parameter_servers.clear();
    for (int i = 0; i < kMaxParameterServersPerJob + (over ? 1 : 0); ++i) {
      s.parameter_servers.push_back(absl::StrCat("ps", i));
    }
  });
  CheckBoundary(
      "batch_sizes",
      [](JobSpec& s, bool over) {
        s.batch_sizes.clear();
        for (size_t i = 0; i < kMaxBatchSizeChoices + over; ++i) {
          s.batch_sizes.push_back(static_cast<int>(i + 1));
        }
        s.batch_size = 1;
      },
      "at most 64 batch sizes, got 65");
}

TEST(JobLimitsTest, JobsPerFile) {
  auto file = [](size_t n) {
    std::string text = R"({"jobs": [)";
    for (size_t i = 0; i < n; ++i) {
      absl::StrAppend(&text, i ? ", " : "", R"({"name": "j)", i,
                      R"(", "workers": ["a", "b"], "gradient_bytes": 4, "compute_ms": 1, )",
                      R"("iterations": 1, "batch_size": 1})");
    }
    return text + "]}";
  };
  std::vector<Problem> problems;
  auto specs = ParseJobsFile(file(kMaxJobsPerFile), nullptr, &problems);
  ASSERT_TRUE(specs.has_value()) << FormatProblems(problems);
  EXPECT_EQ(specs->size(), kMaxJobsPerFile);
  EXPECT_FALSE(ParseJobsFile(file(kMaxJobsPerFile + 1), nullptr, &problems));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(FormatProblem(problems[0]), "jobs: at most 10000 jobs per file, got 10001");
}

TEST(JobLimitsTest, DecodedThroughJsonWithPaths) {
  std::vector<Problem> problems;
  EXPECT_FALSE(
      ParseJobsFile(absl::StrCat(R"({"jobs": [{"name": "a", "tenant": ")", std::string(64, 't'),
                                 R"(", "workers": ["h1", "h2"], "gradient_bytes": 1,
                                   "compute_ms": 1, "iterations": 1, "batch_size": 1}]})"),
                    nullptr, &problems));
  ASSERT_EQ(problems.size(), 1u) << FormatProblems(problems);
  EXPECT_EQ(problems[0].path, "jobs[0].tenant");
}

// --- Messages -------------------------------------------------------------------------------

// Every byte value: the escaped text is printable ASCII without space, and unescaping gives the
// input back.
TEST(MessageLimitsTest, EscapeForLogLeavesOnlyPrintableAsciiAndIsReversible) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string escaped = EscapeForLog(all);
  for (unsigned char c : escaped) EXPECT_TRUE(c > 0x20 && c < 0x7f) << static_cast<int>(c);
  std::string back;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      back.push_back(escaped[i]);
    } else if (escaped[i + 1] == 'x') {
      back.push_back(static_cast<char>(std::stoi(escaped.substr(i + 2, 2), nullptr, 16)));
      i += 3;
    } else {
      back.push_back(escaped[++i]);
    }
  }
  EXPECT_EQ(back, all);
  EXPECT_EQ(EscapeForLog("/api/v1/switches/s1"), "/api/v1/switches/s1");
  EXPECT_EQ(EscapeForLog("x\n2026 warning"), "x\\x0a2026\\x20warning");
  EXPECT_EQ(EscapeForLog("\x1b[31m"), "\\x1b[31m");
  EXPECT_EQ(EscapeForLog("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(EscapeForLog(""), "");
}

TEST(MessageLimitsTest, LongInputsAreNotEchoed) {
  EXPECT_EQ(QuoteForMessage("abc"), "\"abc\"");
  EXPECT_EQ(QuoteForMessage(std::string(64, 'a')), "\"" + std::string(64, 'a') + "\"");
  EXPECT_EQ(QuoteForMessage(std::string(65, 'a')), "\"" + std::string(64, 'a') + "...\"");
  // Never cut inside a UTF-8 character: byte 64 is the second byte of "é".
  std::string accented = std::string(63, 'a') + "\xc3\xa9" + "zzz";
  EXPECT_EQ(QuoteForMessage(accented), "\"" + std::string(63, 'a') + "...\"");

  std::vector<Problem> problems;
  const std::string huge(100000, 'm');
  EXPECT_FALSE(ParseJobsFile(absl::StrCat(R"({"jobs": [{"name": "a", "model": ")", huge,
                                          R"(", "workers": ["h1", "h2"], "iterations": 1,
                                          "batch_size": 1}]})"),
                             nullptr, &problems));
  ASSERT_FALSE(problems.empty());
  EXPECT_LT(FormatProblems(problems).size(), 1000u) << FormatProblems(problems).substr(0, 300);
}

TEST(MessageLimitsTest, ManyProblemsAreCounted) {
  std::vector<Problem> problems;
  for (int i = 0; i < 150; ++i) problems.push_back({absl::StrCat("hosts[", i, "].id"), "bad"});
  const std::string text = FormatProblems(problems);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 101);
  EXPECT_NE(text.find("hosts[99].id: bad\n... and 50 more problems\n"), std::string::npos);
  problems.resize(kMaxReportedProblems);
  EXPECT_EQ(FormatProblems(problems).find("more problems"), std::string::npos);
}

// --- The project's examples ------------------------------------------------------------------

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

TEST(ExamplesTest, EveryExampleParsesAndValidates) {
  const std::filesystem::path examples =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "examples";
  ASSERT_TRUE(std::filesystem::is_directory(examples)) << examples;
  int topologies = 0, job_files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(examples)) {
    if (entry.path().extension() != ".json") continue;
    // A Grafana dashboard, not an INAC format (checked by the grafana_dashboard test).
    if (entry.path().parent_path().filename() == "grafana") continue;
    SCOPED_TRACE(entry.path().string());
    const std::string text = ReadFile(entry.path());
    std::vector<Problem> problems;
    auto json = ParseJsonText(text, &problems);
    ASSERT_TRUE(json.has_value()) << FormatProblems(problems);
    ASSERT_TRUE(json->is_object());
    if (json->contains("jobs")) {
      // Validated against the topology beside it when there is one.
      std::optional<Topology> topology;
      const auto beside = entry.path().parent_path() / "topology.json";
      if (std::filesystem::exists(beside)) {
        topology = ParseTopology(ReadFile(beside), &problems);
        ASSERT_TRUE(topology.has_value()) << FormatProblems(problems);
      }
      auto specs = ParseJobsFile(text, topology ? &*topology : nullptr, &problems);
      ASSERT_TRUE(specs.has_value()) << FormatProblems(problems);
      EXPECT_FALSE(specs->empty());
      ++job_files;
    } else {
      EXPECT_TRUE(json->contains("switches") || json->contains("hosts") || json->contains("links"))
          << "neither a topology nor a job file";
      auto topology = ParseTopology(text, &problems);
      ASSERT_TRUE(topology.has_value()) << FormatProblems(problems);
      ++topologies;
    }
  }
  EXPECT_GE(topologies, 3);
  EXPECT_GE(job_files, 3);
}

}  // namespace
}  // namespace inac::core
