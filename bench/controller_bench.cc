// The controller service end to end (docs/controller.md "Tests and figures"), in one process but
// over the real edges: the REST API (loopback, through the production client
// northbound/api_client.h), the controller loop, SQLite on disk (WAL, synchronous=FULL: an
// acknowledged job is durable) and 20 emulated P4Runtime switches on loopback gRPC ports (the
// `--demo` fabric: fat-tree k=4, same switch client factory as `inac serve`). Prints one JSON line
// per scenario:
//  - rest_submit: durable job submissions per second and latency percentiles, C client threads
//    each POSTing jobs (with an Idempotency-Key) while the loop re-plans behind them;
//  - submit_to_programmed: time from POST /jobs to the job being `running`, which the controller
//    sets only once every switch holding one of its entries applied the plan (p50/p99), with the
//    three demo jobs in the background; each sample job is cancelled (and its entries removed)
//    before the next, and each submission finds the loop idle;
//  - restart_reconcile: with 1,000 active jobs programmed, the controller is stopped and a new
//    one started on the same database (cold: the database is reopened); time from opening it until
//    its first pass completed with every switch reconciled (read back, diffed, repaired), and the
//    same when every switch also restarted empty (everything re-pushed).
//
// Usage: controller_bench [--submit N] [--clients C] [--samples S] [--restart-jobs J]
//                         [--algorithm A] [--log-level warn] [--audit on|off]
// (--audit off serves without the audit log of writes, to measure what it costs.)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/cmd_serve.h"
#include "core/generators.h"
#include "core/json.h"
#include "core/models.h"
#include "nlohmann/json.hpp"
#include "northbound/api_client.h"
#include "northbound/http_api.h"
#include "server/controller.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/p4runtime_switch_client.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/temp_dir.h"

namespace {

using inac::core::JobSpec;
using inac::northbound::ApiClient;
using inac::northbound::HttpApi;
using inac::server::Controller;
using inac::server::ControllerOptions;
using inac::southbound::emulator::EmulatedSwitch;
using inac::southbound::emulator::EmulatedSwitchOptions;
using inac::storage::SqliteStorage;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// --audit off: the API is served without the audit log of writes (HttpApi audits every write by
// default), so that the two runs show what the audit's extra transaction per write costs.
bool g_audit = true;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "controller_bench: " << what << "\n";
  std::exit(1);
}

// A client of the API on `port` that keeps its connection (one per thread), 60 s timeouts.
std::unique_ptr<ApiClient> Client(int port) {
  inac::northbound::ApiClientOptions options;
  options.server = absl::StrCat("http://127.0.0.1:", port);
  options.timeout_ms = 60000;
  options.keep_alive = true;
  auto client = ApiClient::Create(options);
  if (!client.ok()) Die(client.status().ToString());
  return *std::move(client);
}

// The demo fabric: fat-tree k=4, every switch an in-process emulated P4Runtime switch.
class Fabric {
 public:
  Fabric() {
    topology_ = inac::core::GenerateFatTree(4, inac::core::GeneratorOptions{}).value();
    for (size_t i = 0; i < topology_.switches.size(); ++i) {
      auto sw = Start("127.0.0.1:0", i + 1);
      topology_.switches[i].p4runtime =
          inac::core::P4RuntimeEndpoint{sw->address(), static_cast<uint64_t>(i + 1)};
      switches_.push_back(std::move(sw));
    }
  }
  ~Fabric() {
    for (auto& sw : switches_) sw->Shutdown();
  }
  // Every switch shut down and started again, empty, on its port.
  void RestartEmpty() {
    for (size_t i = 0; i < switches_.size(); ++i) {
      std::string address = switches_[i]->address();
      switches_[i]->Shutdown();
      switches_[i]->Wait();
      switches_[i].reset();
      switches_[i] = Start(address, i + 1);
    }
  }
  int64_t Entries() const {
    int64_t n = 0;
    for (const auto& sw : switches_) n += sw->NumTableEntries();
    return n;
  }
  const inac::core::Topology& topology() const { return topology_; }

 private:
  static std::unique_ptr<EmulatedSwitch> Start(const std::string& address, uint64_t device) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      EmulatedSwitchOptions options;
      options.listen_address = address;
      options.device_id = device;
      auto sw = EmulatedSwitch::Start(options);
      if (sw.ok()) return std::move(*sw);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Die("cannot start an emulated switch on " + address);
  }
  inac::core::Topology topology_;
  std::vector<std::unique_ptr<EmulatedSwitch>> switches_;
};

