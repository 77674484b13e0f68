// INAC against BMv2 simple_switch_grpc and against the emulated switch, side by side in one run.
// Prints one JSON line per figure:
//  - interop_write: P4Runtime write rate (ina_worker INSERTs) at 100 and 1,000 updates per batch,
//    INAC's SwitchSession::Write next to a raw stub sending pre-built requests (what the target
//    absorbs from one client with no client work), and for BMv2 the Python client's reference
//    figures measured on this machine (../shared/peers/README.md: 11k/s at 100, 15k/s at 1,000);
//  - interop_reconcile: P4RuntimeSwitchClient::Reconcile of ~5,000 entities onto an empty switch,
//    on the converged switch (read + diff, 0 writes), the wildcard read alone, deleting all, and
//    one pipeline push (P4Info + device config, VERIFY_AND_COMMIT);
//  - interop_restore: `inac serve` (default settings) with one switch holding 12 jobs; the switch
//    is SIGKILLed, stays down for 1, 5 and 30 s, and is restarted empty; the figures are the time
//    from "the restarted switch accepts connections" to "it has the controller's pipeline"
//    (cookie polled every 10 ms: a Read during the push can crash BMv2, bmv2_switch.h) and to "its
//    read-back equals the intent" (20 ms polls), for a BMv2 and for an `inac switch` process.
// The emulator of the write and reconcile figures runs in-process (as in southbound_bench); the
// restore figures use real processes. Without BMv2 (tests/interop/peers.h finds it) the emulator
// figures are printed with a line saying BMv2 was not found. Write and reconcile figures are
// medians over 5 and 3 repetitions; each restore figure is one sample. Runs in ~100 s.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "grpcpp/grpcpp.h"
#include "p4/v1/p4runtime.grpc.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_session.h"
#include "tests/interop/bmv2_switch.h"
#include "tests/interop/peers.h"
#include "tests/system/harness.h"

