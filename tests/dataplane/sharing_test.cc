// Many jobs on one data plane, on BMv2 (docs/ina-pipeline.md "Slots along chains", "Reclaiming";
// docs/agents.md "Congestion control"): jobs whose aggregation trees share chained switches each
// aggregate every chunk in the network; a cancelled job's partial sums do not keep the next job
// from the aggregators it held; and three jobs under every memory policy stay exact through
// cancels, resubmissions and a switch restart, aggregating in the network afterwards.
//
// Each test runs real `inac serve`, BMv2 switches and agents in an `inac lab`
// (tests/dataplane/dataplane_fixture.h); skipped with the reason without BMv2 or root.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/dataplane/dataplane_fixture.h"

namespace inac::systest {
namespace {

// A line of switches: s1 and s2 hang off s3 (all INA-capable, 4096 aggregators). Hosts: h1, h6,
// h9 on s1; h2, h7, h10 on s2; h3, h4, h5, h8 on s3 (the PSs), 10 Gbps links.
core::Topology ChainedLine() {
  core::Topology t;
  for (const char* id : {"s1", "s2", "s3"}) {
    core::Switch s;
    s.id = id;
    s.ina.capable = true;
    s.ina.processing_gbps = 100;
    s.ina.aggregators = 4096;
    t.switches.push_back(s);
  }
  auto link = [&](const std::string& a, const std::string& b) {
    core::Link l;
    l.a = a;
    l.b = b;
    l.id = core::DefaultLinkId(a, b);
    l.gbps = 10;
    t.links.push_back(l);
  };
  link("s1", "s3");
  link("s2", "s3");
  const std::vector<std::pair<const char*, const char*>> hosts = {
      {"h1", "s1"},  {"h6", "s1"}, {"h9", "s1"}, {"h2", "s2"}, {"h7", "s2"},
      {"h10", "s2"}, {"h3", "s3"}, {"h4", "s3"}, {"h5", "s3"}, {"h8", "s3"}};
  for (const auto& [h, s] : hosts) {
    core::Host host;
    host.id = h;
    t.hosts.push_back(host);
    link(h, s);
  }
  return t;
}

struct JobShape {
  std::string name;
  std::vector<std::string> workers;
  std::string ps;
};

// A: a worker on s1 and one on s2; B: one on each switch; C: like A. Every job's workers are its
// own hosts (an agent owns its host's INA port), and every tree spans the chain s1, s2 -> s3.
const std::vector<JobShape>& Shapes() {
  static const std::vector<JobShape> shapes = {
      {"a", {"h1", "h2"}, "h4"}, {"b", {"h6", "h7", "h3"}, "h5"}, {"c", {"h9", "h10"}, "h8"}};
  return shapes;
}

class SharingTest : public DataplaneTest {
 protected:
  // The share of the PS's contributions that arrived aggregated (in packets of 2 or more).
  static double InNetwork(const Json& ps) {
    if (!ps.contains("contributions")) return 0;
    const double total = ps["contributions"].value("total", 0);
    return total > 0 ? ps["contributions"].value("in_network", 0) / total : 0;
  }

  // The workers' retransmissions in `runs` (runs[0] is the PS).
  static int64_t Retransmissions(const std::vector<AgentRun>& runs) {
    int64_t n = 0;
    for (size_t i = 1; i < runs.size(); ++i) {
      n += runs[i].report.value("packets", Json::object()).value("retransmitted", int64_t{0});
    }
    return n;
  }