// Storage + controller + REST API on a loopback port.
class Service {
 public:
  Service(const std::string& db, const ControllerOptions& options) {
    auto storage = SqliteStorage::Open(db);
    if (!storage.ok()) Die(storage.status().ToString());
    storage_ = std::move(*storage);
    controller_ =
        std::make_unique<Controller>(storage_.get(), inac::southbound::CreateP4RuntimeClient,
                                     inac::server::SystemClockMs, options);
  }
  ~Service() { Stop(); }

  void StartController() {
    if (auto s = controller_->Start(); !s.ok()) Die(s.ToString());
  }
  void StartApi() {
    inac::server::ApiServices services = controller_->services();
    if (!g_audit) services.audit = nullptr;
    api_ = std::make_unique<HttpApi>(services, inac::northbound::HttpApiOptions{});
    auto port = api_->Bind("127.0.0.1", 0);
    if (!port.ok()) Die(port.status().ToString());
    port_ = *port;
    server_ = std::thread([this] { api_->Serve(); });
  }
  void Stop() {
    if (api_) {
      api_->Stop();
      server_.join();
      api_.reset();
    }
    if (controller_) controller_->Stop();
  }

  Controller& controller() { return *controller_; }
  SqliteStorage& storage() { return *storage_; }
  int port() const { return port_; }