namespace {

using inac::southbound::IntentTranslator;
using inac::southbound::P4InfoIndex;
using inac::southbound::P4RuntimeSwitchClient;
using inac::southbound::P4RuntimeSwitchClientOptions;
using inac::southbound::SessionOptions;
using inac::southbound::SwitchSession;
using Clock = std::chrono::steady_clock;
namespace systest = inac::systest;
namespace interop = inac::interop;

constexpr uint64_t kDevice = 1;
constexpr int kWriteEntries = 30000;
constexpr int kReps = 5;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string Fixed(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// ~(2 * inputs + 3) entities per job.
inac::core::SwitchIntent MakeIntent(int jobs, int inputs) {
  inac::core::SwitchIntent intent;
  intent.switch_id = "bench";
  for (int j = 0; j < jobs; ++j) {
    const inac::core::JobId job = 1 + j;
    const uint32_t tag = static_cast<uint32_t>(job * 8);
    const uint32_t group = static_cast<uint32_t>(1 + j);
    const uint32_t ps = 0x0b000000u + j;
    intent.jobs.push_back({tag, job, static_cast<uint32_t>(inputs), (uint64_t{1} << inputs) - 1,
                           group, static_cast<uint32_t>(j * 8), 8, j % 7, ps});
    for (int i = 0; i < inputs; ++i) {
      const uint32_t worker = 0x0a000000u + static_cast<uint32_t>(j * 256 + i);
      intent.inputs.push_back({tag, job, worker, static_cast<uint32_t>(i)});
      intent.routes.push_back({tag, job, worker, ps, static_cast<uint32_t>(1 + i % 32), 0});
    }
    intent.routes.push_back({tag, job, ps, 0, 0, group});
    intent.multicast_groups.push_back({group, job, {1, 2, 3, 4}});
  }
  return intent;
}

// P4Runtime entities of `intent` (southbound::IntentTranslator): each aggregation is an ina_job
// and an ina_live entry.
int64_t EntityCount(const inac::core::SwitchIntent& intent) {
  return static_cast<int64_t>(2 * intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                              intent.multicast_groups.size() + intent.host_ports.size());
}

// A target under test: where it listens and the device config its pipeline needs.
struct Target {
  std::string name;  // "bmv2" | "emulator"
  std::string address;
  std::string device_config;
};

SessionOptions Session(const Target& target, size_t batch, uint64_t election_low) {
  SessionOptions options;
  options.address = target.address;
  options.device_id = kDevice;
  options.election_id = {7, election_low};
  options.max_batch_updates = batch;
  options.rpc_timeout = absl::Seconds(60);
  return options;
}

// --- Write rate ----------------------------------------------------------------------------------

// INSERTs of `kWriteEntries` ina_worker entries (a table of 65,536).
std::vector<p4::v1::Update> WorkerInserts(const IntentTranslator& translator) {
  std::vector<p4::v1::Update> updates;
  updates.reserve(kWriteEntries);
  for (int i = 0; i < kWriteEntries; ++i) {
    inac::core::AggregationInputIntent input{static_cast<uint32_t>(8 * (1 + i / 200)), 1 + i / 200,
                                             0x0a000000u + i, static_cast<uint32_t>(i % 200)};
    p4::v1::Update update;
    update.set_type(p4::v1::Update::INSERT);
    *update.mutable_entity() = *translator.InputEntry(input);
    updates.push_back(std::move(update));
  }
  return updates;
}

absl::Status BenchWrites(const Target& target, const IntentTranslator& translator,
                         const P4InfoIndex& p4info) {
  std::vector<p4::v1::Update> updates = WorkerInserts(translator);
  uint64_t cookie = 100;
  for (size_t batch : {size_t{100}, size_t{1000}}) {
    SwitchSession session(Session(target, batch, batch));
    if (absl::Status s = session.Connect(); !s.ok()) return s;
    if (!session.AwaitPrimary(absl::Seconds(10))) return absl::UnavailableError("not primary");
    // The raw client: pre-built requests, one stub, nothing decoded but the status.
    std::vector<p4::v1::WriteRequest> requests;
    for (size_t next = 0; next < updates.size();) {
      p4::v1::WriteRequest& request = requests.emplace_back();
      request.set_device_id(kDevice);
      request.mutable_election_id()->set_high(7);
      request.mutable_election_id()->set_low(batch);
      for (size_t k = 0; k < batch && next < updates.size(); ++k) {
        *request.add_updates() = updates[next++];
      }
    }
    auto stub = p4::v1::P4Runtime::NewStub(
        grpc::CreateChannel(target.address, grpc::InsecureChannelCredentials()));
    std::vector<double> ours, raw;
    int64_t rpcs = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      // VERIFY_AND_COMMIT clears the tables before each run.
      if (absl::Status s = session.SetPipeline(p4info.p4info(), target.device_config, ++cookie);
          !s.ok()) {
        return s;
      }
      auto t0 = Clock::now();
      auto results = session.WriteInPlace(&updates, &rpcs);  // as the reconciler writes
      auto t1 = Clock::now();
      if (!results.ok()) return results.status();
      for (const absl::Status& s : *results) {
        if (!s.ok()) return s;
      }
      ours.push_back(kWriteEntries / (Ms(t1 - t0) / 1000.0));
      if (rep == 0) {  // the switch really holds them (outside the clock)
        p4::v1::Entity filter;
        filter.mutable_table_entry()->set_table_id(translator.worker_table_id());
        auto read = session.Read({filter});
        if (!read.ok()) return read.status();
        if (read->size() != updates.size()) {
          return absl::InternalError(
              absl::StrCat("wrote ", updates.size(), ", read back ", read->size()));
        }
      }

      if (absl::Status s = session.SetPipeline(p4info.p4info(), target.device_config, ++cookie);
          !s.ok()) {
        return s;
      }
      t0 = Clock::now();
      for (const p4::v1::WriteRequest& request : requests) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        p4::v1::WriteResponse response;
        grpc::Status status = stub->Write(&context, request, &response);
        if (!status.ok()) return absl::InternalError("raw write: " + status.error_message());
      }
      t1 = Clock::now();
      raw.push_back(kWriteEntries / (Ms(t1 - t0) / 1000.0));
    }
    const double inac_rate = Median(ours), raw_rate = Median(raw);
    const int64_t expected_rpcs = (kWriteEntries + static_cast<int64_t>(batch) - 1) / batch;
    if (rpcs != expected_rpcs) return absl::InternalError("unexpected batching");
    std::string line = absl::StrCat("{\"bench\":\"interop_write\",\"target\":\"", target.name,
                                    "\",\"entries\":", kWriteEntries, ",\"batch_updates\":", batch,
                                    ",\"rpcs\":", rpcs,
                                    ",\"inac_entries_per_s\":", static_cast<int64_t>(inac_rate),
                                    ",\"raw_stub_entries_per_s\":", static_cast<int64_t>(raw_rate),
                                    ",\"inac_vs_raw\":", Fixed(inac_rate / raw_rate, 3));
    if (target.name == "bmv2") {
      const double python = batch == 100 ? 11000 : 15000;
      absl::StrAppend(&line, ",\"python_reference_entries_per_s\":", static_cast<int64_t>(python),
                      ",\"inac_vs_python\":", Fixed(inac_rate / python, 3));
    }
    std::cout << line << "}" << std::endl;
  }
  return absl::OkStatus();
}

