// Storage figures (docs/storage.md "Durability"): durable job submissions per second (one
// transaction each, job row + idempotency key + event, synchronous=FULL), the controller's snapshot
// load with 10,000 active jobs on a fat-tree k=16 topology (target < 200 ms), the same snapshot
// with a plan for every job and the derived per-switch intents (warm: plan cached in process; cold:
// first read after open), and durable event-log appends per second. Runs on a temporary file in
// $TMPDIR (so on that file system's fsync cost). Prints one JSON line.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/generators.h"
#include "core/plan.h"
#include "storage/sqlite_storage.h"
#include "tests/fixtures/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;
using inac::core::JobId;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Fail(const absl::Status& status) {
  std::cerr << "storage_bench: " << status << "\n";
  return 1;
}

inac::core::JobSpec SpecFor(const inac::core::Topology& topo, int i) {
  inac::core::JobSpec spec;
  spec.name = "job-" + std::to_string(i);
  spec.tenant = "tenant-" + std::to_string(i % 8);
  spec.priority = i % 4;
  const size_t hosts = topo.hosts.size();
  for (int w = 0; w < 8; ++w) spec.workers.push_back(topo.hosts[(i * 9 + w) % hosts].id);
  spec.parameter_servers = {topo.hosts[(i * 9 + 8) % hosts].id};
  spec.gradient_bytes = 102'760'448;
  spec.compute_ms = 52;
  spec.iterations = 10000;
  spec.batch_size = 64;
  spec.batch_sizes = {32, 64, 128};
  return spec;
}

// A plausible plan for `job`: every worker aggregates at its ToR, each ToR sends to the PS.
inac::core::JobPlan PlanFor(const inac::core::Topology& topo, const inac::core::Job& job) {
  inac::core::JobPlan p;
  p.job_id = job.id;
  const std::string& ps = job.spec.parameter_servers[0];
  p.ps_shares = {{ps, 1.0}};
  auto tor = [&](const std::string& host) {
    for (const auto& l : topo.links) {
      if (l.a == host) return l.b;
      if (l.b == host) return l.a;
    }
    return std::string();
  };
  std::string ps_tor = tor(ps);
  for (const std::string& w : job.spec.workers) {
    inac::core::FlowPlan f;
    f.worker = w;
    f.ps = ps;
    f.aggregation_node = tor(w);
    f.path = {w, f.aggregation_node};
    p.flows.push_back(f);
    p.aggregators[f.aggregation_node] = 64;
  }
  for (const auto& [sw, count] : p.aggregators) {
    inac::core::AggregatorPlan a;
    a.switch_id = sw;
    a.ps = ps;
    a.path = {sw, ps_tor, ps};
    p.aggregator_paths.push_back(a);
  }
  p.batch_size = 64;
  p.priority = job.spec.priority;
  p.rate_gbps = 25;
  p.comm_ms = 30;
  p.iteration_ms = 82;
  return p;
}

}  // namespace

