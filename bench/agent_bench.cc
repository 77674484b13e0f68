// All-reduce on loopback: Gloo's ring all-reduce (what PyTorch's gloo backend runs on CPU tensors)
// against INAC's host agents in PS-only mode (no switch: one PS sums every worker's chunks and
// unicasts each result to every worker), side by side in one process. Prints one JSON line per
// run and one per (workers, size) comparing them:
//  - agent_allreduce, system gloo_ring: N ranks as N threads, each with its own TCP device on
//    127.0.0.1 and a gloo::rendezvous::Context over one in-process HashStore, all-reduce (sum,
//    gloo::allreduce with the ring algorithm and gloo::sum<float>, as ProcessGroupGloo does) of
//    S bytes of floats. The floats are small integers, so the sum is exact and checked (`exact`).
//    One warm-up iteration, then I timed ones; an iteration's time is the slowest rank's.
//    cpu_s_per_gb: the process's CPU time (getrusage, every thread: the ranks and Gloo's event
//    loops) over the timed iterations / (S x I / 1e9).
//  - agent_allreduce, system inac_ps: one PS (agent::RunPs, unicast results) and N workers
//    (agent::RunWorker, each with a fixed gradient; the bench compares every lane of the last
//    iteration's result with the exact sum afterwards), each a
//    thread, on 127.78.b.x addresses and one UDP port, S/4 int32 lanes, the default window. One
//    warm-up iteration, then I timed ones; an iteration's time is the slowest worker's. The PS's
//    packets in (counters.received) and out (results sent x members, plus results sent again)
//    per second of its CPU time, and cpu_s_per_gb: the agents' own CPU time (the PS's and the
//    workers' cpu_us) over the whole run, warm-up included / (S x (I + 1) / 1e9).
//  - agent_allreduce, system inac_session: what a PyTorch job runs (python/inac_torch): one serving
//    PS (agent::ServePs, `inac ps --serve`) and N client sessions of libinac_client.so (its C
//    ABI, agent/inac_client.h), each a thread, all-reducing S bytes of float32 in place with
//    inac_allreduce_f32 (the exponent negotiation, the fixed-point conversion, the int32 sums and
//    back), the buffer refilled between iterations; the values are Gloo's small integers, so the
//    sum is exact and checked. An iteration's time is the slowest session's call.
//  - agent_allreduce_ratio: inac_over_gloo = INAC's algbw / Gloo's, and parity_ratio = (N-1)/N,
//    the ratio at which both move bytes equally fast: a ring moves 2 (N-1) S bytes in all, a PS
//    2 N S (every worker sends S to the PS and gets S back), so at 2 workers the PS moves twice
//    the bytes of a ring and 0.5 is parity per byte. On loopback every byte is a copy through the
//    kernel, so bytes moved, not links, is what costs.
// algbw = S / median time, in GB/s (1e9 bytes). The PS's packets carry 248 bytes of lanes in 272,
// and it is one thread: at 4 workers it carries 8 S bytes alone.
//
// Usage: agent_bench [--workers 2,4] [--sizes-mib 1,16,64,256] [--iterations I]   (default 5;
// sizes of 256 MiB and more run at most 3). Built without Gloo (find_package(Gloo) failed) it
// prints one line saying Gloo was skipped, then INAC alone. Every run is bounded: Gloo's timeout
// is 120 s per operation; the PS stops after 60 s + 1 s per MiB and iteration, a worker gives up
// after 30 s without a result. Needs no root.
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/inac_client.h"
#include "agent/job_config.h"
#include "agent/ps.h"
#include "agent/ps_serve.h"
#include "agent/udp_socket.h"
#include "agent/worker.h"
#include "tests/agent/agent_fixtures.h"

