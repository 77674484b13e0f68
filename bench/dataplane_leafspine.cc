// `dataplane_bench leafspine`: many jobs on one data plane (docs/ina-pipeline.md, docs/agents.md
// "Congestion control"). A 2x2 leaf-spine of BMv2 switches (leaves lf0, lf1 and spines sp0, sp1,
// every switch INA-capable with 4096 aggregators, 5 hosts per leaf) under `inac serve` with its
// default settings (trees, esa); job one's workers are h0_0, h0_1, h1_0, h1_1 with PS h0_4, job
// two's h0_2, h0_3, h1_2, h1_3 with PS h1_4, so their trees share the spines. Per gradient size,
// side by side in one run: job one alone, then both jobs at once; each with the workers'
// congestion control (the default) and without it (`--no-congestion-control`: the whole grant
// sent as one burst, never shrunk on loss: the behaviour before congestion control).
//
// One JSON line per run (`dataplane_leafspine`): the time per iteration (median over the
// iterations of the slowest worker), the retransmissions per chunk (the workers' retransmissions
// / their first copies), the share of contributions aggregated in the network (the PSs'), and
// whether every sum was exact (`inac worker --check`); then one `dataplane_leafspine_summary`
// line per size: two jobs' iteration time / one job's (the target: <= 2.2, BMv2's packet rate is
// shared), their retransmissions per chunk (<= 0.05) and in-network shares (>= 0.99 without
// loss). Figures vary from invocation to invocation by tens of percent (BMv2 is a software switch
// on a 2-core machine shared with the agents); nothing is asserted here.
#include "bench/dataplane_leafspine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/json.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/system/harness.h"

