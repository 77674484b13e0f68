// The fixture of the end-to-end data-plane tests (dataplane_test.cc, sharing_test.cc): an `inac
// lab` (one BMv2 per switch, one namespace per host, the controller) built per test, jobs
// submitted over REST, `inac worker --check` / `inac ps` run in the hosts' namespaces, and the
// lab torn down in TearDown, also after a failed assertion. Skips, with the reason, without
// BMv2 (found like the interop tests) or without root (network namespaces). Bounded waits only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "core/generators.h"
#include "core/json.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace inac::systest {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last line of `text` that parses as a JSON object (the agents' --json output).
inline Json LastJsonObject(const std::string& text) {
  Json found;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) found = std::move(j);
  }
  return found;
}

// 2 leaves, 2 spines, 4 hosts per leaf (hI_J on leaf lfI); only the spines aggregate.
inline core::Topology SpineAggregatingLeafSpine() {
  core::Topology t = LeafSpine(2, 2, 4, {.ina = core::InaPlacement::Kind::kAll});
  for (core::Switch& s : t.switches) {
    if (s.id.rfind("lf", 0) == 0) s.ina = core::InaConfig{};
  }
  return t;
}

class DataplaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    if (!interop::FindBmv2().has_value()) {
      GTEST_SKIP() << "BMv2 not found: " << interop::Bmv2SearchDescription();
    }
    dir_ = MakeTempDir("dataplane");
    ASSERT_FALSE(dir_.empty());
    // A short prefix unique to this process and test, for namespace and interface names.
    prefix_ = absl::StrCat("d", getpid() % 1000, counter_++);
  }

  void TearDown() override {
    if (lab_up_) {
      CliRun down = RunInac(absl::StrCat("lab down --dir ", dir_lab_), dir_);
      EXPECT_EQ(down.exit, 0) << down.out;
    }
    if (HasFailure() && !dir_.empty()) {
      std::printf("[ info ] lab files and logs kept in %s\n", dir_.c_str());
    } else if (!dir_.empty()) {
      std::string rm = "rm -rf '" + dir_ + "'";
      (void)!std::system(rm.c_str());
    }
  }

  // `inac lab up` on `topology` (with the controller, planning with `algorithm` and
  // `memory_policy` if given); reads
  // the lab's namespaces and URL.
  void StartLab(const core::Topology& topology, const std::string& algorithm = "",
                const std::string& memory_policy = "") {
    const std::string file =
        WriteFile(dir_ + "/input-topology.json", core::TopologyToJson(topology).dump());
    std::string args =
        absl::StrCat("lab up --topology ", file, " --dir ", dir_ + "/lab", " --prefix ", prefix_);
    if (!algorithm.empty()) absl::StrAppend(&args, " --algorithm ", algorithm);
    if (!memory_policy.empty()) absl::StrAppend(&args, " --memory-policy ", memory_policy);
    lab_up_ = true;
    dir_lab_ = dir_ + "/lab";
    CliRun up = RunInac(args, dir_);
    ASSERT_EQ(up.exit, 0) << up.out;
    Json lab = Json::parse(ReadAll(dir_lab_ + "/lab.json"), nullptr, false);
    ASSERT_TRUE(lab.is_object()) << "lab.json unreadable";
    url_ = lab["controller_url"].get<std::string>();
    for (const Json& h : lab["hosts"]) ns_[h["id"]] = h["namespace"];
    host_port_ = url_.substr(url_.find("//") + 2);
  }

  // Submits a job; returns its id once it is running (every switch programmed).
  int64_t SubmitAndAwaitRunning(const Json& job) {
    Rest rest(host_port_);
    Response r = rest.Post("/jobs", job);
    EXPECT_EQ(r.status, 201) << r.text;
    if (r.status != 201) return 0;
    const int64_t id = r.body["id"].get<int64_t>();
    for (int i = 0; i < 300; ++i) {
      Response g = rest.Get(absl::StrCat("/jobs/", id));
      if (g.status == 200 && g.body["state"] == "running") return id;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " not running within 30 s";
    return 0;
  }

  struct AgentRun {
    std::string host;
    int exit = -1;
    Json report;
    std::string log;
  };

  // The agents of one all-reduce, started and not yet waited for.
  struct AllReduce {
    std::vector<std::unique_ptr<ChildProcess>> procs;
    std::vector<AgentRun> runs;  // runs[0] is the PS
  };

  // Starts `inac ps` on `ps` and `inac worker --check` on every worker of the job, in their
  // namespaces.
  AllReduce StartAllReduce(int64_t job, const std::vector<std::string>& workers,
                           const std::string& ps, const std::vector<std::string>& worker_extra = {},
                           const std::vector<std::string>& ps_extra = {}) {
    AllReduce a;
    auto start = [&](const std::string& verb, const std::string& flag, const std::string& host,
                     const std::vector<std::string>& extra) {
      std::vector<std::string> args = {verb,      "--job",   absl::StrCat(job), flag, host,
                                       "--netns", ns_[host], "--server",        url_, "--json"};
      args.insert(args.end(), extra.begin(), extra.end());
      const std::string log = absl::StrCat(dir_, "/", verb, "-", job, "-", host, ".log");
      auto p = ChildProcess::Start(args, log);
      EXPECT_TRUE(p.ok()) << p.status();
      if (!p.ok()) return;
      a.procs.push_back(*std::move(p));
      a.runs.push_back({host, -1, Json(), log});
    };
    start("ps", "--ps", ps, ps_extra);
    for (const std::string& w : workers) {
      std::vector<std::string> extra = {"--check"};
      extra.insert(extra.end(), worker_extra.begin(), worker_extra.end());
      start("worker", "--worker", w, extra);
    }
    return a;
  }

  // Waits for every agent of `a`: the workers (they finish when every result arrived) until
  // `deadline`, then the PS for at most 30 s more. An agent still running then gets SIGTERM,
  // which makes it print its report (and exit 1).
  std::vector<AgentRun> Wait(AllReduce a, absl::Duration timeout = absl::Seconds(240)) {
    const absl::Time deadline = absl::Now() + timeout;
    for (size_t i = a.procs.size(); i-- > 0;) {
      const absl::Duration left =
          i == 0 ? absl::Seconds(30) : std::max(deadline - absl::Now(), absl::Seconds(1));
      a.runs[i].exit = a.procs[i]->Wait(left, SIGTERM);
      a.runs[i].report = LastJsonObject(ReadAll(a.runs[i].log));
      if (a.runs[i].exit != 0)
        std::printf("--- %s ---\n%s\n", a.runs[i].log.c_str(), LogTail(a.runs[i].log).c_str());
    }
    return std::move(a.runs);
  }

  // True when every agent of `a` still runs (a fault injected now happens mid-run).
  static bool AllRunning(AllReduce& a) {
    for (auto& p : a.procs) {
      if (p->Exited()) return false;
    }
    return true;
  }

  std::vector<AgentRun> RunAllReduce(int64_t job, const std::vector<std::string>& workers,
                                     const std::string& ps,
                                     const std::vector<std::string>& worker_extra = {},
                                     const std::vector<std::string>& ps_extra = {}) {
    return Wait(StartAllReduce(job, workers, ps, worker_extra, ps_extra));
  }

  // GET /jobs/{id}'s ina_counters from a read of every switch made after `after_ms` (Unix ms),
  // so that nothing the agents sent is still uncounted (bounded wait; the controller reads each
  // switch every 2 s).
  Json AwaitCounters(int64_t job, int64_t after_ms) {
    Rest rest(host_port_);
    Json counters;
    for (int i = 0; i < 100; ++i) {
      Response g = rest.Get(absl::StrCat("/jobs/", job));
      if (g.status == 200 && g.body.contains("ina_counters")) {
        counters = g.body["ina_counters"];
        bool fresh = !counters["switches"].empty();
        for (const Json& s : counters["switches"]) fresh &= s["read_ms"].get<int64_t>() > after_ms;
        if (fresh) break;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return counters;
  }

  // The id of the link between `a` and `b` in `t` (either direction); "" if none.
  static std::string LinkBetween(const core::Topology& t, const std::string& a,
                                 const std::string& b) {
    for (const core::Link& l : t.links) {
      if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return l.id;
    }
    return "";
  }

  // The job's all-reduce (`iterations` of 64 KiB; the agents poll for re-plans every 200 ms) with
  // `link` cut 1 s into it: in the lab, then reported to the controller (PATCH /links). Waits
  // for every agent; a fatal failure when the run ended before the cut or the cut failed. BMv2
  // carries one 64 KiB iteration of six workers in ~0.2 s, so callers ask for enough iterations
  // (kIterationsAcrossACut) that the run outlasts the cut and the re-plan several times over.
  static constexpr int kIterationsAcrossACut = 30;
  std::vector<AgentRun> AllReduceCuttingLinkMidRun(int64_t job,
                                                   const std::vector<std::string>& workers,
                                                   const std::string& ps, const std::string& link,
                                                   int iterations) {
    const std::vector<std::string> args = {
        "--size", "65536", "--iterations", absl::StrCat(iterations), "--refresh-ms", "200"};
    AllReduce a = StartAllReduce(job, workers, ps, args, args);
    absl::SleepFor(absl::Seconds(1));
    if (!AllRunning(a)) {
      ADD_FAILURE() << "the all-reduce ended before the cut: make it longer";
      return Wait(std::move(a));
    }
    CliRun cut = RunInac(absl::StrCat("lab link down ", link, " --dir ", dir_lab_), dir_);
    EXPECT_EQ(cut.exit, 0) << cut.out;
    Rest rest(host_port_);
    Response patched = rest.Patch(absl::StrCat("/links/", link), Json{{"status", "down"}});
    EXPECT_EQ(patched.status, 200) << patched.text;
    std::vector<AgentRun> runs = Wait(std::move(a));
    for (const AgentRun& r : runs) EXPECT_EQ(r.exit, 0) << r.host << " (log " << r.log << ")";
    return runs;
  }

  Json JobBody(const std::string& name, const std::vector<std::string>& workers,
               const std::string& ps, int priority = 0) {
    return fixtures::JobJson({.name = name,
                              .priority = priority,
                              .workers = workers,
                              .parameter_servers = {ps},
                              .gradient_bytes = 1 << 20,
                              .compute_ms = 10,
                              .iterations = 1000});
  }

  static inline int counter_ = 0;
  std::string dir_, dir_lab_, prefix_, url_, host_port_;
  std::map<std::string, std::string> ns_;
  bool lab_up_ = false;
};

}  // namespace inac::systest