#ifdef INAC_HAVE_GLOO
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace {

using Json = nlohmann::json;
namespace agent = inac::agent;

constexpr int64_t kMiB = 1 << 20;

void Print(const Json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double GBps(int64_t bytes, double ms) { return ms > 0 ? bytes / 1e9 / (ms / 1e3) : 0; }

double ProcessCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

using agent::testing::Loopback;
using agent::testing::PickUdpPort;

struct Run {
  int workers = 0;
  int64_t size_mib = 0;
  int64_t iterations = 0;  // timed, after one warm-up
  int ps_threads = 1;      // INAC's PS (PsOptions::threads)
  Json Base(const char* system) const {
    return {{"bench", "agent_allreduce"}, {"system", system},     {"workers", workers},
            {"ps_threads", ps_threads},   {"size_mib", size_mib}, {"size_bytes", size_mib * kMiB},
            {"iterations", iterations}};
  }
};

// Rank r's value at element i: a small integer, so every partial sum is exact in a float.
float GlooValue(int rank, size_t i) { return static_cast<float>((i + 3 * rank) % 16); }

#ifdef INAC_HAVE_GLOO

// Gloo's ring all-reduce; the JSON line, and its algbw through *algbw (0 when it failed).
Json RunGloo(const Run& run, double* algbw) {
  const int n = run.workers;
  const size_t elements = static_cast<size_t>(run.size_mib * kMiB / 4);
  const int64_t total = run.iterations + 1;
  gloo::rendezvous::HashStore store;
  std::vector<std::vector<double>> ms(n, std::vector<double>(total, 0));
  std::vector<std::string> errors(n);
  std::vector<char> exact(n, 1);
  // Per iteration: the ranks fill their buffers, the main thread reads the CPU clock, all start;
  // once all are done the main thread reads it again, then the ranks check their sums.
  std::barrier sync(n + 1);
  double cpu_s = 0;
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<float> data(elements);
      std::shared_ptr<gloo::rendezvous::Context> context;
      try {
        gloo::transport::tcp::attr attr;
        attr.hostname = "127.0.0.1";
        auto device = gloo::transport::tcp::CreateDevice(attr);
        context = std::make_shared<gloo::rendezvous::Context>(r, n);
        context->setTimeout(std::chrono::seconds(120));
        context->connectFullMesh(store, device);
      } catch (const std::exception& e) {
        errors[r] = std::string("connect: ") + e.what();
      }
      for (int64_t it = 0; it < total; ++it) {
        for (size_t i = 0; i < elements; ++i) data[i] = GlooValue(r, i);
        sync.arrive_and_wait();  // filled
        sync.arrive_and_wait();  // go
        if (errors[r].empty()) {
          try {
            const auto start = std::chrono::steady_clock::now();
            gloo::AllreduceOptions opts(context);
            opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
            opts.setOutput(data.data(), elements);
            opts.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            opts.setTag(static_cast<uint32_t>(it));
            gloo::allreduce(opts);
            ms[r][it] =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
          } catch (const std::exception& e) {
            errors[r] = std::string("allreduce: ") + e.what();
          }
        }
        sync.arrive_and_wait();  // done
        for (size_t i = 0; errors[r].empty() && exact[r] && i < elements; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += GlooValue(q, i);
          if (data[i] != want) exact[r] = 0;
        }
      }
    });
  }
  for (int64_t it = 0; it < total; ++it) {
    sync.arrive_and_wait();  // filled
    const double cpu0 = ProcessCpuSeconds();
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // done
    if (it > 0) cpu_s += ProcessCpuSeconds() - cpu0;
  }
  for (std::thread& t : ranks) t.join();
  std::vector<double> times;
  for (int64_t it = 1; it < total; ++it) {
    double slowest = 0;
    for (int r = 0; r < n; ++r) slowest = std::max(slowest, ms[r][it]);
    times.push_back(slowest);
  }
  const double median = Median(times);
  const int64_t bytes = run.size_mib * kMiB;
  Json j = run.Base("gloo_ring");
  std::string error;
  for (const std::string& e : errors) error = error.empty() ? e : error;
  const bool ok = error.empty();
  *algbw = ok ? GBps(bytes, median) : 0;
  j["median_ms"] = median;
  j["iteration_ms"] = times;
  j["algbw_gbps"] = *algbw;
  j["cpu_s_per_gb"] = cpu_s / (static_cast<double>(bytes) * run.iterations / 1e9);
  j["exact"] = ok && std::all_of(exact.begin(), exact.end(), [](char e) { return e != 0; });
  if (!ok) j["error"] = error;
  return j;
}
#endif