namespace inac::bench {
namespace {

using core::Json;

struct JobHosts {
  std::vector<std::string> workers;
  std::string ps;
};

const std::vector<JobHosts>& Jobs() {
  static const std::vector<JobHosts> jobs = {{{"h0_0", "h0_1", "h1_0", "h1_1"}, "h0_4"},
                                             {{"h0_2", "h0_3", "h1_2", "h1_3"}, "h1_4"}};
  return jobs;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json LastObject(const std::string& log) {
  Json found;
  std::istringstream in(Slurp(log));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    Json j = Json::parse(line, nullptr, false);
    if (j.is_object()) found = std::move(j);
  }
  return found;
}

void Emit(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

struct Figures {
  bool ok = true;
  std::string error;
  double median_ms = 0;
  int64_t first_copies = 0, retransmissions = 0;
  int64_t contributions = 0, in_network = 0;
};

class LeafSpineLab {
 public:
  LeafSpineLab(std::string dir, std::string prefix, std::string bmv2)
      : dir_(std::move(dir)), prefix_(std::move(prefix)), bmv2_(std::move(bmv2)) {}
  ~LeafSpineLab() { Down(); }

  std::string Up() {
    core::Topology t = fixtures::LeafSpine(2, 2, 5, {.ina = core::InaPlacement::Kind::kAll});
    for (core::Switch& s : t.switches) s.ina.aggregators = 4096;
    const std::string file =
        systest::WriteFile(dir_ + "/input-topology.json", core::TopologyToJson(t).dump());
    lab_ = dir_ + "/lab";
    up_ = true;
    systest::CliRun up = systest::RunInac(absl::StrCat("lab up --topology ", file, " --dir ", lab_,
                                                       " --prefix ", prefix_, " --bmv2 ", bmv2_),
                                          dir_);
    if (up.exit != 0) return absl::StrCat("lab up exited ", up.exit, ": ", up.out);
    Json lab = Json::parse(Slurp(lab_ + "/lab.json"), nullptr, false);
    if (!lab.is_object() || !lab.contains("controller_url")) return "lab.json unreadable";
    url_ = lab["controller_url"].get<std::string>();
    host_port_ = url_.substr(url_.find("//") + 2);
    for (const Json& h : lab["hosts"]) ns_[h["id"]] = h["namespace"];
    return "";
  }

  void Down() {
    if (!up_) return;
    up_ = false;
    (void)systest::RunInac(absl::StrCat("lab down --dir ", lab_), dir_);
  }

  int64_t Submit(const JobHosts& hosts, int64_t size, std::string* error) {
    systest::Rest rest(host_port_);
    const Json job = fixtures::JobJson({.name = "leafspine",
                                        .workers = hosts.workers,
                                        .parameter_servers = {hosts.ps},
                                        .gradient_bytes = size,
                                        .compute_ms = 10,
                                        .iterations = 1000});
    return systest::SubmitAndAwaitRunning(rest, job, error);
  }

  void Cancel(int64_t id) {
    systest::Rest rest(host_port_);
    (void)rest.Delete(absl::StrCat("/jobs/", id));
  }

  // Runs the all-reduces of `jobs` (indices into Jobs()) at once; figures per job.
  std::vector<Figures> Run(const std::vector<size_t>& jobs, int64_t size, int iterations,
                           bool congestion_control) {
    std::vector<Figures> out(jobs.size());
    std::vector<int64_t> ids;
    for (size_t k = 0; k < jobs.size(); ++k) {
      ids.push_back(Submit(Jobs()[jobs[k]], size, &out[k].error));
      out[k].ok = ids.back() > 0;
    }
    std::vector<std::unique_ptr<systest::ChildProcess>> procs;
    std::vector<std::pair<size_t, std::string>> logs;  // (job index, log)
    for (size_t k = 0; k < jobs.size(); ++k) {
      if (ids[k] == 0) continue;
      auto start = [&](const std::string& verb, const std::string& flag, const std::string& host,
                       bool worker) {
        std::vector<std::string> args = {verb,
                                         "--job",
                                         absl::StrCat(ids[k]),
                                         flag,
                                         host,
                                         "--netns",
                                         ns_[host],
                                         "--server",
                                         url_,
                                         "--size",
                                         absl::StrCat(size),
                                         "--iterations",
                                         absl::StrCat(iterations),
                                         "--json"};
        if (worker) args.push_back("--check");
        if (worker && !congestion_control) args.push_back("--no-congestion-control");
        const std::string log = absl::StrCat(dir_, "/", verb, "-", ids[k], "-", host, ".log");
        auto p = systest::ChildProcess::Start(args, log);
        if (!p.ok()) {
          out[k].ok = false;
          out[k].error = p.status().ToString();
          return;
        }
        procs.push_back(*std::move(p));
        logs.push_back({k, log});
      };
      start("ps", "--ps", Jobs()[jobs[k]].ps, false);
      for (const std::string& w : Jobs()[jobs[k]].workers) start("worker", "--worker", w, true);
    }
    const absl::Time deadline = absl::Now() + absl::Minutes(10);
    std::vector<std::vector<double>> slowest(jobs.size(),
                                             std::vector<double>(static_cast<size_t>(iterations)));
    for (size_t i = procs.size(); i-- > 0;) {
      const int exit = procs[i]->Wait(std::max(absl::Seconds(1), deadline - absl::Now()));
      const auto& [k, log] = logs[i];
      Figures& f = out[k];
      const Json report = LastObject(log);
      if (exit != 0 && f.error.empty()) {
        f.ok = false;
        f.error = absl::StrCat(log, " exited ", exit, ": ", systest::LogTail(log, 400));
      }
      if (report.value("role", "") == "ps") {
        const Json c = report.value("contributions", Json::object());
        f.contributions += c.value("total", int64_t{0});
        f.in_network += c.value("in_network", int64_t{0});
        continue;
      }
      const Json p = report.value("packets", Json::object());
      f.retransmissions += p.value("retransmitted", int64_t{0});
      f.first_copies += p.value("sent", int64_t{0}) - p.value("retransmitted", int64_t{0});
      if (report.value("check", "") != "ok") f.ok = false;
      const Json its = report.value("iterations", Json::array());
      for (size_t n = 0; n < its.size() && n < slowest[k].size(); ++n) {
        slowest[k][n] = std::max(slowest[k][n], its[n].value("time_ms", 0.0));
      }
    }
    for (size_t k = 0; k < jobs.size(); ++k) {
      std::vector<double> v = slowest[k];
      std::sort(v.begin(), v.end());
      out[k].median_ms = v.empty() ? 0 : v[v.size() / 2];
      if (ids[k] > 0) Cancel(ids[k]);
    }
    return out;
  }

 private:
  std::string dir_, prefix_, bmv2_, lab_, url_, host_port_;
  std::map<std::string, std::string> ns_;
  bool up_ = false;
};

double Round(double v, int digits) {
  double scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  return static_cast<double>(static_cast<int64_t>(v * scale + 0.5)) / scale;
}

Json FiguresJson(const Figures& f) {
  Json j = {
      {"ok", f.ok},
      {"iteration_ms", Round(f.median_ms, 1)},
      {"retransmissions_per_chunk",
       f.first_copies > 0
           ? Round(static_cast<double>(f.retransmissions) / static_cast<double>(f.first_copies), 4)
           : 0.0},
      {"in_network_share",
       f.contributions > 0
           ? Round(static_cast<double>(f.in_network) / static_cast<double>(f.contributions), 4)
           : 0.0}};
  if (!f.error.empty()) j["error"] = f.error;
  return j;
}

}  // namespace

int RunLeafSpine(const std::string& bmv2, const std::vector<int64_t>& sizes, int iterations) {
  const std::string dir = systest::MakeTempDir("dataplane-leafspine");
  if (dir.empty()) {
    Emit({{"bench", "dataplane_leafspine"}, {"error", "cannot create a temporary folder"}});
    return 1;
  }
  LeafSpineLab lab(dir, absl::StrCat("dl", getpid() % 10000), bmv2);
  if (std::string e = lab.Up(); !e.empty()) {
    Emit({{"bench", "dataplane_leafspine"}, {"error", e}});
    return 1;
  }
  bool failed = false;
  for (int64_t size : sizes) {
    for (bool cc : {false, true}) {
      std::vector<Figures> alone = lab.Run({0}, size, iterations, cc);
      std::vector<Figures> both = lab.Run({0, 1}, size, iterations, cc);
      const std::string mode = cc ? "congestion_control" : "whole_window_burst";
      Json line = {{"bench", "dataplane_leafspine"},
                   {"size_bytes", size},
                   {"iterations", iterations},
                   {"workers", 4},
                   {"workers_pacing", mode},
                   {"one_job", FiguresJson(alone[0])},
                   {"two_jobs", {FiguresJson(both[0]), FiguresJson(both[1])}}};
      const double two = std::max(both[0].median_ms, both[1].median_ms);
      if (alone[0].median_ms > 0) {
        line["two_jobs_time_ratio"] = Round(two / alone[0].median_ms, 2);
      }
      Emit(line);
      for (const Figures& f : {alone[0], both[0], both[1]}) failed |= !f.ok;
    }
  }
  lab.Down();
  if (failed)
    std::fprintf(stderr, "dataplane_bench leafspine: logs kept in %s\n", dir.c_str());
  else
    std::filesystem::remove_all(dir);
  return failed ? 1 : 0;
}

}  // namespace inac::bench
