// End-to-end data-plane tests: real gradients summed by BMv2 switches running
// api/p4/ina.p4 under `inac serve`, between `inac worker` and `inac ps` agents in network
// namespaces. Each test builds a lab with `inac lab up` (one BMv2 per switch, one namespace per
// host, the controller), submits a job over REST, runs the PS and the workers in their namespaces
// with --check (every result lane equals the exact sum of every worker's synthetic gradient) and
// tears the lab down in TearDown, also after a failed assertion.
//
// Skipped, with the reason, without BMv2 (found like the interop tests) or without root (network
// namespaces). Labelled `dataplane`. Bounded waits only; figures are printed, never asserted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/dataplane/dataplane_fixture.h"

namespace inac::systest {
namespace {

TEST_F(DataplaneTest, OneSwitchFourWorkersEveryChunkAggregatedExactly) {
  StartLab(fixtures::LabStar(5, 4096));
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0", "h1", "h2", "h3"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("star", workers, "h4"));
  ASSERT_GT(job, 0);
  auto runs = RunAllReduce(job, workers, "h4", {"--size", "1048576"}, {"--size", "1048576"});
  // Every agent has exited: nothing is in flight once the packets queued in BMv2 are out.
  const int64_t finished_ms = absl::ToUnixMillis(absl::Now()) + 500;
  for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
  const AgentRun& ps = runs[0];
  std::printf("[ info ] ps report: %s\n", ps.report.dump().c_str());
  for (size_t i = 1; i < runs.size(); ++i) {
    std::printf("[ info ] worker %s: %s\n", runs[i].host.c_str(), runs[i].report.dump().c_str());
  }
  // The switch summed every worker's chunk exactly once; the only packets it sent on unaggregated
  // are the workers' retransmissions (a retransmission never aggregates: docs/ina-pipeline.md).
  const int64_t chunks = (1048576 / 4 + 61) / 62;
  int64_t retransmissions = 0;
  for (size_t i = 1; i < runs.size(); ++i) {
    retransmissions += runs[i].report.value("retransmissions", int64_t{0});
  }
  // Every contribution reached the PS inside an aggregate, except those a retransmission flushed
  // out of an aggregator early (at most one per retransmission).
  ASSERT_TRUE(ps.report.contains("contributions")) << ps.report.dump();
  const int64_t total = ps.report["contributions"]["total"].get<int64_t>();
  const int64_t in_network = ps.report["contributions"]["in_network"].get<int64_t>();
  EXPECT_EQ(total, 4 * chunks);
  EXPECT_LE(total - in_network, retransmissions);
  Json counters = AwaitCounters(job, finished_ms);
  std::printf("[ info ] switch counters: %s\n", counters.dump().c_str());
  EXPECT_EQ(counters["aggregated_packets"].get<int64_t>(), 4 * chunks);
  EXPECT_EQ(counters["fallback_packets"].get<int64_t>(), retransmissions);
  EXPECT_EQ(counters["preempted_packets"].get<int64_t>(), 0);
}

TEST_F(DataplaneTest, LeafSpineAggregatesAwayFromTheTorExactly) {
  const core::Topology t = SpineAggregatingLeafSpine();
  StartLab(t);
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0_0", "h0_1", "h0_2", "h1_0", "h1_1", "h1_2"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("leaf-spine", workers, "h1_3"));
  ASSERT_GT(job, 0);
  Rest rest(host_port_);
  Response config = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(config.status, 200);
  std::vector<std::string> aggregation_switches;
  for (const Json& tag : config.body["tags"]) {
    for (const Json& a : tag["aggregators"]) aggregation_switches.push_back(a["switch"]);
  }
  ASSERT_FALSE(aggregation_switches.empty()) << config.text;
  for (const std::string& s : aggregation_switches) EXPECT_EQ(s.rfind("sp", 0), 0u) << s;
  auto runs = RunAllReduce(job, workers, "h1_3", {"--size", "262144"}, {"--size", "262144"});
  for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
  std::printf("[ info ] ps report: %s\n", runs[0].report.dump().c_str());
  ASSERT_TRUE(runs[0].report.is_object()) << "no report from the PS";
  EXPECT_GT(runs[0].report.value("in_network_share", 0.0), 0.0);
}

// Two jobs share one switch's aggregator pool (ESA, the controller's default memory policy), each
// running a window of chunks larger than its grant, so their slots collide: the higher-priority
// job's packets evict the other job's partial sums (ESA preemption), which leave for their PS as
// FALLBACK, and both all-reduces stay exact.
TEST_F(DataplaneTest, TwoJobsBeyondTheirGrantsPreemptAndStayExact) {
  constexpr int64_t kPool = 128;
  StartLab(fixtures::LabStar(6, kPool));
  if (HasFatalFailure()) return;
  const std::vector<std::string> low_workers = {"h0", "h1"}, high_workers = {"h2", "h3"};
  const int64_t low = SubmitAndAwaitRunning(JobBody("low", low_workers, "h4", /*priority=*/1));
  ASSERT_GT(low, 0);
  const int64_t high = SubmitAndAwaitRunning(JobBody("high", high_workers, "h5", /*priority=*/9));
  ASSERT_GT(high, 0);
  // Both jobs aggregate at s0 with grants that together fit the pool.
  Rest rest(host_port_);
  int64_t granted = 0;
  for (int64_t job : {low, high}) {
    Response config = rest.Get(absl::StrCat("/jobs/", job, "/config"));
    ASSERT_EQ(config.status, 200);
    std::printf("[ info ] job %lld tags: %s\n", static_cast<long long>(job),
                config.body["tags"].dump().c_str());
    for (const Json& tag : config.body["tags"]) {
      ASSERT_EQ(tag["aggregators"].size(), 1u) << tag.dump();
      const Json& a = tag["aggregators"][0];
      EXPECT_EQ(a["aggregator_count"].get<int64_t>(), kPool) << "ESA shares the whole pool";
      granted += a["window"].get<int64_t>();
    }
  }
  ASSERT_GT(granted, 0);
  ASSERT_LE(granted, kPool);
  // Every worker runs the whole pool's worth of chunks at once: twice what both grants add up to
  // at most, so the two jobs' slots overlap. Without congestion control, so that the whole window
  // is out at once from the start (a congestion window that starts at 8 chunks keeps each job's
  // chunks in a few slots, and the two jobs then rarely meet in one).
  const std::vector<std::string> args = {"--size", "262144", "--window", absl::StrCat(kPool),
                                         "--no-congestion-control"};
  const std::vector<std::string> ps_args = {"--size", "262144"};
  // Whether the two runs' chunks meet in a slot while one holds a partial aggregate depends on
  // how the agents' processes are scheduled; on a loaded machine a run can miss it (seen on CI
  // about 1 in 10). The contention runs again once then: the counters are cumulative, and two
  // runs without a single preemption fail the test.
  Json low_counters, high_counters;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    AllReduce a = StartAllReduce(low, low_workers, "h4", args, ps_args);
    AllReduce b = StartAllReduce(high, high_workers, "h5", args, ps_args);
    std::vector<AgentRun> low_runs = Wait(std::move(a));
    std::vector<AgentRun> high_runs = Wait(std::move(b));
    const int64_t finished_ms = absl::ToUnixMillis(absl::Now()) + 500;
    for (const auto* runs : {&low_runs, &high_runs}) {
      for (const AgentRun& r : *runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
      std::printf("[ info ] ps %s: %s\n", (*runs)[0].host.c_str(),
                  (*runs)[0].report.dump().c_str());
    }
    low_counters = AwaitCounters(low, finished_ms);
    high_counters = AwaitCounters(high, finished_ms);
    if (low_counters.value("preempted_packets", int64_t{0}) > 0) break;
    std::printf("[ info ] attempt %d: no preemption observed; running the contention again\n",
                attempt);
  }
  std::printf("[ info ] low-priority job counters: %s\n", low_counters.dump().c_str());
  std::printf("[ info ] high-priority job counters: %s\n", high_counters.dump().c_str());
  // The low-priority job lost aggregators to the high-priority one; the reverse never happens.
  EXPECT_GT(low_counters.value("preempted_packets", int64_t{0}), 0);
  EXPECT_EQ(high_counters.value("preempted_packets", int64_t{0}), 0);
  // Both were still mostly aggregated in the network.
  EXPECT_GT(low_counters.value("aggregated_packets", int64_t{0}), 0);
  EXPECT_GT(high_counters.value("aggregated_packets", int64_t{0}), 0);
}

// The longest iteration of a worker's report, in ms.
double LongestIteration(const Json& report) {
  double longest = 0;
  for (const Json& it : report.value("iterations", Json::array())) {
    longest = std::max(longest, it.value("time_ms", 0.0));
  }
  return longest;
}

// A switch crashes (SIGKILL) while four workers all-reduce through it and comes back empty: the
// controller pushes its pipeline and entries again, the workers' retransmissions complete what
// was lost in its aggregators, and every sum is exact.
TEST_F(DataplaneTest, SwitchKilledMidRunIsRestoredAndSumsStayExact) {
  StartLab(fixtures::LabStar(5, 4096));
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0", "h1", "h2", "h3"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("crash", workers, "h4"));
  ASSERT_GT(job, 0);
  const std::vector<std::string> args = {"--size", "65536", "--iterations", "40"};
  AllReduce a = StartAllReduce(job, workers, "h4", args, args);
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(AllRunning(a)) << "the all-reduce ended before the crash: make it longer";
  CliRun restart = RunInac(absl::StrCat("lab switch restart s0 --dir ", dir_lab_), dir_);
  ASSERT_EQ(restart.exit, 0) << restart.out;
  std::vector<AgentRun> runs = Wait(std::move(a));
  for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
  double longest = 0;
  for (size_t i = 1; i < runs.size(); ++i)
    longest = std::max(longest, LongestIteration(runs[i].report));
  std::printf("[ info ] switch restarted mid-run: longest iteration %.0f ms; ps: %s\n", longest,
              runs[0].report.dump().c_str());
  ASSERT_TRUE(runs[0].report.is_object());
  EXPECT_EQ(runs[0].report.value("iterations_done", 0), 40);
  // The controller holds the switch in sync again.
  Rest rest(host_port_);
  Response sw = rest.Get("/switches/s0");
  ASSERT_EQ(sw.status, 200);
  EXPECT_TRUE(sw.body.value("in_sync", false)) << sw.text;
}

// A link the job's aggregation uses is cut while the job runs, and reported to the controller:
// it re-plans the job around the link (another aggregation, so new tags), the agents follow the
// new configuration, and every sum is exact.
TEST_F(DataplaneTest, LinkDownMidRunIsReplannedAndSumsStayExact) {
  const core::Topology t = SpineAggregatingLeafSpine();
  StartLab(t);
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0_0", "h0_1", "h0_2", "h1_0", "h1_1", "h1_2"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("cut", workers, "h1_3"));
  ASSERT_GT(job, 0);
  // A spine that aggregates a worker of leaf 0: its link to lf0 carries the job.
  Rest rest(host_port_);
  Response before = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(before.status, 200);
  std::string spine;
  for (const Json& tag : before.body["tags"]) {
    for (const Json& m : tag["members"]) {
      const std::string node = m["aggregation_node"];
      if (m["worker"].get<std::string>().rfind("h0_", 0) == 0 && node.rfind("sp", 0) == 0) {
        spine = node;
      }
    }
  }
  ASSERT_FALSE(spine.empty()) << "no spine aggregates a worker of lf0: " << before.text;
  const std::string link = LinkBetween(t, spine, "lf0");
  ASSERT_FALSE(link.empty());
  std::vector<AgentRun> runs =
      AllReduceCuttingLinkMidRun(job, workers, "h1_3", link, kIterationsAcrossACut);
  if (HasFatalFailure()) return;
  Response after = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(after.status, 200);
  std::printf("[ info ] %s cut mid-run: generation %d -> %d; ps: %s\n", link.c_str(),
              before.body.value("generation", -1), after.body.value("generation", -1),
              runs[0].report.dump().c_str());
  EXPECT_NE(after.body["tags"][0]["tag"], before.body["tags"][0]["tag"]) << "aggregated elsewhere";
  for (const Json& tag : after.body["tags"]) {  // lf0's workers cannot reach `spine` any more
    for (const Json& m : tag["members"]) {
      if (m["worker"].get<std::string>().rfind("h0_", 0) == 0) {
        EXPECT_NE(m["aggregation_node"], spine) << m.dump();
      }
    }
  }
  // Every agent ran under the first plan and then the re-plan.
  for (const AgentRun& r : runs) {
    ASSERT_TRUE(r.report.is_object()) << r.host;
    EXPECT_GE(r.report.value("plans", Json::array()).size(), 2u)
        << r.host << ": " << r.report.dump();
  }
  EXPECT_EQ(runs[0].report.value("iterations_done", 0), kIterationsAcrossACut);
  EXPECT_EQ(runs[0].report["packets"].value("violation", -1), 0);
}

// grid-split on BMv2: the controller splits every worker's gradient over both spines
// (one tag per chunk range, each range summed by its own spine), the switches sum the ranges
// exactly; then a spine link is cut mid-run and the re-plan aggregates the job on the other
// spine alone -- a new cut of the gradient -- which the agents follow within the iteration they
// are in (agent::CheckContinuation). Every sum is checked.
TEST_F(DataplaneTest, GridSplitRangesSumExactlyAndAReCutReplanIsFollowed) {
  const core::Topology t = SpineAggregatingLeafSpine();
  StartLab(t, "grid-split");
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0_0", "h0_1", "h0_2", "h1_0", "h1_1", "h1_2"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("split", workers, "h1_3"));
  ASSERT_GT(job, 0);
  Rest rest(host_port_);
  Response before = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(before.status, 200);
  // Ranges summed on both spines.
  std::set<std::string> spines;
  for (const Json& tag : before.body["tags"]) {
    for (const Json& a : tag["aggregators"]) spines.insert(a["switch"].get<std::string>());
  }
  ASSERT_GE(before.body["tags"].size(), 2u) << "grid-split did not split: " << before.text;
  ASSERT_EQ(spines, (std::set<std::string>{"sp0", "sp1"})) << before.text;
  const std::string link = LinkBetween(t, "sp0", "lf0");
  ASSERT_FALSE(link.empty());
  std::vector<AgentRun> runs =
      AllReduceCuttingLinkMidRun(job, workers, "h1_3", link, kIterationsAcrossACut);
  if (HasFatalFailure()) return;
  Response after = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(after.status, 200);
  auto ranges = [](const Json& config) {
    std::vector<std::pair<double, double>> out;
    for (const Json& tag : config["tags"]) out.push_back({tag["range"][0], tag["range"][1]});
    std::sort(out.begin(), out.end());
    return out;
  };
  std::printf("[ info ] grid-split: %zu ranges -> %zu after cutting %s mid-run; ps: %s\n",
              before.body["tags"].size(), after.body["tags"].size(), link.c_str(),
              runs[0].report.dump().c_str());
  EXPECT_NE(ranges(after.body), ranges(before.body)) << "the re-plan re-cut the gradient";
  for (const Json& tag : after.body["tags"]) {
    for (const Json& ag : tag["aggregators"]) EXPECT_NE(ag["switch"], "sp0") << tag.dump();
  }
  for (const AgentRun& r : runs) {
    ASSERT_TRUE(r.report.is_object()) << r.host;
    EXPECT_GE(r.report.value("plans", Json::array()).size(), 2u)
        << r.host << ": " << r.report.dump();
  }
  EXPECT_EQ(runs[0].report.value("iterations_done", 0), kIterationsAcrossACut);
  EXPECT_EQ(runs[0].report["packets"].value("violation", -1), 0);
  // The spines summed in the network: contributions that arrived aggregated.
  EXPECT_GT(runs[0].report["contributions"].value("in_network", 0), 0) << runs[0].report.dump();
}

class DataplaneLossTest : public DataplaneTest, public ::testing::WithParamInterface<int> {};

TEST_P(DataplaneLossTest, LossIsRepairedByRetransmissionAndSumsStayExact) {
  StartLab(fixtures::LabStar(4, 4096));
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0", "h1", "h2"};
  // tc netem where the kernel has it; otherwise the agents drop that share of what they send
  // (workers: chunks, PS: results), which the protocol sees exactly as loss on the link.
  std::vector<std::string> drop;
  for (const std::string h : {"h0", "h1", "h2", "h3"}) {
    const std::string cmd =
        absl::StrCat("ip netns exec ", ns_[h], " tc qdisc add dev eth0 root netem loss ",
                     GetParam(), "% 2>/dev/null");
    if (std::system(cmd.c_str()) != 0) {
      std::printf("[ info ] tc netem unavailable in this kernel: loss injected by the agents\n");
      drop = {"--drop-percent", absl::StrCat(GetParam())};
      break;
    }
  }
  const int64_t job = SubmitAndAwaitRunning(JobBody("lossy", workers, "h3"));
  ASSERT_GT(job, 0);
  std::vector<std::string> worker_args = {"--size", "262144"};
  worker_args.insert(worker_args.end(), drop.begin(), drop.end());
  std::vector<std::string> ps_args = {"--size", "262144"};
  ps_args.insert(ps_args.end(), drop.begin(), drop.end());
  auto runs = RunAllReduce(job, workers, "h3", worker_args, ps_args);
  int64_t retransmissions = 0;
  for (const AgentRun& r : runs) {
    EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
    if (r.host != "h3") retransmissions += r.report.value("retransmissions", int64_t{0});
  }
  std::printf("[ info ] %d %% loss: %lld retransmissions; ps: %s\n", GetParam(),
              static_cast<long long>(retransmissions), runs[0].report.dump().c_str());
  EXPECT_GT(retransmissions, 0) << "loss was injected: some chunk must have been sent again";
}

INSTANTIATE_TEST_SUITE_P(Loss, DataplaneLossTest, ::testing::Values(1, 5));

// Rina (docs/rina.md "Data plane"): a ring all-reduce job over one INA rack (lf0: an
// agent and two rack workers) and two plain racks (lf1, lf2: one member each). The controller
// plans it as Rina and pushes the rack's tag to lf0 and the ring hops' routes; the rack workers
// send to lf0, which sums them toward the agent; the agent adds its own gradient, runs the ring
// with the two members through lf0, sp0, lf1, lf2 and sends the result to lf0, which multicasts it
// to the rack. Every worker checks every lane against the exact sum of all five gradients. The
// measured goodput and the plan's prediction are printed (docs/rina.md has them).
TEST_F(DataplaneTest, RinaRingAllReduceAggregatesTheRackAtItsTorExactly) {
  core::Topology t = LeafSpine(3, 1, 3, {.ina = core::InaPlacement::Kind::kAll});
  for (core::Switch& s : t.switches) {
    if (s.id != "lf0") s.ina = core::InaConfig{};
  }
  StartLab(t);
  if (HasFatalFailure()) return;
  constexpr int64_t kBytes = 65536, kIterations = 5;
  const std::vector<std::string> workers = {"h0_0", "h0_1", "h0_2", "h1_0", "h2_0"};
  Json body = fixtures::JobJson({.name = "rina",
                                 .workers = workers,
                                 .gradient_bytes = kBytes,
                                 .compute_ms = 10,
                                 .iterations = 1000});
  body["allreduce"] = "ring";
  const int64_t job = SubmitAndAwaitRunning(body);
  ASSERT_GT(job, 0);
  Rest rest(host_port_);
  Response config = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(config.status, 200);
  std::map<std::string, std::string> role;
  for (const Json& r : config.body["ring_roles"]) role[r["worker"]] = r["role"];
  std::printf("[ info ] ring %s, roles %s, tags %s\n", config.body["ring"].dump().c_str(),
              config.body["ring_roles"].dump().c_str(), config.body["tags"].dump().c_str());
  ASSERT_EQ(config.body["ring"].size(), 3u) << config.text;
  std::string agent;
  for (const auto& [w, r] : role) {
    if (r == "agent") agent = w;
  }
  ASSERT_EQ(agent.rfind("h0_", 0), 0u) << config.text;
  EXPECT_EQ(role["h1_0"], "member");
  EXPECT_EQ(role["h2_0"], "member");
  ASSERT_EQ(config.body["tags"].size(), 1u);
  ASSERT_EQ(config.body["tags"][0]["aggregators"].size(), 1u);
  EXPECT_EQ(config.body["tags"][0]["aggregators"][0]["switch"], "lf0");
  // The agent first (Wait gives runs[0] 30 s after the others).
  std::vector<std::string> order = {agent};
  for (const std::string& w : workers) {
    if (w != agent) order.push_back(w);
  }
  AllReduce a;
  for (const std::string& w : order) {
    const std::vector<std::string> args = {"worker",
                                           "--job",
                                           absl::StrCat(job),
                                           "--worker",
                                           w,
                                           "--netns",
                                           ns_[w],
                                           "--server",
                                           url_,
                                           "--json",
                                           "--check",
                                           "--size",
                                           absl::StrCat(kBytes),
                                           "--iterations",
                                           absl::StrCat(kIterations),
                                           "--give-up-ms",
                                           "20000",
                                           "--window",
                                           "16",
                                           "--timeout-ms",
                                           "50"};
    const std::string log = absl::StrCat(dir_, "/worker-", job, "-", w, ".log");
    auto p = ChildProcess::Start(args, log);
    ASSERT_TRUE(p.ok()) << p.status();
    a.procs.push_back(*std::move(p));
    a.runs.push_back({w, -1, Json(), log});
  }
  const int64_t started_ms = absl::ToUnixMillis(absl::Now());
  std::vector<AgentRun> runs = Wait(std::move(a), absl::Seconds(60));
  const int64_t finished_ms = absl::ToUnixMillis(absl::Now()) + 500;
  double slowest_ms = 0;
  for (const AgentRun& r : runs) {
    EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
    ASSERT_TRUE(r.report.is_object()) << r.host << ": no report";
    EXPECT_EQ(r.report.value("check", ""), "ok") << r.host << ": " << r.report.dump();
    slowest_ms = std::max(slowest_ms, r.report.value("time_ms", 0.0));
    std::printf("[ info ] %s (%s): %s\n", r.host.c_str(), role[r.host].c_str(),
                r.report.dump().c_str());
  }
  // The agent counted each rack worker's chunk once per iteration, most of them summed by lf0.
  const Json& rack = runs[0].report["rack"];
  ASSERT_TRUE(rack.is_object()) << runs[0].report.dump();
  const int64_t chunks = (kBytes / 4 + 61) / 62;
  EXPECT_EQ(rack["contributions"]["total"].get<int64_t>(), 2 * chunks * kIterations);
  EXPECT_GT(rack["contributions"]["in_network"].get<int64_t>(), 0);
  EXPECT_EQ(rack["packets"]["violation"].get<int64_t>(), 0);
  Json counters = AwaitCounters(job, finished_ms);
  std::printf("[ info ] switch counters: %s\n", counters.dump().c_str());
  EXPECT_GT(counters.value("aggregated_packets", int64_t{0}), 0);
  // Goodput (algbw: gradient bytes / mean iteration time of the slowest worker) against the
  // plan's prediction (gradient bytes / comm_ms).
  Response plan = rest.Get("/plan");
  ASSERT_EQ(plan.status, 200);
  double comm_ms = 0;
  for (const Json& jp : plan.body["jobs"]) {
    if (jp.value("job_id", int64_t{0}) == job) comm_ms = jp.value("comm_ms", 0.0);
  }
  const double measured_gbps = slowest_ms > 0 ? kBytes * 8 / (slowest_ms * 1e6) : 0;
  const double predicted_gbps = comm_ms > 0 ? kBytes * 8 / (comm_ms * 1e6) : 0;
  std::printf(
      "[ info ] rina through BMv2: %lld bytes x %lld iterations in %.1f s; mean iteration %.1f ms"
      " (slowest worker): algbw %.4f Gbps measured, %.2f Gbps predicted by the plan (comm %.4f"
      " ms), ratio %.5f\n",
      static_cast<long long>(kBytes), static_cast<long long>(kIterations),
      (finished_ms - 500 - started_ms) / 1000.0, slowest_ms, measured_gbps, predicted_gbps, comm_ms,
      predicted_gbps > 0 ? measured_gbps / predicted_gbps : 0.0);
}

}  // namespace
}  // namespace inac::systest