// INAC's PS and workers on 127.78.b.x (b: the run's number, so runs never share addresses).
Json RunInac(const Run& run, int b, double* algbw) {
  const int n = run.workers;
  const int64_t total = run.iterations + 1;
  const uint32_t ps_address = Loopback(78, b, 1);
  const uint16_t port = PickUdpPort();
  agent::JobConfig config;
  config.job_id = 1;
  agent::JobConfig::Tag tag;
  tag.tag = 320;
  tag.ps = "ps";
  tag.ps_address = ps_address;
  tag.share = 1;
  for (int w = 0; w < n; ++w) {
    // Aggregated at the PS itself: no aggregators, every chunk goes to the PS raw.
    tag.members.push_back({"w" + std::to_string(w + 1), Loopback(78, b, 2 + w), "ps"});
  }
  config.tags = {tag};

  agent::PsOptions ps_options;
  ps_options.ps = "ps";
  ps_options.lanes = run.size_mib * kMiB / 4;
  ps_options.iterations = total;
  ps_options.duration_ms = 60000 + 1000 * run.size_mib * total;  // a bound for a bug
  ps_options.linger_ms = 1000;
  ps_options.unicast_results = true;
  ps_options.threads = run.ps_threads;
  ps_options.socket = agent::SocketOptions{ps_address, port};
  // Each worker's gradient is fixed (as a training step hands one over); the bench checks the
  // last iteration's sums itself, so neither a generator nor a checker competes for the cores
  // while the agents run.
  std::vector<std::vector<int32_t>> inputs(n), results(n);
  std::vector<int32_t> want(static_cast<size_t>(ps_options.lanes), 0);
  for (int w = 0; w < n; ++w) {
    inputs[w].resize(want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      inputs[w][i] = static_cast<int32_t>((i * 2654435761u + 97u * w) % 2001) - 1000;
      want[i] += inputs[w][i];
    }
  }
  std::vector<agent::WorkerOptions> worker_options(n);
  for (int w = 0; w < n; ++w) {
    agent::WorkerOptions& o = worker_options[w];
    o.worker = tag.members[w].worker;
    o.input = &inputs[w];
    o.result = &results[w];
    o.iterations = total;
    o.give_up_ms = 30000;
    o.socket = agent::SocketOptions{tag.members[w].address, port};
  }

  absl::StatusOr<agent::PsReport> ps = absl::UnknownError("not run");
  std::vector<absl::StatusOr<agent::WorkerReport>> workers(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  // Named, so that a profile (perf report --sort comm) tells the agents apart: the data-plane
  // threads the agents start inherit the name.
  threads.emplace_back([&] {
    pthread_setname_np(pthread_self(), "inac-ps");
    ps = agent::RunPs(config, ps_options);
  });
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      pthread_setname_np(pthread_self(), ("inac-w" + std::to_string(w + 1)).c_str());
      workers[w] = agent::RunWorker(config, worker_options[w]);
    });
  }
  for (std::thread& t : threads) t.join();

  Json j = run.Base("inac_ps");
  std::string error;
  bool checked = true;
  int64_t retransmissions = 0, cpu_us = 0;
  std::vector<double> times;
  for (int64_t it = 1; it < total; ++it) times.push_back(0);
  for (int w = 0; w < n; ++w) {
    if (!workers[w].ok()) {
      if (error.empty())
        error = "w" + std::to_string(w + 1) + ": " + workers[w].status().ToString();
      checked = false;
      continue;
    }
    const agent::WorkerReport& r = *workers[w];
    checked = checked && results[w] == want;
    retransmissions += r.retransmissions;
    cpu_us += r.cpu_us;
    if (static_cast<int64_t>(r.iterations.size()) != total) {
      if (error.empty())
        error = r.worker + ": " + std::to_string(r.iterations.size()) + " iterations";
      continue;
    }
    for (int64_t it = 1; it < total; ++it) {
      times[it - 1] = std::max(times[it - 1], r.iterations[it].time_ms);
    }
  }
  if (!ps.ok()) {
    if (error.empty()) error = "ps: " + ps.status().ToString();
  } else if (!ps->complete && error.empty()) {
    error = "ps: " + std::to_string(ps->iterations_done) + " iterations complete";
  }
  const double median = Median(times);
  const int64_t bytes = run.size_mib * kMiB;
  *algbw = error.empty() ? GBps(bytes, median) : 0;
  j["median_ms"] = median;
  j["iteration_ms"] = times;
  j["algbw_gbps"] = *algbw;
  if (ps.ok()) {
    const agent::PsCounters& c = ps->counters;
    const int64_t out = c.results_sent * n + c.results_resent;
    const double ps_cpu_s = ps->cpu_us / 1e6;
    cpu_us += ps->cpu_us;
    j["ps_cpu_ms"] = ps->cpu_us / 1e3;
    j["ps_packets_in"] = c.received;
    j["ps_handed_off"] = c.handed_off;
    j["ps_steered"] = ps->steered;
    j["ps_packets_out"] = out;
    j["ps_packets_in_per_cpu_s"] = ps_cpu_s > 0 ? c.received / ps_cpu_s : 0;
    j["ps_packets_out_per_cpu_s"] = ps_cpu_s > 0 ? out / ps_cpu_s : 0;
  }
  j["cpu_s_per_gb"] = cpu_us / 1e6 / (static_cast<double>(bytes) * total / 1e9);
  j["retransmissions"] = retransmissions;
  j["checked"] = checked;
  j["exact"] = error.empty() && checked;
  if (!error.empty()) j["error"] = error;
  return j;
}