// --- Reconcile -----------------------------------------------------------------------------------

absl::Status BenchReconcile(const Target& target, const IntentTranslator& translator) {
  const inac::core::SwitchIntent intent = MakeIntent(/*jobs=*/143, /*inputs=*/16);  // 5,005
  const int64_t entities = EntityCount(intent);
  P4RuntimeSwitchClientOptions options;
  options.switch_id = "bench";
  options.session = Session(target, 2000, 5000);
  options.device_config = target.device_config;
  auto client = P4RuntimeSwitchClient::Create(options);
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->Connect(); !s.ok()) return s;
  if (!(*client)->AwaitPrimary(absl::Seconds(10))) return absl::UnavailableError("not primary");
  // A fresh pipeline (its cookie differs from the write benchmark's): the switch starts empty.
  const auto p0 = Clock::now();
  auto pushed = (*client)->EnsurePipeline();
  const double pipeline_ms = Ms(Clock::now() - p0);
  if (!pushed.ok()) return pushed.status();
  if (!*pushed) return absl::InternalError("the pipeline was not pushed");
  std::vector<double> restore_ms, converged_ms, clear_ms, read_ms;
  for (int rep = 0; rep < kReps; ++rep) {
    auto t0 = Clock::now();
    auto restore = (*client)->Reconcile(intent);
    auto t1 = Clock::now();
    auto converged = (*client)->Reconcile(intent);
    auto t2 = Clock::now();
    if (!restore.ok()) return restore.status();
    if (!converged.ok()) return converged.status();
    if (restore->inserted != entities || !restore->converged()) {
      return absl::InternalError(absl::StrCat("restore inserted ", restore->inserted, " of ",
                                              entities, ", failed ", restore->failed));
    }
    if (converged->writes() != 0) return absl::InternalError("converged run wrote");
    restore_ms.push_back(Ms(t1 - t0));
    converged_ms.push_back(Ms(t2 - t1));
    {
      SwitchSession reader(Session(target, 2000, 1));
      auto t3 = Clock::now();
      auto read = reader.Read(translator.OwnedStateFilters());
      auto t4 = Clock::now();
      if (!read.ok() || static_cast<int64_t>(read->size()) != entities) {
        return absl::InternalError("read-back size");
      }
      read_ms.push_back(Ms(t4 - t3));
    }
    auto t5 = Clock::now();
    auto cleared = (*client)->Reconcile(inac::core::SwitchIntent{});
    auto t6 = Clock::now();
    if (!cleared.ok() || cleared->deleted != entities) return absl::InternalError("clear");
    clear_ms.push_back(Ms(t6 - t5));
  }
  std::cout << "{\"bench\":\"interop_reconcile\",\"target\":\"" << target.name
            << "\",\"entities\":" << entities
            << ",\"restore_empty_ms\":" << Fixed(Median(restore_ms))
            << ",\"converged_ms\":" << Fixed(Median(converged_ms))
            << ",\"read_only_ms\":" << Fixed(Median(read_ms))
            << ",\"delete_all_ms\":" << Fixed(Median(clear_ms))
            << ",\"pipeline_push_ms\":" << Fixed(pipeline_ms) << "}" << std::endl;
  (*client)->Disconnect();
  return absl::OkStatus();
}