  // Aggregated in the network as the data plane allows: >= 99 % of the contributions when no
  // chunk was retransmitted. A retransmission (a timeout: a lost packet, or a chunk that waited
  // too long for a slower worker) never aggregates and flushes at most one partial sum, so
  // otherwise every contribution that reached the PS outside an aggregate must be owed to one:
  // at most 2 per retransmission (its own first copy and one flushed partner); and >= 97 % in
  // any case (misaligned slots or blocked aggregators leave nearly nothing aggregated).
  static void ExpectAggregated(const std::vector<AgentRun>& runs, const std::string& name) {
    const Json& ps = runs[0].report;
    const int64_t total = ps.value("contributions", Json::object()).value("total", int64_t{0});
    const int64_t in = ps.value("contributions", Json::object()).value("in_network", int64_t{0});
    const int64_t retransmissions = Retransmissions(runs);
    std::printf(
        "[ info ] job %s: %lld of %lld contributions in the network, %lld retransmissions\n",
        name.c_str(), static_cast<long long>(in), static_cast<long long>(total),
        static_cast<long long>(retransmissions));
    ASSERT_GT(total, 0) << "job " << name << ": no report from its PS";
    if (retransmissions == 0) {
      EXPECT_GE(InNetwork(ps), 0.99) << "job " << name << ": " << ps.dump();
    } else {
      EXPECT_LE(total - in, 2 * retransmissions) << "job " << name << ": " << ps.dump();
      EXPECT_GE(InNetwork(ps), 0.97) << "job " << name << ": " << ps.dump();
    }
  }

  // Runs the all-reduces of `jobs` (ids) side by side with `args`; expects every agent to exit 0
  // (--check: exact sums); returns each job's runs.
  std::vector<std::vector<AgentRun>> RunTogether(const std::vector<int64_t>& ids,
                                                 const std::vector<size_t>& shapes,
                                                 const std::vector<std::string>& args) {
    std::vector<AllReduce> running;
    for (size_t k = 0; k < ids.size(); ++k) {
      const JobShape& s = Shapes()[shapes[k]];
      running.push_back(StartAllReduce(ids[k], s.workers, s.ps, args, args));
    }
    std::vector<std::vector<AgentRun>> out;
    for (AllReduce& a : running) out.push_back(Wait(std::move(a)));
    for (const auto& runs : out) {
      for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
    }
    return out;
  }

  // The switches that aggregate any tag of `job` (GET /jobs/{id}/config).
  std::set<std::string> AggregationSwitches(int64_t job) {
    Rest rest(host_port_);
    Response config = rest.Get(absl::StrCat("/jobs/", job, "/config"));
    EXPECT_EQ(config.status, 200);
    std::set<std::string> out;
    for (const Json& tag : config.body.value("tags", Json::array())) {
      for (const Json& a : tag["aggregators"]) out.insert(a["switch"].get<std::string>());
    }
    return out;
  }
};

// Two and three jobs whose trees share the chained switches (ATP's two levels: s1 and s2 children
// of s3) each aggregate every chunk in the network that no retransmission took out of an
// aggregator (ExpectAggregated: >= 99 % without retransmissions).
class ChainedSharingTest : public SharingTest, public ::testing::WithParamInterface<int> {};

TEST_P(ChainedSharingTest, EveryJobAggregatesInTheNetwork) {
  const int jobs = GetParam();
  StartLab(ChainedLine(), "atp", "atp");
  if (HasFatalFailure()) return;
  std::vector<int64_t> ids;
  std::vector<size_t> shapes;
  for (int k = 0; k < jobs; ++k) {
    const JobShape& s = Shapes()[k];
    ids.push_back(SubmitAndAwaitRunning(JobBody(s.name, s.workers, s.ps)));
    ASSERT_GT(ids.back(), 0);
    shapes.push_back(k);
  }
  const std::set<std::string> b = AggregationSwitches(ids[1]);
  ASSERT_EQ(b, (std::set<std::string>{"s1", "s2", "s3"})) << "job b is not chained under s3";
  auto runs = RunTogether(ids, shapes, {"--size", "262144", "--iterations", "2"});
  for (int k = 0; k < jobs; ++k) ExpectAggregated(runs[k], Shapes()[k].name);
}

INSTANTIATE_TEST_SUITE_P(Jobs, ChainedSharingTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "Jobs");
                         });