// Client sessions (libinac_client's C ABI) against a serving PS on 127.79.b.x, float32.
Json RunSessions(const Run& run, int b, double* algbw) {
  const int n = run.workers;
  const int64_t total = run.iterations + 1;
  const size_t elements = static_cast<size_t>(run.size_mib * kMiB / 4);
  const uint16_t port = PickUdpPort();
  auto address = [&](int host) {
    return "127.79." + std::to_string(b) + "." + std::to_string(host);
  };
  Json members = Json::array();
  agent::JobConfig config;
  config.job_id = 1;
  agent::JobConfig::Tag tag;
  tag.tag = 330;
  tag.ps = "ps";
  tag.ps_address = Loopback(79, b, 1);
  tag.share = 1;
  for (int w = 0; w < n; ++w) {
    tag.members.push_back({"w" + std::to_string(w + 1), Loopback(79, b, 2 + w), "ps"});
    members.push_back({{"worker", tag.members[w].worker},
                       {"address", address(2 + w)},
                       {"aggregation_node", "ps"}});
  }
  config.tags = {tag};
  const std::string file = "/tmp/agent_bench_session_" + std::to_string(::getpid()) + ".json";
  {
    Json c = {{"job_id", 1},
              {"tags",
               {{{"tag", 330},
                 {"ps", "ps"},
                 {"ps_address", address(1)},
                 {"share", 1},
                 {"range", {0, 1}},
                 {"members", members}}}}};
    FILE* f = std::fopen(file.c_str(), "w");
    if (f != nullptr) {
      std::fputs(c.dump().c_str(), f);
      std::fclose(f);
    }
  }
  std::atomic<bool> stop{false};
  agent::PsOptions ps_options;
  ps_options.ps = "ps";
  ps_options.unicast_results = true;
  ps_options.stop = &stop;
  ps_options.socket = agent::SocketOptions{tag.ps_address, port};
  absl::StatusOr<agent::ServeReport> ps = absl::UnknownError("not run");
  std::thread ps_thread([&] {
    pthread_setname_np(pthread_self(), "inac-ps-serve");
    ps = agent::ServePs(config, ps_options);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // bound
  std::vector<std::vector<double>> ms(n, std::vector<double>(total, 0));
  std::vector<std::string> errors(n);
  std::vector<char> exact(n, 1);
  std::vector<int64_t> saturated(n, 0), retransmissions(n, 0), cpu_us(n, 0);
  std::barrier sync(n);
  std::vector<std::thread> threads;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      pthread_setname_np(pthread_self(), ("inac-s" + std::to_string(w + 1)).c_str());
      inac_options o;
      inac_options_init(&o);
      o.config_file = file.c_str();
      const std::string bind = address(2 + w);
      o.bind = bind.c_str();
      o.port = port;
      inac_session* session = nullptr;
      if (inac_open(1, tag.members[w].worker.c_str(), &o, &session) != INAC_OK) {
        errors[w] = std::string("open: ") + inac_last_error();
      }
      std::vector<float> data(elements);
      for (int64_t it = 0; it < total; ++it) {
        for (size_t i = 0; i < elements; ++i) data[i] = GlooValue(w, i);
        sync.arrive_and_wait();
        if (errors[w].empty()) {
          const auto start = std::chrono::steady_clock::now();
          inac_result r;
          if (inac_allreduce_f32(session, data.data(), static_cast<int64_t>(elements), &r) !=
              INAC_OK) {
            errors[w] = std::string("allreduce: ") + inac_last_error();
          }
          ms[w][it] =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
          saturated[w] += r.saturated;
          retransmissions[w] += r.retransmissions;
        }
        for (size_t i = 0; errors[w].empty() && exact[w] && i < elements; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += GlooValue(q, i);
          if (data[i] != want) exact[w] = 0;
        }
      }
      inac_stats stats;
      if (session != nullptr && inac_get_stats(session, &stats) == INAC_OK)
        cpu_us[w] = stats.cpu_us;
      inac_close(session);
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  ps_thread.join();
  std::remove(file.c_str());
  std::vector<double> times;
  for (int64_t it = 1; it < total; ++it) {
    double slowest = 0;
    for (int w = 0; w < n; ++w) slowest = std::max(slowest, ms[w][it]);
    times.push_back(slowest);
  }
  Json j = run.Base("inac_session");
  j["ps_threads"] = 1;
  std::string error;
  for (const std::string& e : errors) error = error.empty() ? e : error;
  if (error.empty() && !ps.ok()) error = "ps: " + ps.status().ToString();
  const double median = Median(times);
  const int64_t bytes = run.size_mib * kMiB;
  *algbw = error.empty() ? GBps(bytes, median) : 0;
  j["median_ms"] = median;
  j["iteration_ms"] = times;
  j["algbw_gbps"] = *algbw;
  int64_t cpu = 0, retrans = 0, sat = 0;
  for (int w = 0; w < n; ++w) {
    cpu += cpu_us[w];
    retrans += retransmissions[w];
    sat += saturated[w];
  }
  if (ps.ok()) cpu += ps->ps.cpu_us;
  j["cpu_s_per_gb"] = cpu / 1e6 / (static_cast<double>(bytes) * total / 1e9);
  j["retransmissions"] = retrans;
  j["saturated"] = sat;
  j["exact"] = error.empty() && std::all_of(exact.begin(), exact.end(), [](char e) { return e; });
  if (!error.empty()) j["error"] = error;
  return j;
}

// "2,4" -> {2, 4}; empty on anything that is not a list of positive integers.
std::vector<int64_t> ParseList(const char* text) {
  std::vector<int64_t> out;
  const char* p = text;
  while (*p != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || v <= 0) return {};
    out.push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return {};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> workers = {2, 4}, sizes = {1, 16, 64, 256}, ps_threads = {1, 2};
  int64_t iterations = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--workers" && has_value) {
      workers = ParseList(argv[++i]);
    } else if (a == "--sizes-mib" && has_value) {
      sizes = ParseList(argv[++i]);
    } else if (a == "--ps-threads" && has_value) {
      ps_threads = ParseList(argv[++i]);
      if (ps_threads.empty()) workers.clear();
    } else if (a == "--iterations" && has_value) {
      iterations = std::atoll(argv[++i]);
    } else {
      workers.clear();
    }
    if (workers.empty() || sizes.empty() || iterations <= 0 ||
        std::any_of(workers.begin(), workers.end(), [](int64_t w) { return w < 2 || w > 64; })) {
      std::fprintf(stderr,
                   "usage: agent_bench [--workers 2,4] [--sizes-mib 1,16,64,256] "
                   "[--ps-threads 1,2] [--iterations I]\n");
      return 2;
    }
  }
#ifndef INAC_HAVE_GLOO
  Print({{"bench", "agent_allreduce"},
         {"system", "gloo_ring"},
         {"skipped",
          "built without Gloo: find_package(Gloo) found no GlooConfig.cmake "
          "(Debian: libgloo-dev; scripts/install-deps.sh)"}});
#endif
  bool all_exact = true;
  int b = 0;
  for (int64_t n : workers) {
    for (int64_t mib : sizes) {
      Run run{static_cast<int>(n), mib, mib >= 256 ? std::min<int64_t>(iterations, 3) : iterations};
      double gloo = 0;
#ifdef INAC_HAVE_GLOO
      Json g = RunGloo(run, &gloo);
      all_exact = all_exact && g["exact"].get<bool>();
      Print(g);
#endif
      {
        double session = 0;
        Json sj = RunSessions(run, ++b % 250 + 1, &session);
        all_exact = all_exact && sj["exact"].get<bool>();
        Print(sj);
        if (gloo > 0 && session > 0) {
          Print({{"bench", "agent_allreduce_ratio"},
                 {"workers", n},
                 {"size_mib", mib},
                 {"system", "inac_session"},
                 {"inac_over_gloo", session / gloo},
                 {"parity_ratio", (n - 1.0) / n}});
        }
      }
      for (int64_t threads : ps_threads) {
        run.ps_threads = static_cast<int>(threads);
        double inac = 0;
        Json a = RunInac(run, ++b % 250 + 1, &inac);
        all_exact = all_exact && a["exact"].get<bool>();
        Print(a);
        if (gloo > 0 && inac > 0) {
          Print({{"bench", "agent_allreduce_ratio"},
                 {"workers", n},
                 {"size_mib", mib},
                 {"ps_threads", threads},
                 {"inac_over_gloo", inac / gloo},
                 {"parity_ratio", (n - 1.0) / n}});
        }
      }
    }
  }
  return all_exact ? 0 : 1;
}
