// A real PyTorch training through a BMv2 switch: examples/pytorch/train_digits.py (the digits MLP
// 64-32-10 under DistributedDataParallel, 4 ranks) with every gradient bucket all-reduced by
// python/inac_torch's DDP hook over libinac_client, one session per rank opened in its host's
// namespace of an `inac lab` star (h0..h3 on s0, PS h4), and `inac ps --serve` in h4 sending its
// results to the switch, which multicasts them. The same launch then runs the fixed-point oracle
// (`--backend bfp`: the block floating point rule with the int32 lanes summed by Gloo, no
// switch), whose weights INAC's must equal bit for bit when no bucket fell back.
//
// Skipped, with the reason, without root or BMv2 (DataplaneTest), or without a python3 that
// imports torch and sklearn (INAC_PYTHON3, found like tests/python does). Labelled `dataplane`.
// Bounded waits only: the training's own --timeout-s, then its process group is killed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/dataplane/dataplane_fixture.h"

#ifndef INAC_PYTHON3
#define INAC_PYTHON3 ""
#endif
#ifndef INAC_CLIENT_LIB
#define INAC_CLIENT_LIB ""
#endif
#ifndef INAC_SOURCE_DIR
#define INAC_SOURCE_DIR ""
#endif

namespace inac::systest {
namespace {

// The MLP's gradient: 64x32 + 32 + 32x10 + 10 float32 values, one DDP bucket per step.
constexpr int64_t kHidden = 32;
constexpr int64_t kParams = 64 * kHidden + kHidden + kHidden * 10 + 10;  // 2410
// Wire chunks of one float32 all-reduce: the exponent chunk, then 62 lanes per chunk.
constexpr int64_t kChunksPerStep = 1 + (kParams + 61) / 62;  // 40
constexpr int kRanks = 4;

// A word for `sh -c`, single-quoted.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

int64_t IntAt(const Json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

// True when `python` imports torch and sklearn; asked once per process (importing torch takes
// seconds).
bool ImportsTorchAndSklearn(const std::string& python) {
  static const bool imports = [&] {
    const std::string probe = ShellQuote(python) + " -c 'import torch, sklearn' >/dev/null 2>&1";
    return std::system(probe.c_str()) == 0;
  }();
  return imports;
}

// The highest step rank 0 logged ("rank 0 step   10 loss ..."); -1 before any.
int LastLoggedStep(const std::string& log) {
  int last = -1;
  const std::string marker = "rank 0 step ";
  for (size_t at = log.find(marker); at != std::string::npos; at = log.find(marker, at + 1)) {
    last = std::max(last, std::atoi(log.c_str() + at + marker.size()));
  }
  return last;
}

class PytorchDataplaneTest : public DataplaneTest {
 protected:
  void SetUp() override {
    DataplaneTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    python_ = INAC_PYTHON3;
    if (python_.empty() || std::string(INAC_CLIENT_LIB).empty()) {
      GTEST_SKIP() << "no python3 configured (INAC_PYTHON3) or no libinac_client target";
    }
    if (!ImportsTorchAndSklearn(python_)) {
      GTEST_SKIP() << python_ << " cannot import torch and sklearn (Debian: apt-get install "
                   << "python3-torch python3-sklearn)";
    }
  }

  // `inac ps --serve` of `job` on h4, results to the switch.
  std::unique_ptr<ChildProcess> StartServingPs(int64_t job) {
    const std::string log = absl::StrCat(dir_, "/ps-serve-", job, ".log");
    auto p = ChildProcess::Start({"ps", "--job", absl::StrCat(job), "--ps", "h4", "--serve",
                                  "--netns", ns_["h4"], "--server", url_, "--json"},
                                 log);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  // SIGTERM: the serving PS prints its JSON report and exits 0.
  static Json StopServingPs(std::unique_ptr<ChildProcess> ps) {
    if (ps == nullptr) return Json();
    ps->Signal(SIGTERM);
    const int exit = ps->Wait(absl::Seconds(20));
    EXPECT_EQ(exit, 0) << LogTail(ps->log_path());
    return LastJsonObject(ReadAll(ps->log_path()));
  }

  // rank r is worker h<r> with its session in h<r>'s namespace: ns_ names them <prefix>-<host>.
  std::string NetnsFormat() {
    const std::string& h0 = ns_["h0"];
    if (h0.size() < 2 || h0.substr(h0.size() - 2) != "h0") return "";
    const std::string format = h0.substr(0, h0.size() - 2) + "{worker}";
    for (int r = 0; r < kRanks; ++r) {
      const std::string host = absl::StrCat("h", r);
      if (h0.substr(0, h0.size() - 2) + host != ns_[host]) return "";
    }
    return format;
  }

  struct Training {
    Training() = default;
    Training(Training&&) = default;
    // Whatever of the launch is left (its ranks, after a failed assertion): its process group.
    ~Training() {
      if (process != nullptr) ::kill(-process->pid(), SIGKILL);
    }
    std::unique_ptr<ChildProcess> process;
    std::string log, json;
    absl::Time started;
  };

  // train_digits.py --backend inac,bfp: INAC through the switch, then the oracle, one launch. In
  // its own process group (setsid) with its output in a file of its own, so that a timeout kills
  // the ranks with it and nothing it spawned holds the harness's pipe.
  Training StartTraining(int64_t job, int steps, const std::string& name, double timeout_s,
                         const std::vector<std::string>& extra = {}) {
    Training t;
    t.log = absl::StrCat(dir_, "/", name, ".log");
    t.json = absl::StrCat(dir_, "/", name, ".json");
    const std::string format = NetnsFormat();
    EXPECT_FALSE(format.empty()) << "unexpected namespace names, h0: " << ns_["h0"];
    const std::string source = INAC_SOURCE_DIR;
    std::vector<std::string> words = {
        "exec", "setsid", "env", "INAC_CLIENT_LIB=" + std::string(INAC_CLIENT_LIB),
        "PYTHONPATH=" + source + "/python", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1",
        // One thread per rank: 4 ranks, a switch and the PS share this machine's cores.
        "OMP_NUM_THREADS=1", python_, source + "/examples/pytorch/train_digits.py", "--backend",
        "inac,bfp", "--ranks", absl::StrCat(kRanks), "--job", absl::StrCat(job), "--server", url_,
        "--worker-format", "h{rank}", "--netns-format", format, "--steps", absl::StrCat(steps),
        "--hidden", absl::StrCat(kHidden), "--log-every", "5", "--timeout-s",
        absl::StrCat(timeout_s), "--json", t.json};
    words.insert(words.end(), extra.begin(), extra.end());
    std::vector<std::string> quoted;
    for (const std::string& w : words) quoted.push_back(ShellQuote(w));
    const std::string command =
        absl::StrCat(absl::StrJoin(quoted, " "), " >>", ShellQuote(t.log), " 2>&1");
    t.started = absl::Now();
    auto p = ChildProcess::StartProgram("/bin/sh", {"-c", command}, t.log);
    EXPECT_TRUE(p.ok()) << p.status();
    if (p.ok()) t.process = *std::move(p);
    return t;
  }

  // Waits for the training (at most `timeout`, then its whole process group is killed); its
  // --json summary, null when it failed (the log's tail is printed).
  Json FinishTraining(Training& t, absl::Duration timeout, double* seconds) {
    if (t.process == nullptr) return Json();
    const absl::Time deadline = absl::Now() + timeout;
    while (!t.process->Exited() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (!t.process->Exited()) {
      ADD_FAILURE() << "the training did not finish within " << absl::FormatDuration(timeout);
      ::kill(-t.process->pid(), SIGKILL);  // setsid: its process group is its pid
    }
    const int exit = t.process->Wait(absl::Seconds(10));
    *seconds = absl::ToDoubleSeconds(absl::Now() - t.started);
    if (exit != 0) {
      ADD_FAILURE() << "the training exited " << exit;
      std::printf("--- %s ---\n%s\n", t.log.c_str(), LogTail(t.log).c_str());
      return Json();
    }
    Json summary = Json::parse(ReadAll(t.json), nullptr, false);
    if (!summary.is_object()) {
      ADD_FAILURE() << "no summary in " << t.json;
      std::printf("--- %s ---\n%s\n", t.log.c_str(), LogTail(t.log).c_str());
    }
    return summary;
  }

  // Sums of the ranks' session counters (train_digits.py's "sessions": inac_stats of each rank).
  struct SessionTotals {
    int64_t allreduces = 0, failures = 0, packets = 0, retransmissions = 0, saturated = 0;
    std::vector<int64_t> next_chunk;
  };
  static SessionTotals Totals(const Json& inac) {
    SessionTotals t;
    for (const Json& s : inac.value("sessions", Json::array())) {
      t.allreduces += IntAt(s, "allreduces");
      t.failures += IntAt(s, "failures");
      t.packets += IntAt(s, "packets");
      t.retransmissions += IntAt(s, "retransmissions");
      t.saturated += IntAt(s, "saturated");
      t.next_chunk.push_back(IntAt(s, "next_chunk"));
    }
    return t;
  }

  // GET /jobs/{id}'s data_path (the workers' reports), null when the controller has none.
  Json DataPath(int64_t job) {
    Rest rest(host_port_);
    Response g = rest.Get(absl::StrCat("/jobs/", job));
    EXPECT_EQ(g.status, 200) << g.text;
    return g.status == 200 && g.body.contains("data_path") ? g.body["data_path"] : Json();
  }

  std::string python_;
};

// The training of 4 ranks through s0, every bucket aggregated in the switch: the weights equal
// the fixed-point oracle's bit for bit, the switch summed every worker's chunk exactly once.
TEST_F(PytorchDataplaneTest, DigitsMlpTrainsThroughTheSwitchBitwiseLikeTheOracle) {
  constexpr int kSteps = 200;
  StartLab(fixtures::LabStar(5, 4096));
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0", "h1", "h2", "h3"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("pytorch", workers, "h4"));
  ASSERT_GT(job, 0);
  // Every member aggregates at s0, with a grant: its all-reduces take the "ina" path.
  Rest rest(host_port_);
  Response config = rest.Get(absl::StrCat("/jobs/", job, "/config"));
  ASSERT_EQ(config.status, 200);
  for (const Json& tag : config.body["tags"]) {
    ASSERT_FALSE(tag["aggregators"].empty()) << tag.dump();
    for (const Json& m : tag["members"]) EXPECT_EQ(m["aggregation_node"], "s0") << m.dump();
  }
  std::unique_ptr<ChildProcess> ps = StartServingPs(job);
  ASSERT_NE(ps, nullptr);
  Training training = StartTraining(job, kSteps, "train", 75);
  double seconds = 0;
  Json summary = FinishTraining(training, absl::Seconds(85), &seconds);
  // Nothing is in flight once the ranks have exited.
  const int64_t finished_ms = absl::ToUnixMillis(absl::Now()) + 500;
  Json report = StopServingPs(std::move(ps));
  ASSERT_TRUE(summary.is_object());
  std::printf("[ info ] ps report: %s\n", report.dump().c_str());
  const Json& inac = summary["inac"];
  const Json& oracle = summary["bfp"];
  std::printf("[ info ] inac: %s\n", inac.dump().c_str());

  // The training finished, every bucket of every step through the switch.
  EXPECT_EQ(IntAt(inac, "steps"), kSteps);
  EXPECT_EQ(inac["paths"], (Json{{"ina", kSteps}})) << "rank 0's buckets by path";
  EXPECT_EQ(IntAt(inac["hook"], "buckets"), kSteps);
  EXPECT_EQ(IntAt(inac["hook"], "ina_buckets"), kSteps);
  EXPECT_EQ(IntAt(inac["hook"], "fallbacks"), 0);
  EXPECT_EQ(inac["hook"]["last_path"], "ina");
  EXPECT_TRUE(summary.value("ranks_agree", false)) << "weights differ between ranks";
  // Bit for bit the oracle's weights (same seed, steps and batches).
  EXPECT_EQ(inac["weights_sha256"], oracle["weights_sha256"]);
  EXPECT_EQ(summary.value("inac-bfp", -1.0), 0.0);
  EXPECT_EQ(inac["final_loss"], oracle["final_loss"]);

  // Each rank: one float32 all-reduce of the 2410 gradients per step, 40 wire chunks each.
  const SessionTotals s = Totals(inac);
  ASSERT_EQ(s.next_chunk.size(), static_cast<size_t>(kRanks)) << inac.dump();
  for (int64_t next : s.next_chunk) EXPECT_EQ(next, kSteps * kChunksPerStep);
  EXPECT_EQ(s.allreduces, kRanks * kSteps);
  EXPECT_EQ(s.failures, 0);
  EXPECT_EQ(s.saturated, 0);
  const int64_t chunks = kRanks * kSteps * kChunksPerStep;  // first copies sent by the workers
  EXPECT_EQ(s.packets - s.retransmissions, chunks);

  // The PS completed every chunk; every contribution arrived aggregated, except those a
  // retransmission flushed out of an aggregator early (at most one per retransmission).
  ASSERT_TRUE(report.contains("contributions")) << report.dump();
  const int64_t total = report["contributions"]["total"].get<int64_t>();
  const int64_t in_network = report["contributions"]["in_network"].get<int64_t>();
  EXPECT_EQ(IntAt(report["serve"], "chunks_completed"), kSteps * kChunksPerStep);
  EXPECT_EQ(IntAt(report["serve"], "sessions"), 1);
  EXPECT_EQ(total, chunks);
  EXPECT_LE(total - in_network, s.retransmissions);
  const double share = total > 0 ? static_cast<double>(in_network) / total : 0;
  if (s.retransmissions == 0) {
    EXPECT_GE(share, 0.99);
  }
  EXPECT_EQ(IntAt(report["packets"], "violation"), 0);
  EXPECT_EQ(IntAt(report["packets"], "raw"), 0) << "every chunk passes s0's aggregators";

  // The switch: each first copy aggregated once (exactly all of them without loss; a lost one
  // is replaced by a retransmission, which never aggregates), each retransmission sent on to the
  // PS as FALLBACK.
  Json counters = AwaitCounters(job, finished_ms);
  std::printf("[ info ] switch counters: %s\n", counters.dump().c_str());
  const int64_t aggregated = IntAt(counters, "aggregated_packets");
  if (s.retransmissions == 0) {
    EXPECT_EQ(aggregated, chunks);
  } else {
    EXPECT_LE(aggregated, chunks);
    EXPECT_GE(aggregated, chunks - s.retransmissions);
  }
  EXPECT_EQ(IntAt(counters, "fallback_packets"), s.retransmissions);
  EXPECT_EQ(IntAt(counters, "preempted_packets"), 0);

  // What the workers reported to the controller.
  Json data_path = DataPath(job);
  std::printf("[ info ] data_path: %s\n",
              data_path.is_null() ? "(not in GET /jobs/{id})" : data_path.dump().c_str());
  if (!data_path.is_null()) {
    EXPECT_EQ(data_path["state"], "ina");
    EXPECT_EQ(IntAt(data_path, "allreduces"), kRanks * kSteps);
    EXPECT_EQ(IntAt(data_path, "fallbacks"), 0);
    EXPECT_EQ(data_path["workers"].size(), static_cast<size_t>(kRanks));
  }
  std::printf(
      "[ info ] %d steps: %.2f ms per step (median, inac) vs %.2f ms (oracle on Gloo); %.1f s "
      "the whole launch; %lld chunks aggregated by s0 of %lld sent; in-network share %.4f; "
      "fallbacks 0; retransmissions %lld; final loss %.6f\n",
      kSteps, inac.value("step_ms_median", 0.0), oracle.value("step_ms_median", 0.0), seconds,
      static_cast<long long>(aggregated), static_cast<long long>(chunks), share,
      static_cast<long long>(s.retransmissions), inac.value("final_loss", 0.0));
}

// s0 is restarted (SIGKILL, started again empty, re-programmed by the controller) while the
// ranks train through it: the training finishes, the buckets caught in the outage completed by
// retransmissions through the restored switch or fallen back on Gloo collectively, and the
// controller's data-path report counts what fell back. The parameter is the hook's fallback
// timeout (--timeout-ms): 5 s, the example's default, usually outlasts the outage (the restored
// switch carries the retransmissions: no fallback, the oracle's weights); 300 ms usually does not
// (the buckets of the outage fall back). Either outcome is checked whichever happens.
class PytorchSwitchRestartTest : public PytorchDataplaneTest,
                                 public ::testing::WithParamInterface<int> {};

TEST_P(PytorchSwitchRestartTest, SwitchRestartMidTrainingFinishes) {
  constexpr int kSteps = 300;
  constexpr int kRestartAfterStep = 10;
  StartLab(fixtures::LabStar(5, 4096));
  if (HasFatalFailure()) return;
  const std::vector<std::string> workers = {"h0", "h1", "h2", "h3"};
  const int64_t job = SubmitAndAwaitRunning(JobBody("pytorch-restart", workers, "h4"));
  ASSERT_GT(job, 0);
  std::unique_ptr<ChildProcess> ps = StartServingPs(job);
  ASSERT_NE(ps, nullptr);
  Training training =
      StartTraining(job, kSteps, "train-restart", 75, {"--timeout-ms", absl::StrCat(GetParam())});
  // Bounded: the ranks start (torch imports) in a few seconds, then log every 5 steps.
  const absl::Time deadline = absl::Now() + absl::Seconds(45);
  int step = -1;
  while (absl::Now() < deadline && !training.process->Exited()) {
    step = LastLoggedStep(ReadAll(training.log));
    if (step >= kRestartAfterStep) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(step, kRestartAfterStep) << "no progress to step " << kRestartAfterStep << "; log:\n"
                                     << LogTail(training.log);
  ASSERT_FALSE(training.process->Exited()) << "the training ended before the restart";
  const absl::Time restart_start = absl::Now();
  CliRun restart = RunInac(absl::StrCat("lab switch restart s0 --dir ", dir_lab_), dir_);
  const double restart_s = absl::ToDoubleSeconds(absl::Now() - restart_start);
  ASSERT_EQ(restart.exit, 0) << restart.out;
  const int step_after_restart = LastLoggedStep(ReadAll(training.log));
  double seconds = 0;
  Json summary = FinishTraining(training, absl::Seconds(85), &seconds);
  const int64_t finished_ms = absl::ToUnixMillis(absl::Now()) + 500;
  Json report = StopServingPs(std::move(ps));
  ASSERT_TRUE(summary.is_object());
  std::printf("[ info ] ps report: %s\n", report.dump().c_str());
  const Json& inac = summary["inac"];
  const Json& oracle = summary["bfp"];
  std::printf("[ info ] inac: %s\n", inac.dump().c_str());

  EXPECT_EQ(IntAt(inac, "steps"), kSteps);
  EXPECT_TRUE(summary.value("ranks_agree", false)) << "weights differ between ranks";
  const Json& hook = inac["hook"];
  const int64_t fallbacks = IntAt(hook, "fallbacks");
  const int64_t ina = IntAt(inac["paths"], "ina");
  EXPECT_EQ(IntAt(hook, "buckets"), kSteps);
  EXPECT_EQ(ina + IntAt(inac["paths"], "fallback"), kSteps) << inac["paths"].dump();
  EXPECT_EQ(IntAt(inac["paths"], "fallback"), fallbacks);
  EXPECT_EQ(IntAt(hook, "ina_buckets"), ina);
  // INAC carried the training again through the restored switch.
  EXPECT_EQ(hook["last_path"], "ina");
  const SessionTotals s = Totals(inac);
  ASSERT_EQ(s.next_chunk.size(), static_cast<size_t>(kRanks)) << inac.dump();
  // Every rank numbered every all-reduce alike, failed ones (and skipped ones) included.
  for (int64_t next : s.next_chunk) EXPECT_EQ(next, s.next_chunk[0]);
  EXPECT_EQ(s.saturated, 0);
  const double loss = inac.value("final_loss", 0.0);
  const double oracle_loss = oracle.value("final_loss", 0.0);
  if (fallbacks == 0) {
    // Every bucket was summed in int32 lanes: the oracle's weights, bit for bit.
    EXPECT_EQ(inac["weights_sha256"], oracle["weights_sha256"]);
    EXPECT_EQ(summary.value("inac-bfp", -1.0), 0.0);
    EXPECT_EQ(s.failures, 0);
  } else {
    // A bucket that fell back was summed in float32 by Gloo: close to the oracle, not equal.
    EXPECT_NEAR(loss, oracle_loss, 2e-3);
    EXPECT_GT(s.failures, 0) << "a fallback without a failed INAC all-reduce";
    EXPECT_EQ(hook["last_reason"].is_string(), true) << hook.dump();
  }
  // The PS completed every chunk of the buckets that went through INAC.
  ASSERT_TRUE(report.contains("serve")) << report.dump();
  EXPECT_GE(IntAt(report["serve"], "chunks_completed"), ina * kChunksPerStep);
  EXPECT_EQ(IntAt(report["packets"], "violation"), 0);
  Json counters = AwaitCounters(job, finished_ms);
  std::printf("[ info ] switch counters (since the restart): %s\n", counters.dump().c_str());
  EXPECT_GT(IntAt(counters, "aggregated_packets"), 0) << "nothing aggregated after the restart";
  EXPECT_LE(IntAt(counters, "aggregated_packets"), kRanks * kSteps * kChunksPerStep);

  Json data_path = DataPath(job);
  std::printf("[ info ] data_path: %s\n",
              data_path.is_null() ? "(not in GET /jobs/{id})" : data_path.dump().c_str());
  if (!data_path.is_null()) {
    EXPECT_EQ(IntAt(data_path, "allreduces"), kRanks * kSteps);
    EXPECT_EQ(IntAt(data_path, "fallbacks"), kRanks * fallbacks);
    EXPECT_EQ(data_path["workers"].size(), static_cast<size_t>(kRanks));
    EXPECT_EQ(data_path["state"], "ina") << "the last report of every worker: INA again";
  }
  const int64_t total = IntAt(report["contributions"], "total");
  const int64_t in_network = IntAt(report["contributions"], "in_network");
  std::printf(
      "[ info ] fallback timeout %d ms, %d steps, s0 restarted after step %d (the restart took "
      "%.1f s, the training was "
      "at step %d then): %.2f ms per step (median), the longest %.0f ms, %.1f s the whole "
      "launch; %lld buckets over INA, %lld fell back; retransmissions %lld; failed INAC "
      "all-reduces %lld; in-network share %.4f; final loss %.6f vs the oracle's %.6f\n",
      GetParam(), kSteps, step, restart_s, step_after_restart, inac.value("step_ms_median", 0.0),
      inac.value("step_ms_max", 0.0), seconds, static_cast<long long>(ina),
      static_cast<long long>(fallbacks), static_cast<long long>(s.retransmissions),
      static_cast<long long>(s.failures), total > 0 ? static_cast<double>(in_network) / total : 0.0,
      loss, oracle_loss);
}

INSTANTIATE_TEST_SUITE_P(FallbackTimeout, PytorchSwitchRestartTest, ::testing::Values(5000, 300),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "ms");
                         });

}  // namespace
}  // namespace inac::systest