int main() {
  const std::string dir = inac::fixtures::MakeTempDir("bench");
  if (dir.empty()) return Fail(absl::InternalError("mkdtemp failed"));
  auto topo = inac::core::GenerateFatTree(16, inac::core::GeneratorOptions{});
  if (!topo.ok()) return Fail(topo.status());

  // 1. Durable submissions, one transaction each.
  constexpr int kInserts = 300;
  double inserts_per_s = 0;
  double events_per_s = 0;
  {
    auto storage = inac::storage::SqliteStorage::Open(dir + "/durable.db");
    if (!storage.ok()) return Fail(storage.status());
    inac::core::Event event;
    event.kind = "job_submitted";
    event.message = "job submitted";
    auto t0 = Clock::now();
    for (int i = 0; i < kInserts; ++i) {
      auto r = (*storage)->jobs().Create(
          SpecFor(*topo, i), i, inac::core::IdempotencyKey{"key-" + std::to_string(i), "h"},
          {event});
      if (!r.ok()) return Fail(r.status());
    }
    inserts_per_s = kInserts / (Ms(Clock::now() - t0) / 1000);

    // 3. Durable event appends, one transaction each.
    constexpr int kEvents = 300;
    event.data_json = R"({"switch":"e0_0","version":12})";
    t0 = Clock::now();
    for (int i = 0; i < kEvents; ++i) {
      auto r = (*storage)->events().Append(event);
      if (!r.ok()) return Fail(r.status());
    }
    events_per_s = kEvents / (Ms(Clock::now() - t0) / 1000);
  }

  // 2. Snapshot with 10,000 active jobs on fat-tree k=16 (bulk-loaded without fsync per job).
  constexpr int kJobs = 10000;
  const std::string snap_db = dir + "/snapshot.db";
  std::vector<inac::core::Job> jobs;
  {
    inac::storage::SqliteOptions bulk;
    bulk.synchronous_full = false;
    auto storage = inac::storage::SqliteStorage::Open(snap_db, bulk);
    if (!storage.ok()) return Fail(storage.status());
    if (auto v = (*storage)->topology().Put(*topo, 1); !v.ok()) return Fail(v.status());
    for (int i = 0; i < kJobs; ++i) {
      auto r = (*storage)->jobs().Create(SpecFor(*topo, i), i);
      if (!r.ok()) return Fail(r.status());
      jobs.push_back(r->job);
    }
  }
  std::vector<double> snapshot_ms;
  size_t snapshot_jobs = 0;
  {
    auto storage = inac::storage::SqliteStorage::Open(snap_db);
    if (!storage.ok()) return Fail(storage.status());
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = Clock::now();
      auto snap = (*storage)->ReadSnapshot();
      snapshot_ms.push_back(Ms(Clock::now() - t0));
      if (!snap.ok()) return Fail(snap.status());
      snapshot_jobs = snap->jobs.size();
    }
  }

  // 2b. The same plus a plan for every job and its derived intents. "cold" is the first snapshot
  // after open (a restart: the plan is decoded); "warm" is the controller loop's case (the plan it
  // saved is cached in process; plans are immutable per version).
  std::vector<double> with_plan_ms;
  double cold_ms = 0;
  double save_plan_ms = 0;
  size_t intents = 0;
  {
    inac::core::Plan plan;
    plan.algorithm = "bench";
    for (const auto& job : jobs) plan.jobs.push_back(PlanFor(*topo, job));
    plan.version = 1;
    std::vector<inac::core::SwitchIntent> derived = inac::core::DeriveSwitchIntents(*topo, plan);
    auto storage = inac::storage::SqliteStorage::Open(snap_db);
    if (!storage.ok()) return Fail(storage.status());
    auto t0 = Clock::now();
    auto v = (*storage)->plans().Save(plan, derived, 2);
    save_plan_ms = Ms(Clock::now() - t0);
    if (!v.ok()) return Fail(v.status());
    for (int rep = 0; rep < 5; ++rep) {
      t0 = Clock::now();
      auto snap = (*storage)->ReadSnapshot();
      with_plan_ms.push_back(Ms(Clock::now() - t0));
      if (!snap.ok()) return Fail(snap.status());
      intents = snap->intents.size();
    }
  }
  {
    auto storage = inac::storage::SqliteStorage::Open(snap_db);
    if (!storage.ok()) return Fail(storage.status());
    auto t0 = Clock::now();
    auto snap = (*storage)->ReadSnapshot();
    cold_ms = Ms(Clock::now() - t0);
    if (!snap.ok()) return Fail(snap.status());
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);

  std::cout << "{\"bench\":\"storage\",\"durable_job_inserts_per_s\":"
            << static_cast<int64_t>(inserts_per_s)
            << ",\"durable_event_appends_per_s\":" << static_cast<int64_t>(events_per_s)
            << ",\"snapshot_jobs\":" << snapshot_jobs << ",\"snapshot_topology\":\"fat-tree k=16\""
            << ",\"snapshot_ms_p50\":" << Median(snapshot_ms) << ",\"snapshot_target_ms\":200"
            << ",\"plan_save_ms\":" << save_plan_ms
            << ",\"snapshot_with_plan_warm_ms_p50\":" << Median(with_plan_ms)
            << ",\"snapshot_with_plan_cold_ms\":" << cold_ms << ",\"snapshot_intents\":" << intents
            << "}\n";
  return 0;
}
