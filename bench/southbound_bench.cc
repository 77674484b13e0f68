// Southbound throughput over loopback gRPC against the emulated switch (in-process, port 0):
//  - entries/s written in size-bounded Write batches (target: >= 50,000/s);
//  - time to reconcile a switch holding ~10,000 entries (target: < 1 s): converged (read + diff,
//    0 writes), with 10% drift, and a full restore onto an empty switch.
// Prints one JSON line per scenario (medians over repetitions).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "p4/v1/p4runtime.pb.h"
#include "southbound/emulator/emulated_switch.h"
#include "southbound/intent_translator.h"
#include "southbound/p4info_index.h"
#include "southbound/p4runtime_switch_client.h"
#include "southbound/switch_session.h"

namespace {

using inac::southbound::IntentTranslator;
using inac::southbound::P4InfoIndex;
using inac::southbound::P4RuntimeSwitchClient;
using inac::southbound::P4RuntimeSwitchClientOptions;
using inac::southbound::SessionOptions;
using inac::southbound::SwitchSession;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kDevice = 1;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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

SessionOptions Session(const std::string& address, size_t batch) {
  SessionOptions options;
  options.address = address;
  options.device_id = kDevice;
  options.election_id = {0, 1};
  options.max_batch_updates = batch;
  return options;
}

int Fail(const std::string& what) {
  std::cerr << "southbound_bench: " << what << "\n";
  return 1;
}

}  // namespace

int main() {
  inac::southbound::emulator::EmulatedSwitchOptions switch_options;
  switch_options.device_id = kDevice;
  auto sw = inac::southbound::emulator::EmulatedSwitch::Start(switch_options);
  if (!sw.ok()) return Fail(sw.status().ToString());
  const std::string address = (*sw)->address();
  auto p4info = P4InfoIndex::EmbeddedIna();
  auto translator = IntentTranslator::Create(*p4info);
  if (!translator.ok()) return Fail(translator.status().ToString());

  // --- Write throughput: 60,000 ina_worker inserts per run. ---
  constexpr int kEntries = 60000;
  std::vector<p4::v1::Update> updates;
  updates.reserve(kEntries);
  for (int i = 0; i < kEntries; ++i) {
    inac::core::AggregationInputIntent input{static_cast<uint32_t>(8 * (1 + i / 200)), 1 + i / 200,
                                             0x0a000000u + i, static_cast<uint32_t>(i % 200)};
    p4::v1::Update update;
    update.set_type(p4::v1::Update::INSERT);
    *update.mutable_entity() = *translator->InputEntry(input);
    updates.push_back(std::move(update));
  }
  for (size_t batch : {500, 2000, 8000}) {
    // A fresh election id per session: the switch may not have dropped the previous stream yet.
    SessionOptions options = Session(address, batch);
    options.election_id = {1, batch};
    SwitchSession session(options);
    if (!session.Connect().ok() || !session.AwaitPrimary(absl::Seconds(10))) {
      return Fail("no arbitration");
    }
    std::vector<double> rates;
    int64_t rpcs = 0;
    for (int rep = 0; rep < 5; ++rep) {
      // VERIFY_AND_COMMIT clears the switch between runs.
      if (!session.SetPipeline(p4info->p4info(), "", rep + 1).ok()) return Fail("pipeline");
      auto t0 = Clock::now();
      auto results = session.Write(updates, &rpcs);
      auto t1 = Clock::now();
      if (!results.ok()) return Fail(results.status().ToString());
      for (const auto& s : *results) {
        if (!s.ok()) return Fail(s.ToString());
      }
      rates.push_back(kEntries / (Ms(t1 - t0) / 1000.0));
    }
    std::cout << "{\"bench\":\"southbound_write\",\"entries\":" << kEntries
              << ",\"batch_updates\":" << batch << ",\"rpcs\":" << rpcs
              << ",\"entries_per_s\":" << static_cast<int64_t>(Median(rates))
              << ",\"target_entries_per_s\":50000}" << std::endl;
  }

  // --- Reconcile a switch holding ~10,000 entries. ---
  const inac::core::SwitchIntent intent = MakeIntent(/*jobs=*/286, /*inputs=*/16);
  const int64_t entities =
      static_cast<int64_t>(intent.jobs.size() + intent.inputs.size() + intent.routes.size() +
                           intent.multicast_groups.size());
  inac::core::SwitchIntent drifted = intent;  // 10% of the routes move to another port
  for (size_t i = 0; i < drifted.routes.size(); i += 5) {
    if (drifted.routes[i].egress_port != 0) drifted.routes[i].egress_port += 100;
  }
  P4RuntimeSwitchClientOptions client_options;
  client_options.switch_id = "bench";
  client_options.session = Session(address, 2000);
  client_options.session.election_id = {2, 0};
  auto client = P4RuntimeSwitchClient::Create(client_options);
  if (!client.ok()) return Fail(client.status().ToString());
  if (!(*client)->Connect().ok() || !(*client)->AwaitPrimary(absl::Seconds(10))) {
    return Fail("client arbitration");
  }
  if (!(*client)->EnsurePipeline().ok()) return Fail("ensure pipeline");
  std::vector<double> restore_ms, converged_ms, drift_ms;
  int64_t drift_writes = 0;
  for (int rep = 0; rep < 5; ++rep) {
    // The switch is empty here (fresh pipeline, or cleared by the previous repetition).
    auto t0 = Clock::now();
    auto restore = (*client)->Reconcile(intent);
    auto t1 = Clock::now();
    auto converged = (*client)->Reconcile(intent);
    auto t2 = Clock::now();
    auto to_drifted = (*client)->Reconcile(drifted);  // the switch now holds the drift...
    auto t3 = Clock::now();
    auto repair = (*client)->Reconcile(intent);  // ...and is brought back
    auto t4 = Clock::now();
    if (!restore.ok() || !converged.ok() || !to_drifted.ok() || !repair.ok()) {
      return Fail("reconcile failed");
    }
    if (converged->writes() != 0 || !repair->converged()) return Fail("not idempotent");
    if (rep == 0 && restore->inserted != entities) return Fail("restore count");
    restore_ms.push_back(Ms(t1 - t0));
    converged_ms.push_back(Ms(t2 - t1));
    drift_ms.push_back(Ms(t4 - t3));
    drift_writes = repair->writes();
    // Clear the switch for the next full restore.
    if (rep + 1 < 5) {
      auto cleared = (*client)->Reconcile(inac::core::SwitchIntent{});
      if (!cleared.ok()) return Fail("clear");
    }
  }
  // Breakdown: the wildcard read alone (what a converged run costs on the wire).
  std::vector<double> read_ms;
  {
    SwitchSession reader(Session(address, 2000));
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = Clock::now();
      auto read = reader.Read(translator->OwnedStateFilters());
      auto t1 = Clock::now();
      if (!read.ok() || static_cast<int64_t>(read->size()) != entities) return Fail("read");
      read_ms.push_back(Ms(t1 - t0));
    }
  }
  std::cout << "{\"bench\":\"southbound_reconcile\",\"entities\":" << entities
            << ",\"restore_empty_ms\":" << Median(restore_ms)
            << ",\"converged_ms\":" << Median(converged_ms)
            << ",\"read_only_ms\":" << Median(read_ms) << ",\"drift_10pct_ms\":" << Median(drift_ms)
            << ",\"drift_writes\":" << drift_writes << ",\"target_ms\":1000}" << std::endl;
  (*client)->Disconnect();
  (*sw)->Shutdown();
  return 0;
}