// A job cancelled while its partial sums sit in the switch's aggregators (one of its workers
// never sends, so none completes; the RTO is long, so nothing is flushed) leaves them behind. The
// next job of the same priority on the same workers is granted the same aggregators: they are
// free for it at once (ina_live), and it aggregates >= 99 % in the network.
TEST_F(SharingTest, CancelledJobsAggregatorsServeTheNextJobAtOnce) {
  StartLab(fixtures::LabStar(5, 64));
  if (HasFatalFailure()) return;
  const int64_t first = SubmitAndAwaitRunning(JobBody("first", {"h0", "h1", "h2"}, "h4"));
  ASSERT_GT(first, 0);
  // h0 and h1 fill the whole window with partial sums that wait for h2 forever.
  const std::vector<std::string> hold = {"--size",       "262144",       "--no-congestion-control",
                                         "--timeout-ms", "20000",        "--max-timeout-ms",
                                         "20000",        "--give-up-ms", "60000"};
  AllReduce partial = StartAllReduce(first, {"h0", "h1"}, "h4", hold, {"--size", "262144"});
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(AllRunning(partial)) << "the first job's agents ended early";
  Rest rest(host_port_);
  Response cancelled = rest.Delete(absl::StrCat("/jobs/", first));
  ASSERT_EQ(cancelled.status, 200) << cancelled.text;
  for (auto& p : partial.procs) p->Wait(absl::Seconds(5), SIGTERM);
  const int64_t next = SubmitAndAwaitRunning(JobBody("next", {"h0", "h1"}, "h4"));
  ASSERT_GT(next, 0);
  auto runs = RunAllReduce(next, {"h0", "h1"}, "h4", {"--size", "262144"}, {"--size", "262144"});
  for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
  ExpectAggregated(runs, "next");
}

// Churn: three jobs share the chained switches under one memory policy; mid-run one job is
// cancelled and resubmitted on the same workers and s3 is restarted (the controller restores its
// pipeline and entries). Every sum stays exact and no job is stuck; afterwards every surviving job
// aggregates >= 95 % in the network.
class ChurnTest : public SharingTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ChurnTest, CancelsResubmissionsAndASwitchRestartStayExact) {
  StartLab(ChainedLine(), "atp", GetParam());
  if (HasFatalFailure()) return;
  std::vector<int64_t> ids;
  for (size_t k = 0; k < 3; ++k) {
    const JobShape& s = Shapes()[k];
    ids.push_back(SubmitAndAwaitRunning(JobBody(s.name, s.workers, s.ps)));
    ASSERT_GT(ids.back(), 0);
  }
  const std::vector<std::string> args = {"--size", "65536",        "--iterations",
                                         "30",     "--refresh-ms", "200"};
  std::vector<AllReduce> running;
  for (size_t k = 0; k < 3; ++k) {
    running.push_back(StartAllReduce(ids[k], Shapes()[k].workers, Shapes()[k].ps, args, args));
  }
  absl::SleepFor(absl::Seconds(1));
  // Job c leaves mid-run and comes back on the same workers.
  Rest rest(host_port_);
  Response cancelled = rest.Delete(absl::StrCat("/jobs/", ids[2]));
  EXPECT_EQ(cancelled.status, 200) << cancelled.text;
  for (auto& p : running[2].procs) p->Wait(absl::Seconds(5), SIGTERM);
  ids[2] = SubmitAndAwaitRunning(JobBody("c2", Shapes()[2].workers, Shapes()[2].ps));
  ASSERT_GT(ids[2], 0);
  running[2] = StartAllReduce(ids[2], Shapes()[2].workers, Shapes()[2].ps, args, args);
  absl::SleepFor(absl::Seconds(1));
  CliRun restart = RunInac(absl::StrCat("lab switch restart s3 --dir ", dir_lab_), dir_);
  EXPECT_EQ(restart.exit, 0) << restart.out;
  for (size_t k = 0; k < 3; ++k) {
    std::vector<AgentRun> runs = Wait(std::move(running[k]));
    for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
    std::printf("[ info ] %s churn: job %s ps %s\n", GetParam().c_str(), Shapes()[k].name.c_str(),
                runs[0].report.dump().c_str());
  }
  // After the churn: every job aggregates in the network again.
  auto after = RunTogether(ids, {0, 1, 2}, {"--size", "262144"});
  for (size_t k = 0; k < 3; ++k) {
    const Json& ps = after[k][0].report;
    std::printf("[ info ] %s after churn: job %s ps %s\n", GetParam().c_str(),
                Shapes()[k].name.c_str(), ps.dump().c_str());
    EXPECT_GE(InNetwork(ps), 0.95) << "job " << Shapes()[k].name << ": " << ps.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ChurnTest, ::testing::Values("esa", "atp", "switchml"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace inac::systest