// --- Restore after a switch restart ------------------------------------------------------------

// One switch with a P4Runtime endpoint (lf0 of a 1-leaf, 1-spine fabric; the spine is planned but
// not managed) and a controller holding `jobs` jobs on it.
class RestoreScenario {
 public:
  // `restart` kills nothing: it starts the switch again (empty, same port) and returns once it
  // accepts connections.
  struct Hooks {
    std::function<void()> kill;
    std::function<absl::Status()> restart;
  };

  absl::Status Start(const std::string& dir, inac::core::Topology topology, int jobs) {
    dir_ = dir;
    topology_ = std::move(topology);
    absl::Status s =
        controller_.Start(dir_, "controller", dir_ + "/inac.db", systest::Json::object());
    if (!s.ok()) return s;
    rest_ = std::make_unique<systest::Rest>(controller_.host_port());
    systest::Response r = rest_->Put("/topology", inac::core::TopologyToJson(topology_));
    if (r.status != 200) return absl::InternalError("PUT /topology: " + r.text);
    for (int i = 0; i < jobs; ++i) {
      // Three workers and one PS among the leaf's 8 hosts.
      auto host = [](int k) { return absl::StrCat("h0_", k % 8); };
      r = rest_->Post("/jobs", systest::LongRunningJob(absl::StrCat("job-", i),
                                                       {host(i), host(i + 1), host(i + 2)},
                                                       {host(i + 3)}, i % 3));
      if (r.status != 201) return absl::InternalError("POST /jobs: " + r.text);
    }
    auto view = systest::AwaitConverged(*rest_, reader_, absl::Seconds(60), jobs);
    if (!view.ok()) return view.status();
    const inac::core::Switch* sw = view->topology.FindSwitch("lf0");
    if (sw == nullptr || !sw->p4runtime) return absl::InternalError("no lf0 endpoint");
    endpoint_ = *sw->p4runtime;
    auto intents = systest::IntentsBySwitch(view->topology, view->plan);
    entries_ = EntityCount(intents["lf0"]);
    auto expected = reader_.Expected(intents["lf0"]);
    if (!expected.ok()) return expected.status();
    expected_ = *expected;
    return absl::OkStatus();
  }

  struct Times {
    double pipeline_ms = 0;  // accepts connections -> the controller's pipeline is in
    double restore_ms = 0;   // accepts connections -> read-back equals the intent
  };

