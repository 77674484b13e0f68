// All-reduce goodput through BMv2 with in-network aggregation against the same workers through the
// parameter server alone, and the flow model's prediction of both. Prints one
// JSON line per figure:
//  - dataplane_allreduce, one per run: 4 workers and 1 PS on one BMv2 switch (a star), `inac
//    worker --check` / `inac ps` in the namespaces of an `inac lab`, under `inac serve` with its
//    default settings (grid, esa: the workers' window is the controller's grant). Runs: `ina`
//    (the switch is INA-capable and sums the chunks), then, in a second lab whose switch is not
//    INA-capable (so the plan aggregates nothing and every chunk goes to the PS),
//    `ps_alone_multicast` (the PS sends one result per chunk and the switch replicates it down the
//    job's tree: the controller's intent) and `ps_alone_unicast` (`inac ps --unicast-results`).
//    Figures: the all-reduce time of each iteration (the slowest worker's), its median, algbw =
//    gradient / median time (MB/s, 10^6 bytes), the PS's in-network share, the workers'
//    retransmissions, the packets the switch took in and sent out (from the agents' counters,
//    what they sent and received: the switch's own counters count aggregation only) and those per
//    second of all-reduce (the sum of the iteration times), and BMv2's CPU time over the run
//    (/proc/PID/stat): cores busy during the iterations and CPU per packet taken in.
//  - dataplane_packet_rate: BMv2's measured packet rate R = packets into the switch over the runs
//    in which BMv2 was saturated (>= 0.9 cores busy; all runs if none) / their summed iteration
//    times, and the link capacity that carries R packets/s of the
//    on-wire INA frame (Ethernet 14 + IPv4 20 + UDP 8 + INA header 24 + 62 x 4 lanes = 314 bytes,
//    api/p4/ina.p4; no preamble, FCS or gap: veths carry none).
//  - dataplane_speedup: INA speedup = median time of a PS-alone run / that of the INA run.
//  - dataplane_switch_budget: what one packet budget for the whole switch predicts: the packets
//    the switch takes in per chunk under the contract (no retransmissions: INA and PS alone 4 + 1,
//    unicast results 4 + 4) x chunks / R, predicted / measured per run and for the speedups.
//  - dataplane_model, one per variant: the controller's plans of these jobs (GET /plan while the
//    job ran) scored by the flow model (scheduler::EvaluatePlan) on the lab's topology with every
//    link at R packets/s ("links_at_R"), and also the INA switch's processing capacity C_v at R
//    ("links_and_switch_at_R"); the job's gradient is its bytes on the wire (chunks x 314) and
//    its compute time 0, so the model's iteration time is its communication time max(G/λ, G/μ).
//    predicted / measured per run and for the speedup.
//
// Caveats. BMv2 is a software switch that takes in ~10^4 packets a second on this 2-core machine
// (shared with the 5 agents), with one to 1.4 cores busy (simple_switch runs one ingress thread;
// its egress threads do little): it is CPU-bound per switch, not link-bound, and its absolute speed
// says nothing about a hardware switch. The flow model prices each link direction, the INA
// switch's aggregated input (C_v) and the PS's ingress on their own; it cannot represent one CPU
// budget shared by all ports. With links at R it sees the PS's link (4 streams without INA, 1 with
// it) and predicts a 4x speedup; with C_v at R too, INA is capped at R/4 like the PS's link and
// the model predicts none. On BMv2 both set-ups push the same packets through the ingress thread
// (4 chunks + 1 result per chunk), and an aggregating packet (62 register reads and writes) costs
// more CPU than a forwarded one (~130 against ~100 us). What INA gains here comes instead from
// the PS-alone runs' retransmissions (thousands of spurious copies while the workers' RTO adapts to
// BMv2's queueing, against none or a few with INA); in some invocations they stall on
// retransmission timeouts with BMv2 mostly idle (bmv2_cores_busy well below 1). The measured
// speedup over ps_alone_multicast ranged from 0.7 to 6.8 over seven invocations (1 MiB: 0.7 to
// 2.5). The ratios are the model's fidelity on a CPU-bound software switch,
// not a flaw of the runs, and say nothing of INA on hardware. The unicast baseline is not a
// faithful plain PS: ina.p4 replicates every result down the tag's tree, so each of the PS's 4
// copies reaches all 4 workers (16 copies per chunk; the workers drop the duplicates); the fair
// PS-alone baseline is `ps_alone_multicast` (one result per chunk from the PS, replicated by the
// switch: the strongest PS-alone the pipeline offers). One sample per run (3 iterations, median),
// which varies by tens of percent for INA, up to 4x for the PS-alone runs, from one invocation
// to the next. Other load on the machine (another lab, a build) slows BMv2 and shows in every
// figure.
//
// `dataplane_bench leafspine [--iterations N] [SIZE ...]` runs instead the many-jobs scenario of
// bench/dataplane_leafspine.cc (a 2x2 leaf-spine, one job alone and two sharing the spines).
//
// Usage: dataplane_bench [--iterations N] [SIZE ...]   (default: 3 iterations, 262144 and
// 1048576 bytes). Needs root (network namespaces) and BMv2 (found like the interop tests:
// $INAC_BMV2, PATH, ../shared/peers/bin); without either it prints one line saying why it
// skipped and exits 0. Each lab (prefix "db" + pid) is torn down at the end, after a failure and
// on SIGINT/SIGTERM; the folder with the logs is kept (and named on stderr) when something failed,
// and the exit code is then 1. Every wait is bounded. Runs in 60 to 90 s.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/dataplane_leafspine.h"
#include "core/json.h"
#include "scheduler/model/flow_model.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"
#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace {

namespace systest = inac::systest;
namespace core = inac::core;
namespace scheduler = inac::scheduler;
namespace fixtures = inac::fixtures;
using Json = nlohmann::json;

constexpr int kWorkers = 4;
constexpr int64_t kLanes = 62;
// On-wire INA frame: Ethernet 14 + IPv4 20 + UDP 8 + INA header 24 (job_id, chunk, slot 4 each,
// flags, count 1 each, reserved 2, bitmap 8) + 62 lanes x 4 bytes.
constexpr int64_t kFrameBytes = 14 + 20 + 8 + 24 + kLanes * 4;

const std::vector<std::string> kWorkerHosts = {"h0", "h1", "h2", "h3"};
const std::string kPsHost = "h4";

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Round(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An agent's --json report: the last line of its log that is a JSON object (null if none).
Json AgentReport(const std::string& log) {
  const std::string text = ReadAll(log);
  size_t end = text.size();
  while (end > 0) {
    const size_t newline = text.rfind('\n', end - 1);
    const size_t begin = newline == std::string::npos ? 0 : newline + 1;
    if (begin < end && text[begin] == '{') {
      Json j = Json::parse(text.substr(begin, end - begin), nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) return j;
    }
    if (begin == 0) break;
    end = begin - 1;
  }
  return Json();
}

int64_t Get(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<int64_t>() : 0;
}

// --- Teardown on SIGINT/SIGTERM: `inac lab down` of the lab that is up, then exit. ---------------

char g_lab_dir[512] = {0};  // the lab that is up ("" when none)

void OnSignal(int sig) {
  if (g_lab_dir[0] != '\0') {
    const pid_t pid = fork();
    if (pid == 0) {
      execl(systest::InacBinary(), "inac", "lab", "down", "--dir", g_lab_dir,
            static_cast<char*>(nullptr));
      _exit(127);
    }
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  _exit(128 + sig);
}

// Blocks SIGINT and SIGTERM while alive: `lab up` and `lab down` are not interrupted halfway (a
// `lab down` racing a `lab up` would leave what `up` creates afterwards); a signal that came
// meanwhile is handled once they are done. The lab's processes get an empty mask (cmd_lab.cc).
class SignalsDeferred {
 public:
  SignalsDeferred() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalsDeferred() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

// --- One lab: `inac lab up` on a star, `inac lab down` when destroyed.
// ----------------------------

class Lab {
 public:
  // One switch s0 (INA-capable with 4096 aggregators, or not), hosts h0..h4 on it.
  static core::Topology Star(bool ina) { return fixtures::LabStar(kWorkers + 1, 4096, ina); }

  Lab(const std::string& dir, const std::string& prefix, const std::string& bmv2)
      : dir_(dir), prefix_(prefix), bmv2_(bmv2) {}
  ~Lab() { Down(); }

  // "" when up, else the reason.
  std::string Up(const core::Topology& topology) {
    const std::string file =
        systest::WriteFile(dir_ + "/input-topology.json", core::TopologyToJson(topology).dump());
    lab_dir_ = dir_ + "/lab";
    SignalsDeferred deferred;
    std::snprintf(g_lab_dir, sizeof g_lab_dir, "%s", lab_dir_.c_str());
    up_ = true;
    systest::CliRun up =
        systest::RunInac(absl::StrCat("lab up --topology ", file, " --dir ", lab_dir_, " --prefix ",
                                      prefix_, " --bmv2 ", bmv2_),
                         dir_);
    if (up.exit != 0) return absl::StrCat("lab up exited ", up.exit, ": ", up.out);
    Json lab = Json::parse(ReadAll(lab_dir_ + "/lab.json"), nullptr, false);
    if (!lab.is_object() || !lab.contains("controller_url")) return "lab.json unreadable";
    url_ = lab["controller_url"].get<std::string>();
    for (const Json& h : lab["hosts"]) ns_[h["id"]] = h["namespace"];
    for (const Json& s : lab["switches"]) bmv2_pid_ = s.value("pid", 0);
    host_port_ = url_.substr(url_.find("//") + 2);
    return "";
  }

  // "" when down (or never up).
  std::string Down() {
    if (!up_) return "";
    up_ = false;
    SignalsDeferred deferred;
    systest::CliRun down = systest::RunInac(absl::StrCat("lab down --dir ", lab_dir_), dir_);
    g_lab_dir[0] = '\0';
    return down.exit == 0 ? "" : absl::StrCat("lab down exited ", down.exit, ": ", down.out);
  }

  // Submits a job of the star's workers and PS; its id once running (every switch programmed, at
  // most 30 s), or 0.
  int64_t SubmitAndAwaitRunning(const std::string& name, int64_t size, int64_t iterations,
                                std::string* error) {
    systest::Rest rest(host_port_);
    const Json job = fixtures::JobJson({.name = name,
                                        .workers = kWorkerHosts,
                                        .parameter_servers = {kPsHost},
                                        .gradient_bytes = size,
                                        .compute_ms = 10,
                                        .iterations = iterations});
    return systest::SubmitAndAwaitRunning(rest, job, error);
  }

  void Cancel(int64_t job) {
    systest::Rest rest(host_port_);
    (void)rest.Delete(absl::StrCat("/jobs/", job));  // 409 once completed: nothing to do
  }

  std::optional<systest::ControllerView> View() {
    systest::Rest rest(host_port_);
    return systest::FetchView(rest);
  }

  const std::string& dir() const { return dir_; }
  const std::string& url() const { return url_; }
  const std::string& ns(const std::string& host) { return ns_[host]; }

  // CPU seconds (user + system) the switch's BMv2 has used so far; -1 when unreadable.
  double Bmv2CpuSeconds() const {
    const std::string stat = ReadAll(absl::StrCat("/proc/", bmv2_pid_, "/stat"));
    const size_t paren = stat.rfind(')');
    if (bmv2_pid_ <= 0 || paren == std::string::npos) return -1;
    std::istringstream in(stat.substr(paren + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14 (utime) and 15 (stime)
      if (i >= 14) ticks += std::atof(field.c_str());
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

 private:
  int bmv2_pid_ = 0;
  std::string dir_, prefix_, bmv2_, lab_dir_, url_, host_port_;
  std::map<std::string, std::string> ns_;
  bool up_ = false;
};

// --- One all-reduce run.
// --------------------------------------------------------------------------

struct RunResult {
  std::string name;
  bool ina = false;
  bool unicast = false;
  int64_t size = 0;
  bool ok = false;
  std::string error;
  std::vector<double> iteration_ms;  // per iteration, the slowest worker
  double median_ms = 0;
  double busy_s = 0;  // sum of iteration_ms
  int64_t packets_in = 0, packets_out = 0, retransmissions = 0;
  double bmv2_cpu_s = -1;  // CPU BMv2 used meanwhile
  std::optional<double> in_network_share;
  std::optional<systest::ControllerView> view;  // the controller's plan while the job ran
  int64_t job = 0;
};

// Runs `inac ps` and `inac worker --check` x 4 of a new job in `lab` and gathers the figures.
RunResult RunAllReduce(Lab& lab, const std::string& name, bool ina, bool unicast, int64_t size,
                       int iterations) {
  RunResult r{name, ina, unicast, size};
  r.job = lab.SubmitAndAwaitRunning(absl::StrCat(name, "-", size), size, iterations, &r.error);
  if (r.job == 0) return r;
  r.view = lab.View();
  const std::vector<std::string> common = {"--size", absl::StrCat(size), "--iterations",
                                           absl::StrCat(iterations), "--json"};
  std::vector<std::unique_ptr<systest::ChildProcess>> procs;
  std::vector<std::string> logs;
  const double cpu0 = lab.Bmv2CpuSeconds();
  auto start = [&](const std::string& verb, const std::string& flag, const std::string& host,
                   std::vector<std::string> extra) {
    std::vector<std::string> args = {verb,      "--job",      absl::StrCat(r.job), flag,     host,
                                     "--netns", lab.ns(host), "--server",          lab.url()};
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = absl::StrCat(lab.dir(), "/", verb, "-", r.job, "-", host, ".log");
    auto p = systest::ChildProcess::Start(args, log);
    if (!p.ok()) {
      r.error = absl::StrCat("starting ", verb, " on ", host, ": ", p.status().ToString());
      return;
    }
    procs.push_back(*std::move(p));
    logs.push_back(log);
  };
  start("ps", "--ps", kPsHost,
        unicast ? std::vector<std::string>{"--unicast-results"} : std::vector<std::string>{});
  for (const std::string& w : kWorkerHosts) start("worker", "--worker", w, {"--check"});
  // Workers first (done when every result arrived), then the PS (it lingers ~1 s): 10 minutes
  // for all of them together.
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  std::vector<Json> reports(procs.size());
  for (size_t i = procs.size(); i-- > 0;) {
    const int exit = procs[i]->Wait(std::max(absl::Seconds(1), deadline - absl::Now()));
    reports[i] = AgentReport(logs[i]);
    if (exit != 0 && r.error.empty()) {
      r.error = absl::StrCat(logs[i], " exited ", exit, ": ", systest::LogTail(logs[i], 600));
    }
  }
  if (const double cpu1 = lab.Bmv2CpuSeconds(); cpu0 >= 0 && cpu1 >= 0) r.bmv2_cpu_s = cpu1 - cpu0;
  lab.Cancel(r.job);
  if (!r.error.empty() || procs.size() != 1 + kWorkerHosts.size()) return r;

  const Json& ps = reports[0];
  if (ps.contains("in_network_share") && ps["in_network_share"].is_number()) {
    r.in_network_share = ps["in_network_share"].get<double>();
  }
  const Json& pp = ps["packets"];
  // Into the switch: the workers' chunks and the PS's results (one per member when unicast;
  // a resent result goes to one member). Out of it: what the hosts received.
  r.packets_in = (Get(pp, "results_sent") * (unicast ? kWorkers : 1)) + Get(pp, "results_resent");
  r.packets_out = Get(pp, "received");
  r.iteration_ms.assign(static_cast<size_t>(iterations), 0.0);
  for (size_t i = 1; i < reports.size(); ++i) {
    const Json& w = reports[i];
    if (w.value("check", std::string()) != "ok") r.error = "a worker's check was not ok";
    r.packets_in += Get(w["packets"], "sent");
    r.packets_out += Get(w["packets"], "results") + Get(w["packets"], "duplicate_results") +
                     Get(w["packets"], "ignored");
    r.retransmissions += Get(w, "retransmissions");
    const Json& its = w["iterations"];
    for (size_t k = 0; k < its.size() && k < r.iteration_ms.size(); ++k) {
      r.iteration_ms[k] = std::max(r.iteration_ms[k], its[k].value("time_ms", 0.0));
    }
  }
  for (double t : r.iteration_ms) r.busy_s += t / 1000;
  r.median_ms = Median(r.iteration_ms);
  r.ok = r.error.empty() && r.median_ms > 0;
  return r;
}

Json RunJson(const RunResult& r, int iterations) {
  Json j = {{"bench", "dataplane_allreduce"},
            {"run", r.name},
            {"switch_ina", r.ina},
            {"results", r.unicast ? "ps_unicast" : "switch_multicast"},
            {"workers", kWorkers},
            {"size_bytes", r.size},
            {"iterations", iterations},
            {"ok", r.ok}};
  if (!r.ok) {
    j["error"] = r.error;
    return j;
  }
  Json its = Json::array();
  for (double t : r.iteration_ms) its.push_back(Round(t, 1));
  j["iteration_ms"] = its;
  j["time_ms_median"] = Round(r.median_ms, 1);
  j["algbw_mb_per_s"] = Round(static_cast<double>(r.size) / (r.median_ms * 1e3), 3);
  j["in_network_share"] = r.in_network_share ? Json(Round(*r.in_network_share, 4)) : Json();
  j["retransmissions"] = r.retransmissions;
  j["switch_packets_in"] = r.packets_in;
  j["switch_packets_out"] = r.packets_out;
  j["switch_in_pps"] = Round(static_cast<double>(r.packets_in) / r.busy_s, 0);
  j["switch_out_pps"] = Round(static_cast<double>(r.packets_out) / r.busy_s, 0);
  if (r.bmv2_cpu_s >= 0) {
    // BMv2's CPU from the agents' start to their exit (almost all of it spent in the
    // iterations): cores busy during the iterations, and CPU per packet it took in.
    j["bmv2_cpu_s"] = Round(r.bmv2_cpu_s, 2);
    j["bmv2_cores_busy"] = Round(r.bmv2_cpu_s / r.busy_s, 2);
    j["bmv2_cpu_us_per_packet_in"] =
        Round(r.bmv2_cpu_s * 1e6 / static_cast<double>(std::max<int64_t>(1, r.packets_in)), 1);
  }
  j["check"] = "ok";
  return j;
}

// --- The flow model's prediction.
// -----------------------------------------------------------------

struct Prediction {
  double ms = 0;
  std::string bottleneck;
  std::string error;
};

// The controller's plan of `r`'s job scored by the flow model on the lab's topology with every
// link at `link_gbps` (and INA switches at `switch_gbps` when given); the job's gradient is its
// bytes on the wire, its compute time 0.
Prediction Predict(const RunResult& r, double link_gbps, std::optional<double> switch_gbps) {
  Prediction p;
  if (!r.view) {
    p.error = "no plan read from the controller";
    return p;
  }
  scheduler::PlanningInput input;
  input.topology = r.view->topology;
  for (core::Link& l : input.topology.links) l.gbps = link_gbps;
  for (core::Host& h : input.topology.hosts) h.ingress_gbps.reset();
  for (core::Switch& s : input.topology.switches) {
    if (switch_gbps && s.ina.capable) s.ina.processing_gbps = *switch_gbps;
  }
  core::JobSpec spec =
      fixtures::PsJobSpec(r.name, kWorkerHosts, {kPsHost},
                          {.gradient_bytes = (r.size / 4 + kLanes - 1) / kLanes * kFrameBytes,
                           .compute_ms = 0,
                           .iterations = 1});
  input.jobs.push_back({r.job, spec});
  core::Plan plan = r.view->plan;
  std::erase_if(plan.jobs, [&](const core::JobPlan& jp) { return jp.job_id != r.job; });
  if (plan.jobs.empty()) {
    p.error = "the job is not in the controller's plan";
    return p;
  }
  auto ev = scheduler::EvaluatePlan(input, plan);
  if (!ev.ok()) {
    p.error = ev.status().ToString();
    return p;
  }
  p.ms = ev->jobs[0].iteration_ms;
  p.bottleneck = ev->jobs[0].bottleneck;
  return p;
}

// Packets the switch takes in per chunk under the contract, without retransmissions: the workers'
// chunks and the PS's results (one, or one per worker when unicast).
int64_t InPerChunk(const RunResult& r) { return kWorkers + (r.unicast ? kWorkers : 1); }

// ... and sends out: the aggregate (INA) or the chunks to the PS, and the results; ina.p4
// replicates every result down the tag's tree, so unicast results arrive 4 x 4 times.
int64_t OutPerChunk(const RunResult& r) {
  return (r.ina ? 1 : kWorkers) + (r.unicast ? kWorkers * kWorkers : kWorkers);
}

void Print(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 3;
  std::vector<int64_t> sizes;
  bool leafspine = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "leafspine" && i == 1) {
      leafspine = true;
    } else if (a == "--iterations" && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (a[0] != '-' && std::atoll(a.c_str()) > 0 && std::atoll(a.c_str()) % 4 == 0) {
      sizes.push_back(std::atoll(a.c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: dataplane_bench [leafspine] [--iterations N] [SIZE ...] (bytes, x4)\n");
      return 2;
    }
  }
  if (sizes.empty()) sizes = {256 << 10, 1 << 20};
  if (iterations < 1) iterations = 1;

  if (geteuid() != 0) {
    Print({{"bench", "dataplane"}, {"skipped", "needs root (network namespaces)"}});
    return 0;
  }
  const std::optional<std::string> bmv2 = inac::interop::FindBmv2();
  if (!bmv2) {
    Print({{"bench", "dataplane"},
           {"skipped", "BMv2 not found: " + inac::interop::Bmv2SearchDescription()}});
    return 0;
  }
  if (leafspine) return inac::bench::RunLeafSpine(*bmv2, sizes, iterations);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const std::string dir = systest::MakeTempDir("dataplane-bench");
  if (dir.empty()) {
    Print({{"bench", "dataplane"}, {"error", "cannot create a temporary folder"}});
    return 1;
  }
  const int tag = static_cast<int>(getpid() % 10000);
  bool failed = false;
  std::vector<RunResult> runs;
  // Lab A: the switch aggregates. Lab B: the same star, the switch not INA-capable.
  for (bool ina : {true, false}) {
    const std::string lab_dir = absl::StrCat(dir, ina ? "/ina" : "/ps-alone");
    std::filesystem::create_directories(lab_dir);
    Lab lab(lab_dir, absl::StrCat("db", tag, ina ? "a" : "b"), *bmv2);
    if (std::string e = lab.Up(Lab::Star(ina)); !e.empty()) {
      Print({{"bench", "dataplane_allreduce"}, {"lab", ina ? "ina" : "ps_alone"}, {"error", e}});
      failed = true;
      continue;
    }
    for (int64_t size : sizes) {
      const std::vector<std::pair<std::string, bool>> variants =
          ina ? std::vector<std::pair<std::string, bool>>{{"ina", false}}
              : std::vector<std::pair<std::string, bool>>{{"ps_alone_multicast", false},
                                                          {"ps_alone_unicast", true}};
      for (const auto& [name, unicast] : variants) {
        runs.push_back(RunAllReduce(lab, name, ina, unicast, size, iterations));
        Print(RunJson(runs.back(), iterations));
        failed |= !runs.back().ok;
      }
    }
    if (std::string e = lab.Down(); !e.empty()) {
      Print({{"bench", "dataplane"}, {"lab_down", e}});
      failed = true;
    }
  }

  // R: packets out of the switch per second of all-reduce, over every run.
  // Only the runs in which BMv2 was saturated (>= 0.9 cores busy) measure its rate; a run that
  // waits on the workers' retransmission timeouts leaves it idle. All runs when none was.
  double busy = 0, out = 0, in = 0;
  int saturated = 0;
  for (bool all : {false, true}) {
    for (const RunResult& r : runs) {
      if (!r.ok || (!all && r.bmv2_cpu_s < 0.9 * r.busy_s)) continue;
      busy += r.busy_s;
      out += static_cast<double>(r.packets_out);
      in += static_cast<double>(r.packets_in);
      saturated += all ? 0 : 1;
    }
    if (busy > 0) break;
  }
  if (busy > 0) {
    const double rate = in / busy;
    const double link_gbps = rate * kFrameBytes * 8 / 1e9;
    Print({{"bench", "dataplane_packet_rate"},
           {"r_pps", Round(rate, 0)},
           {"out_pps", Round(out / busy, 0)},
           {"saturated_runs", saturated},
           {"frame_bytes", kFrameBytes},
           {"link_gbps_at_r", Round(link_gbps, 6)},
           {"how",
            "R = packets into the switch (the agents' sends, retransmissions included) over "
            "the runs in which BMv2 was saturated (bmv2_cores_busy >= 0.9; all runs if none) / "
            "their summed iteration times (slowest worker per iteration). Ingress, not egress: "
            "BMv2 runs one ingress thread, which is what saturates; replicated copies are cheap"}});

    for (int64_t size : sizes) {
      const RunResult* ina = nullptr;
      const RunResult* mc = nullptr;
      const RunResult* uc = nullptr;
      for (const RunResult& r : runs) {
        if (r.size != size || !r.ok) continue;
        (r.ina ? ina : r.unicast ? uc : mc) = &r;
      }
      if (ina == nullptr) continue;
      Json speed = {{"bench", "dataplane_speedup"},
                    {"size_bytes", size},
                    {"fair_baseline", "ps_alone_multicast"},
                    {"why",
                     "ina.p4 replicates every result down the tag's tree whatever its "
                     "destination, so --unicast-results sends 4 x 4 copies per chunk: a "
                     "handicapped PS, not a plain one; one copy replicated by the switch is "
                     "the strongest PS-alone baseline the pipeline offers"}};
      if (mc) speed["speedup_vs_ps_multicast"] = Round(mc->median_ms / ina->median_ms, 3);
      if (uc) speed["speedup_vs_ps_unicast"] = Round(uc->median_ms / ina->median_ms, 3);
      Print(speed);

      const int64_t chunks = (size / 4 + kLanes - 1) / kLanes;
      Json budget = {
          {"bench", "dataplane_switch_budget"}, {"size_bytes", size}, {"r_pps", Round(rate, 0)}};
      for (const RunResult* r : {ina, mc, uc}) {
        if (r == nullptr) continue;
        const double ms = static_cast<double>(chunks * InPerChunk(*r)) / rate * 1000;
        budget[r->name] = {{"in_per_chunk", InPerChunk(*r)},
                           {"out_per_chunk", OutPerChunk(*r)},
                           {"predicted_ms", Round(ms, 1)},
                           {"measured_ms", Round(r->median_ms, 1)},
                           {"predicted_over_measured", Round(ms / r->median_ms, 3)}};
      }
      for (const RunResult* base : {mc, uc}) {
        if (base == nullptr) continue;
        const double predicted = static_cast<double>(InPerChunk(*base)) / InPerChunk(*ina);
        const double measured = base->median_ms / ina->median_ms;
        budget[absl::StrCat("speedup_vs_", base->name)] = {
            {"predicted", Round(predicted, 3)},
            {"measured", Round(measured, 3)},
            {"predicted_over_measured", Round(predicted / measured, 3)}};
      }
      budget["note"] =
          "not the flow model: one packet budget R for the whole switch, time = the "
          "contract's packets into the switch per chunk x chunks / R. R comes from "
          "these runs and ignores that an aggregating packet costs BMv2 more CPU than "
          "a forwarded one (bmv2_cpu_us_per_packet_in), and the retransmissions";
      Print(budget);

      for (bool switch_at_r : {false, true}) {
        Json model = {{"bench", "dataplane_model"},
                      {"variant", switch_at_r ? "links_and_switch_at_R" : "links_at_R"},
                      {"size_bytes", size},
                      {"link_gbps", Round(link_gbps, 6)},
                      {"wire_bytes_per_worker", chunks * kFrameBytes}};
        std::map<std::string, double> predicted;
        for (const RunResult* r : {ina, mc, uc}) {
          if (r == nullptr) continue;
          Prediction p =
              Predict(*r, link_gbps, switch_at_r ? std::optional<double>(link_gbps) : std::nullopt);
          if (!p.error.empty()) {
            model[r->name] = {{"error", p.error}};
            failed = true;
            continue;
          }
          predicted[r->name] = p.ms;
          model[r->name] = {{"predicted_ms", Round(p.ms, 1)},
                            {"measured_ms", Round(r->median_ms, 1)},
                            {"predicted_over_measured", Round(p.ms / r->median_ms, 3)},
                            {"bottleneck", p.bottleneck}};
        }
        if (mc && predicted.count(ina->name) && predicted.count(mc->name)) {
          const double p = predicted[mc->name] / predicted[ina->name];
          const double m = mc->median_ms / ina->median_ms;
          model["speedup"] = {{"predicted", Round(p, 3)},
                              {"measured", Round(m, 3)},
                              {"predicted_over_measured", Round(p / m, 3)}};
        }
        model["note"] =
            switch_at_r
                ? "C_v = R charges only the 4 aggregated inputs, so INA's rate is R/4 like the PS "
                  "link's without INA: the model sees no gain. BMv2 is CPU-bound per switch (one "
                  "ingress thread for all ports), which the model cannot represent"
                : "each link direction at R packets/s: the model is bounded by one link (the PS's "
                  "without INA, 4 streams; a worker's with INA) and cannot represent BMv2's one "
                  "ingress thread shared by all ports (a CPU-bound switch). The unicast run is "
                  "priced like multicast (the model has result trees only; its push phase "
                  "dominates either way)";
        Print(model);
      }
    }
  }
  if (!failed) {
    (void)!std::system(("rm -rf '" + dir + "'").c_str());
  } else {
    std::fprintf(stderr, "dataplane_bench: files and logs kept in %s\n", dir.c_str());
  }
  return failed ? 1 : 0;
}