  // True once the loop completed a pass and every managed switch holds the latest plan.
  bool Reconciled() {
    auto plan = storage_->plans().Latest();
    if (!plan.ok() || !plan->has_value()) return false;
    auto metrics = controller_->Metrics();
    if (metrics.loop_passes < 1) return false;
    for (const auto& s : metrics.switches) {
      if (!s.managed) continue;
      if (!s.connected || !s.last_error.empty() || s.applied_version != (*plan)->plan.version) {
        return false;
      }
    }
    return true;
  }
  // Polls Reconciled() every millisecond; false after `timeout_s`.
  bool AwaitReconciled(double timeout_s) {
    auto deadline = SteadyClock::now() + std::chrono::duration<double>(timeout_s);
    while (SteadyClock::now() < deadline) {
      if (Reconciled()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

 private:
  std::unique_ptr<SqliteStorage> storage_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HttpApi> api_;
  std::thread server_;
  int port_ = 0;
};

// A random PS job on the 16 hosts of the fat-tree: 2-4 workers and one PS, distinct hosts.
JobSpec RandomJob(const inac::core::Topology& topology, std::mt19937_64& rng, int n) {
  std::vector<std::string> hosts;
  for (const auto& h : topology.hosts) hosts.push_back(h.id);
  std::shuffle(hosts.begin(), hosts.end(), rng);
  int workers = 2 + static_cast<int>(rng() % 3);
  JobSpec spec;
  spec.name = absl::StrCat("bench-", n);
  spec.tenant = "bench";
  spec.priority = static_cast<int>(rng() % 4);
  spec.workers.assign(hosts.begin(), hosts.begin() + workers);
  spec.parameter_servers = {hosts[workers]};
  static const char* kModels[] = {"ResNet50", "VGG16", "AlexNet"};
  const auto* model = inac::core::FindModel(kModels[rng() % 3]);
  spec.model = std::string(model->name);
  spec.gradient_bytes = model->gradient_bytes;
  spec.compute_ms = model->compute_ms;
  spec.iterations = 1000000;
  spec.batch_size = 32;
  return spec;
}

std::string TempDb(const std::string& name) {
  const std::string dir = inac::fixtures::MakeTempDir("bench");
  if (dir.empty()) Die("mkdtemp failed");
  return absl::StrCat(dir, "/", name, ".db");
}

void PutTopology(Service& service, const inac::core::Topology& topology) {
  if (!service.storage().topology().Put(topology, inac::server::SystemClockMs()).ok()) {
    Die("cannot store the topology");
  }
}

// Removes the temporary directory of `db` when the scenario ends.
struct TempDbCleanup {
  std::string db;
  ~TempDbCleanup() {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(db).parent_path(), ignored);
  }
};

void RestSubmit(Fabric& fabric, const ControllerOptions& options, int jobs, int clients) {
  TempDbCleanup cleanup{TempDb("submit")};
  Service service(cleanup.db, options);
  PutTopology(service, fabric.topology());
  service.StartController();
  service.StartApi();
  std::vector<JobSpec> specs;
  std::mt19937_64 rng(7);
  for (int i = 0; i < jobs; ++i) specs.push_back(RandomJob(fabric.topology(), rng, i));
  std::atomic<int> next{0}, failures{0}, connected{0};
  std::atomic<bool> go{false};
  std::mutex mu;
  std::vector<double> latencies;
  SteadyClock::time_point start;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::unique_ptr<ApiClient> client = Client(service.port());
      // Connections are opened before the clock starts, one client at a time: cpp-httplib (as
      // Debian builds it) listens with a backlog of 5, and a burst of simultaneous connects can
      // lose a SYN (1 s retransmission); that is connection setup, not submission cost.
      while (connected.load() != c) std::this_thread::yield();
      (void)client->SendRaw({.target = "/api/v1/healthz"});
      connected++;
      while (!go.load()) std::this_thread::yield();
      std::vector<double> mine;
      while (true) {
        int i = next++;
        if (i >= jobs) break;
        inac::northbound::RawRequest post{
            .method = "POST",
            .target = "/api/v1/jobs",
            .body = inac::core::JobSpecToJson(specs[i]).dump(),
            .headers = {{"Idempotency-Key", absl::StrCat("bench-", i)}}};
        auto t0 = SteadyClock::now();
        auto res = client->SendRaw(post);
        mine.push_back(Ms(SteadyClock::now() - t0));
        if (!res.ok() || res->http_status != 201) failures++;
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  while (connected.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  start = SteadyClock::now();
  go = true;
  for (auto& t : threads) t.join();
  double seconds = Ms(SteadyClock::now() - start) / 1000;
  auto metrics = service.controller().Metrics();
  service.Stop();
  Json line = {{"bench", "controller"},
               {"scenario", "rest_submit"},
               {"jobs", jobs},
               {"clients", clients},
               {"audit", g_audit},
               {"failures", failures.load()},
               {"submissions_per_s", jobs / seconds},
               {"p50_ms", Percentile(latencies, 0.50)},
               {"p99_ms", Percentile(latencies, 0.99)},
               {"max_ms", Percentile(latencies, 1.0)},
               {"plans_during_run", metrics.plans_computed},
               {"durable", "WAL + synchronous=FULL, one transaction per job"}};
  std::cout << line.dump() << std::endl;
}

void SubmitToProgrammed(Fabric& fabric, const ControllerOptions& options, int samples) {
  fabric.RestartEmpty();
  TempDbCleanup cleanup{TempDb("latency")};
  Service service(cleanup.db, options);
  PutTopology(service, fabric.topology());
  service.StartController();
  service.StartApi();
  for (const JobSpec& spec : inac::cli::DemoJobs()) {
    if (!service.controller().jobs().SubmitJob(spec, std::nullopt).ok()) Die("demo job refused");
  }
  if (!service.AwaitReconciled(120)) Die("demo jobs not programmed");
  std::unique_ptr<ApiClient> client = Client(service.port());
  std::mt19937_64 rng(11);
  std::vector<double> latencies, posts;
  int timeouts = 0;
  for (int i = 0; i < samples; ++i) {
    JobSpec spec = RandomJob(fabric.topology(), rng, i);
    // Each submission finds the loop idle (one right after a pass would also wait for the rest of
    // the debounce window).
    std::this_thread::sleep_for(std::chrono::milliseconds(options.debounce_ms + 50));
    auto t0 = SteadyClock::now();
    auto res = client->Call("POST", "/jobs", inac::core::JobSpecToJson(spec));
    if (!res.ok() || res->http_status != 201) Die("submission failed");
    posts.push_back(Ms(SteadyClock::now() - t0));
    int64_t id = res->body["id"].get<int64_t>();
    std::string path = absl::StrCat("/jobs/", id);
    bool running = false;
    while (Ms(SteadyClock::now() - t0) < 30000) {
      auto job = client->Call("GET", path);
      if (job.ok() && job->body["state"] == "running") {
        running = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (running) {
      latencies.push_back(Ms(SteadyClock::now() - t0));
    } else {
      timeouts++;
    }
    (void)client->Call("DELETE", path);
    // Let the cancellation reach the switches before the next sample.
    service.controller().Sync(30000).IgnoreError();
    if (!service.AwaitReconciled(30)) Die("cancellation not programmed");
  }
  service.Stop();
  Json line = {{"bench", "controller"},
               {"scenario", "submit_to_programmed"},
               {"fabric", "fat-tree k=4, 20 emulated P4Runtime switches"},
               {"background_jobs", 3},
               {"samples", samples},
               {"timeouts", timeouts},
               {"p50_ms", Percentile(latencies, 0.50)},
               {"p99_ms", Percentile(latencies, 0.99)},
               {"max_ms", Percentile(latencies, 1.0)},
               {"post_p50_ms", Percentile(posts, 0.50)},
               {"debounce_ms", options.debounce_ms},
               {"poll_ms", 2}};
  std::cout << line.dump() << std::endl;
}

void RestartReconcile(Fabric& fabric, const ControllerOptions& options, int jobs) {
  fabric.RestartEmpty();
  TempDbCleanup cleanup{TempDb("restart")};
  const std::string& db = cleanup.db;
  {
    // Bulk load (not the measured part): synchronous=NORMAL.
    inac::storage::SqliteOptions bulk;
    bulk.synchronous_full = false;
    auto storage = SqliteStorage::Open(db, bulk);
    if (!storage.ok()) Die(storage.status().ToString());
    if (!(*storage)->topology().Put(fabric.topology(), inac::server::SystemClockMs()).ok()) {
      Die("topology");
    }
    std::mt19937_64 rng(13);
    for (int i = 0; i < jobs; ++i) {
      if (!(*storage)->jobs().Create(RandomJob(fabric.topology(), rng, i), 1).ok()) Die("job");
    }
  }
  double first_ms = 0, restart_ms = 0, restart_empty_ms = 0;
  int64_t plans_on_restart = -1, writes_on_restart = -1, writes_on_empty = -1;
  int64_t entries = 0, running = 0;
  {
    Service service(db, options);
    auto t0 = SteadyClock::now();
    service.StartController();
    if (!service.AwaitReconciled(900)) Die("1,000 jobs not programmed in 15 min");
    first_ms = Ms(SteadyClock::now() - t0);
    service.controller().Sync(60000).IgnoreError();  // jobs -> running
    auto counts = service.storage().jobs().CountByState();
    if (counts.ok()) running = (*counts)[inac::core::JobState::kRunning];
    entries = fabric.Entries();
  }
  {
    auto t0 = SteadyClock::now();  // includes opening the database (cold)
    Service service(db, options);
    service.StartController();
    if (!service.AwaitReconciled(600)) Die("restart did not reconcile");
    restart_ms = Ms(SteadyClock::now() - t0);
    auto m = service.controller().Metrics();
    plans_on_restart = m.plans_computed;
    writes_on_restart = m.southbound_writes;
  }
  fabric.RestartEmpty();
  {
    auto t0 = SteadyClock::now();
    Service service(db, options);
    service.StartController();
    if (!service.AwaitReconciled(600)) Die("restart onto empty switches did not reconcile");
    restart_empty_ms = Ms(SteadyClock::now() - t0);
    writes_on_empty = service.controller().Metrics().southbound_writes;
  }
  Json line = {{"bench", "controller"},
               {"scenario", "restart_reconcile"},
               {"jobs", jobs},
               {"jobs_running", running},
               {"table_entries", entries},
               {"first_plan_and_program_ms", first_ms},
               {"restart_to_reconciled_ms", restart_ms},
               {"restart_plans_computed", plans_on_restart},
               {"restart_writes", writes_on_restart},
               {"restart_switches_empty_to_reconciled_ms", restart_empty_ms},
               {"restart_switches_empty_writes", writes_on_empty}};
  std::cout << line.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  int submit = 300, clients = 8, samples = 100, restart_jobs = 1000;
  std::string log_level = "warn";
  ControllerOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    std::string value = argv[i + 1];
    if (flag == "--submit") {
      submit = std::atoi(value.c_str());
    } else if (flag == "--clients") {
      clients = std::atoi(value.c_str());
    } else if (flag == "--samples") {
      samples = std::atoi(value.c_str());
    } else if (flag == "--restart-jobs") {
      restart_jobs = std::atoi(value.c_str());
    } else if (flag == "--algorithm") {
      options.algorithm = value;
    } else if (flag == "--log-level") {
      log_level = value;
    } else if (flag == "--audit") {
      g_audit = value != "off";
    } else {
      Die("unknown flag " + flag);
    }
  }
  // Warnings and errors on stderr; stdout is the JSON lines only.
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "bench", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  spdlog::set_level(spdlog::level::from_str(log_level));
  Fabric fabric;
  if (submit > 0) RestSubmit(fabric, options, submit, clients);
  if (samples > 0) SubmitToProgrammed(fabric, options, samples);
  if (restart_jobs > 0) RestartReconcile(fabric, options, restart_jobs);
  return 0;
}