  // Kill, outage, restart, then polls until the read-back equals the intent.
  absl::StatusOr<Times> Restore(const Hooks& hooks, double outage_s) {
    hooks.kill();
    std::this_thread::sleep_for(std::chrono::duration<double>(outage_s));  // the outage itself
    if (absl::Status s = hooks.restart(); !s.ok()) return s;
    const auto up = Clock::now();
    Times times;
    // No Read before the pipeline is in: BMv2 may crash on a Read that meets the controller's
    // pipeline push (bmv2_switch.h). The cookie is polled every 10 ms.
    absl::Status s =
        interop::AwaitPipeline(endpoint_.address, endpoint_.device_id, absl::Seconds(120));
    if (!s.ok()) return s;
    times.pipeline_ms = Ms(Clock::now() - up);
    std::string last;
    while (Clock::now() - up < std::chrono::seconds(120)) {
      auto actual = reader_.Read(endpoint_.address, endpoint_.device_id);
      last = actual.ok() ? systest::SwitchReader::Diff(expected_, *actual)
                         : actual.status().ToString();
      if (last.empty()) {
        times.restore_ms = Ms(Clock::now() - up);
        return times;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return absl::DeadlineExceededError("not restored: " + last);
  }

  int64_t entries() const { return entries_; }
  void Stop() { controller_.Kill9(); }
  std::string ControllerLog() {
    return controller_.process() ? systest::LogTail(controller_.process()->log_path(), 3000) : "";
  }

 private:
  std::string dir_;
  inac::core::Topology topology_;
  systest::ControllerProcess controller_;
  std::unique_ptr<systest::Rest> rest_;
  systest::SwitchReader reader_;
  inac::core::P4RuntimeEndpoint endpoint_;
  systest::SwitchContent expected_;
  int64_t entries_ = 0;
};

constexpr int kRestoreJobs = 12;
const double kOutages[] = {1, 5, 30};

void PrintRestore(const std::string& target, double outage, int64_t entries,
                  const absl::StatusOr<RestoreScenario::Times>& ms) {
  std::cout << "{\"bench\":\"interop_restore\",\"target\":\"" << target
            << "\",\"outage_s\":" << outage << ",\"entries\":" << entries;
  if (ms.ok()) {
    std::cout << ",\"pipeline_ms\":" << Fixed(ms->pipeline_ms)
              << ",\"restore_ms\":" << Fixed(ms->restore_ms) << "}" << std::endl;
  } else {
    std::cout << ",\"error\":" << systest::Json(std::string(ms.status().message())).dump() << "}"
              << std::endl;
  }
}

absl::Status BenchRestoreBmv2(const std::string& binary) {
  const std::string dir = systest::MakeTempDir("interop-bench");
  absl::Status result;
  {
    interop::Bmv2Options options;
    options.binary = binary;
    options.device_id = kDevice;
    options.dir = dir;
    options.name = "bmv2-lf0";
    auto sw = interop::Bmv2Switch::Start(options);
    if (!sw.ok()) return sw.status();
    inac::core::Topology topology = systest::LeafSpine(1, 1, 8);
    for (auto& s : topology.switches) {
      if (s.id == "lf0") {
        s.p4runtime =
            inac::core::P4RuntimeEndpoint{(*sw)->address(), kDevice, inac::core::TargetKind::kBmv2};
      }
    }
    RestoreScenario scenario;
    result = scenario.Start(dir, topology, kRestoreJobs);
    if (result.ok()) {
      RestoreScenario::Hooks hooks{[&] { (*sw)->Kill(); }, [&] { return (*sw)->Restart(); }};
      for (double outage : kOutages) {
        auto ms = scenario.Restore(hooks, outage);
        PrintRestore("bmv2", outage, scenario.entries(), ms);
        if (!ms.ok()) std::cerr << scenario.ControllerLog() << "\n" << (*sw)->Logs() << "\n";
      }
    }
    scenario.Stop();
  }
  std::error_code ignored;
  if (result.ok()) std::filesystem::remove_all(dir, ignored);
  return result;
}

absl::Status BenchRestoreEmulator() {
  const std::string dir = systest::MakeTempDir("interop-bench");
  absl::Status result;
  {
    inac::core::Topology topology = systest::LeafSpine(1, 1, 8);
    // Only lf0 is managed: start the fabric on a one-switch copy, then keep its endpoint.
    inac::core::Topology leaf_only = topology;
    std::erase_if(leaf_only.switches, [](const auto& s) { return s.id != "lf0"; });
    systest::EmulatedFabric fabric;
    if (absl::Status s = fabric.Start(&leaf_only, dir); !s.ok()) return s;
    for (auto& s : topology.switches) {
      if (s.id == "lf0") {
        s.p4runtime = leaf_only.switches[0].p4runtime;
        s.p4runtime->device_id = kDevice;
      }
    }
    RestoreScenario scenario;
    result = scenario.Start(dir, topology, kRestoreJobs);
    if (result.ok()) {
      RestoreScenario::Hooks hooks{[&] {
                                     fabric.process("lf0")->Signal(SIGKILL);
                                     fabric.process("lf0")->Wait();
                                   },
                                   [&] { return fabric.KillAndRestart("lf0"); }};
      for (double outage : kOutages) {
        auto ms = scenario.Restore(hooks, outage);
        PrintRestore("emulator", outage, scenario.entries(), ms);
        if (!ms.ok()) std::cerr << scenario.ControllerLog() << "\n";
      }
    }
    scenario.Stop();
  }
  std::error_code ignored;
  if (result.ok()) std::filesystem::remove_all(dir, ignored);
  return result;
}

int Fail(const std::string& what) {
  std::cerr << "interop_bench: " << what << "\n";
  return 1;
}

}  // namespace

int main() {
  auto p4info = P4InfoIndex::EmbeddedIna();
  if (!p4info.ok()) return Fail(p4info.status().ToString());
  auto translator = IntentTranslator::Create(*p4info);
  if (!translator.ok()) return Fail(translator.status().ToString());
  const std::optional<std::string> bmv2 = interop::FindBmv2();
  const bool have_inac = access(systest::InacBinary(), X_OK) == 0;

  // In-process emulator (EmulatedSwitch::EmulatedSwitch, port 0) and, when found, one BMv2
  // without logging (its log costs throughput).
  inac::southbound::emulator::EmulatedSwitchOptions emulator_options;
  emulator_options.device_id = kDevice;
  auto emulator = inac::southbound::emulator::EmulatedSwitch::Start(emulator_options);
  if (!emulator.ok()) return Fail(emulator.status().ToString());
  std::vector<Target> targets = {{"emulator", (*emulator)->address(), ""}};
  std::unique_ptr<interop::Bmv2Switch> bmv2_switch;
  std::string bmv2_dir;
  if (bmv2) {
    bmv2_dir = systest::MakeTempDir("interop-bench");
    interop::Bmv2Options options;
    options.binary = *bmv2;
    options.device_id = kDevice;
    options.dir = bmv2_dir;
    options.log = false;
    auto sw = interop::Bmv2Switch::Start(options);
    if (!sw.ok()) return Fail(sw.status().ToString());
    bmv2_switch = std::move(*sw);
    const std::string json = interop::InaBmv2Json();
    if (json.empty()) return Fail("cannot read api/p4/ina.json");
    targets.push_back({"bmv2", bmv2_switch->address(), json});
  } else {
    std::cout << "{\"bench\":\"interop_bmv2\",\"found\":false,\"searched\":"
              << systest::Json(interop::Bmv2SearchDescription()).dump()
              << ",\"note\":\"BMv2 simple_switch_grpc not found: emulator figures only\"}"
              << std::endl;
  }

  for (const Target& target : targets) {
    if (absl::Status s = BenchWrites(target, *translator, *p4info); !s.ok()) {
      return Fail(target.name + " writes: " + s.ToString());
    }
  }
  for (const Target& target : targets) {
    if (absl::Status s = BenchReconcile(target, *translator); !s.ok()) {
      return Fail(target.name + " reconcile: " + s.ToString());
    }
  }
  bmv2_switch.reset();
  (*emulator)->Shutdown();
  if (!bmv2_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(bmv2_dir, ignored);
  }

  if (!have_inac) {
    std::cout << "{\"bench\":\"interop_restore\",\"skipped\":\"inac binary not built\"}"
              << std::endl;
    return 0;
  }
  if (bmv2) {
    if (absl::Status s = BenchRestoreBmv2(*bmv2); !s.ok())
      return Fail("bmv2 restore: " + s.ToString());
  }
  if (absl::Status s = BenchRestoreEmulator(); !s.ok())
    return Fail("emulator restore: " + s.ToString());
  return 0;
}
