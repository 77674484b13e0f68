// INA counters (docs/controller.md "INA counters"): after reconciling a switch the controller reads
// the per-tag counters of api/p4/ina.p4 (job_aggregated, job_fallback, job_preempted) through
// SwitchClient::ReadCounters, at most once per `counters_period_ms` per switch, and serves the last
// values in GET /jobs/{id} (`ina_counters`) and /metrics (`inac_ina_packets_total`). The switches
// are FakeSwitchClients whose counter values the test sets; no timed assertions (Sync waits for a
// whole pass).
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

// One aggregation of a job on one switch, as the stored intents of the latest plan have it.
struct Aggregation {
  std::string switch_id;
  uint32_t tag = 0;
  uint32_t multicast_group = 0;
};

TestServerOptions WithCountersPeriod(int period_ms) {
  TestServerOptions options;
  options.controller.counters_period_ms = period_ms;
  return options;
}

class InaCountersTest : public ::testing::Test {
 protected:
  explicit InaCountersTest(int period_ms = 0) : server_(WithCountersPeriod(period_ms)) {}

  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    ASSERT_EQ(server_.PutTopology(SmallLeafSpine()), 200);
    ASSERT_TRUE(server_.Sync().ok());  // creates the switch clients
  }

  // The job's aggregations (tags with a multicast group, i.e. counter cells) on every switch, from
  // the intents of the latest plan.
  std::vector<Aggregation> AggregationsOf(int64_t id) {
    std::vector<Aggregation> out;
    auto plan = server_.storage().plans().Latest();
    EXPECT_TRUE(plan.ok() && plan->has_value());
    if (!plan.ok() || !plan->has_value()) return out;
    auto intents = server_.storage().plans().Intents((*plan)->plan.version);
    EXPECT_TRUE(intents.ok());
    if (!intents.ok()) return out;
    for (const core::SwitchIntent& intent : *intents) {
      for (const auto& j : intent.jobs) {
        if (j.job_id == id && j.multicast_group != 0) {
          out.push_back({intent.switch_id, j.tag, j.multicast_group});
        }
      }
    }
    return out;
  }

  void SetCounters(const Aggregation& a, core::JobId id, int64_t aggregated, int64_t fallback,
                   int64_t preempted) {
    southbound::AggregationCounters c;
    c.tag = a.tag;
    c.job_id = id;
    c.multicast_group = a.multicast_group;
    c.aggregated.packets = aggregated;
    c.fallback.packets = fallback;
    c.preempted.packets = preempted;
    auto fake = server_.fabric().Get(a.switch_id);
    ASSERT_NE(fake, nullptr) << a.switch_id;
    fake->SetCounters(c);
  }

  // GET /jobs/{id}'s `ina_counters` (checked for its shape).
  Json Counters(int64_t id) {
    Reply r = server_.Get(absl::StrCat("/api/v1/jobs/", id));
    EXPECT_EQ(r.status, 200) << r;
    if (!r.json.is_object() || !r.json.contains("ina_counters")) {
      ADD_FAILURE() << "no ina_counters: " << r;
      return Json::object();
    }
    const Json& c = r.json["ina_counters"];
    EXPECT_TRUE(c["switches"].is_array()) << c.dump();
    for (const char* k : {"aggregated_packets", "fallback_packets", "preempted_packets"}) {
      EXPECT_TRUE(c[k].is_number_integer()) << k << " " << c.dump();
    }
    return c;
  }

  // (switch, tag) -> the sample of `counters`.
  static std::map<std::pair<std::string, uint32_t>, Json> BySwitchTag(const Json& counters) {
    std::map<std::pair<std::string, uint32_t>, Json> out;
    for (const Json& s : counters["switches"]) {
      out[{s["switch"].get<std::string>(), s["tag"].get<uint32_t>()}] = s;
    }
    return out;
  }

  std::string Metrics() {
    Reply r = server_.Get("/api/v1/metrics");
    EXPECT_EQ(r.status, 200) << r;
    return r.body;
  }

  TestServer server_;
};

TEST_F(InaCountersTest, RunningJobShowsPerSwitchCountersAndTotals) {
  int64_t id = server_.Submit(SmallLeafSpineJob("counted"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(id), "running");
  std::vector<Aggregation> aggregations = AggregationsOf(id);
  ASSERT_FALSE(aggregations.empty()) << "the job aggregates on no switch";

  // Read in the pass that applied the job: every aggregation, all zero.
  Json zero = Counters(id);
  ASSERT_EQ(zero["switches"].size(), aggregations.size()) << zero.dump();
  for (const Aggregation& a : aggregations) {
    Json s = BySwitchTag(zero)[{a.switch_id, a.tag}];
    ASSERT_TRUE(s.is_object()) << a.switch_id << " tag " << a.tag << ": " << zero.dump();
    EXPECT_EQ(s["aggregated_packets"], 0);
    EXPECT_EQ(s["fallback_packets"], 0);
    EXPECT_EQ(s["preempted_packets"], 0);
    EXPECT_GT(s["read_ms"].get<int64_t>(), 0);
  }
  EXPECT_EQ(zero["aggregated_packets"], 0);

  // The data plane counts; the next pass reads the new values.
  int64_t total_aggregated = 0, total_fallback = 0, total_preempted = 0;
  for (size_t i = 0; i < aggregations.size(); ++i) {
    int64_t n = static_cast<int64_t>(i) + 1;
    SetCounters(aggregations[i], id, 1000 * n, 10 * n, n);
    total_aggregated += 1000 * n;
    total_fallback += 10 * n;
    total_preempted += n;
  }
  ASSERT_TRUE(server_.Sync().ok());
  Json counted = Counters(id);
  ASSERT_EQ(counted["switches"].size(), aggregations.size()) << counted.dump();
  auto samples = BySwitchTag(counted);
  for (size_t i = 0; i < aggregations.size(); ++i) {
    const Aggregation& a = aggregations[i];
    int64_t n = static_cast<int64_t>(i) + 1;
    Json s = samples[{a.switch_id, a.tag}];
    ASSERT_TRUE(s.is_object()) << counted.dump();
    EXPECT_EQ(s["aggregated_packets"], 1000 * n) << s.dump();
    EXPECT_EQ(s["fallback_packets"], 10 * n) << s.dump();
    EXPECT_EQ(s["preempted_packets"], n) << s.dump();
  }
  EXPECT_EQ(counted["aggregated_packets"], total_aggregated);
  EXPECT_EQ(counted["fallback_packets"], total_fallback);
  EXPECT_EQ(counted["preempted_packets"], total_preempted);

  // The rest of the job document is unchanged.
  Reply job = server_.Get(absl::StrCat("/api/v1/jobs/", id));
  EXPECT_EQ(job.json["id"], id);
  EXPECT_EQ(job.json["state"], "running");
  EXPECT_EQ(job.json["spec"]["name"], "counted");

  // /metrics: one series per job, switch and kind (the job's tags on a switch summed).
  std::string metrics = Metrics();
  EXPECT_TRUE(absl::StrContains(metrics, "# TYPE inac_ina_packets_total counter\n")) << metrics;
  EXPECT_TRUE(absl::StrContains(metrics, "# HELP inac_ina_packets_total ")) << metrics;
  std::map<std::string, std::array<int64_t, 3>> per_switch;
  for (size_t i = 0; i < aggregations.size(); ++i) {
    int64_t n = static_cast<int64_t>(i) + 1;
    auto& v = per_switch[aggregations[i].switch_id];
    v[0] += 1000 * n;
    v[1] += 10 * n;
    v[2] += n;
  }
  for (const auto& [sw, v] : per_switch) {
    const char* kinds[] = {"aggregated", "fallback", "preempted"};
    for (int k = 0; k < 3; ++k) {
      // prometheus-cpp writes the labels in name order.
      std::string line = absl::StrCat("inac_ina_packets_total{job=\"", id, "\",kind=\"", kinds[k],
                                      "\",switch=\"", sw, "\"} ", v[k], "\n");
      EXPECT_TRUE(absl::StrContains(metrics, line)) << line << metrics;
    }
  }
}

TEST_F(InaCountersTest, FailingReadKeepsReconcilingAndShowsTheLastRead) {
  int64_t id = server_.Submit(SmallLeafSpineJob("first"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(id), "running");
  std::vector<Aggregation> aggregations = AggregationsOf(id);
  ASSERT_FALSE(aggregations.empty());
  for (const Aggregation& a : aggregations) SetCounters(a, id, 500, 5, 1);
  ASSERT_TRUE(server_.Sync().ok());
  Json before = Counters(id);
  ASSERT_EQ(before["aggregated_packets"], 500 * static_cast<int64_t>(aggregations.size()));

  // Counter reads fail on every switch; the switches keep counting.
  int64_t reads_before = 0;
  for (const std::string& sw : server_.fabric().ids()) {
    server_.fabric().Get(sw)->FailReadCounters(absl::UnavailableError("counter read refused"));
    reads_before += server_.fabric().Get(sw)->read_counters_calls();
  }
  for (const Aggregation& a : aggregations) SetCounters(a, id, 900, 9, 2);
  // Reconciliation goes on: a second job is programmed and runs, the first keeps running.
  int64_t second = server_.Submit(SmallLeafSpineJob("second"));
  ASSERT_GT(second, 0);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_EQ(server_.JobState(id), "running");
  EXPECT_EQ(server_.JobState(second), "running");
  Reply switches = server_.Get("/api/v1/switches");
  ASSERT_EQ(switches.status, 200) << switches;
  for (const Json& s : switches.json["switches"]) {
    EXPECT_TRUE(s["in_sync"].get<bool>()) << s.dump();
    EXPECT_EQ(s["last_error"], "") << s.dump();
  }
  int64_t reads = 0;
  for (const std::string& sw : server_.fabric().ids()) {
    reads += server_.fabric().Get(sw)->read_counters_calls();
  }
  EXPECT_GT(reads, reads_before);  // attempted, and failed

  // The job shows what was last read (values and read time) on the switches that still hold its
  // tags (the re-plan for the second job may move its aggregation); the new job has nothing yet.
  Json stale = Counters(id);
  auto before_samples = BySwitchTag(before);
  for (const auto& [key, sample] : BySwitchTag(stale)) {
    ASSERT_TRUE(before_samples.count(key)) << key.first << " tag " << key.second;
    EXPECT_EQ(sample, before_samples[key]);
  }
  for (const Aggregation& a : AggregationsOf(id)) {
    if (before_samples.count({a.switch_id, a.tag})) {
      EXPECT_TRUE(BySwitchTag(stale).count({a.switch_id, a.tag})) << a.switch_id;
    }
  }
  Json none = Counters(second);
  EXPECT_TRUE(none["switches"].empty()) << none.dump();
  EXPECT_EQ(none["aggregated_packets"], 0);
  EXPECT_EQ(none["fallback_packets"], 0);
  EXPECT_EQ(none["preempted_packets"], 0);

  // Reads work again: the current values appear.
  for (const std::string& sw : server_.fabric().ids()) {
    server_.fabric().Get(sw)->FailReadCounters(absl::OkStatus());
  }
  ASSERT_TRUE(server_.Sync().ok());
  Json after = Counters(id);
  for (const Aggregation& a : AggregationsOf(id)) {
    Json s = BySwitchTag(after)[{a.switch_id, a.tag}];
    ASSERT_TRUE(s.is_object()) << after.dump();
    bool set = false;  // a counter cell this test set (not one of a moved aggregation)
    for (const Aggregation& b : aggregations) {
      set |= b.switch_id == a.switch_id && b.multicast_group == a.multicast_group;
    }
    EXPECT_EQ(s["aggregated_packets"], set ? 900 : 0) << s.dump();
  }
  EXPECT_FALSE(Counters(second)["switches"].empty());
}

TEST_F(InaCountersTest, CountersOfAFinishedJobAreDropped) {
  int64_t id = server_.Submit(SmallLeafSpineJob("short"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(id), "running");
  for (const Aggregation& a : AggregationsOf(id)) SetCounters(a, id, 7, 0, 0);
  ASSERT_TRUE(server_.Sync().ok());
  EXPECT_FALSE(Counters(id)["switches"].empty());
  EXPECT_TRUE(absl::StrContains(Metrics(), absl::StrCat("inac_ina_packets_total{job=\"", id)));

  ASSERT_EQ(server_.Call("DELETE", absl::StrCat("/api/v1/jobs/", id)).status, 200);
  ASSERT_TRUE(server_.Sync().ok());
  Json gone = Counters(id);
  EXPECT_TRUE(gone["switches"].empty()) << gone.dump();
  EXPECT_EQ(gone["aggregated_packets"], 0);
  EXPECT_FALSE(absl::StrContains(Metrics(), absl::StrCat("inac_ina_packets_total{job=\"", id)));
}

// A ring job is planned as Rina (docs/rina.md): the ToR of every rack with INA aggregates the
// rack toward its agent, so the job has counter cells there and nowhere else (the ring's hops are
// routes, not aggregations).
TEST_F(InaCountersTest, RingJobCountsOnlyItsRackAggregations) {
  Json spec = SmallLeafSpineJob("ring");
  spec.erase("parameter_servers");
  spec["allreduce"] = "ring";
  int64_t id = server_.Submit(spec);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_.Sync().ok());
  std::vector<Aggregation> racks = AggregationsOf(id);
  ASSERT_FALSE(racks.empty()) << "no rack aggregation for a ring job on INA-capable ToRs";
  for (const Aggregation& a : racks) SetCounters(a, id, 11, 0, 0);
  ASSERT_TRUE(server_.Sync().ok());
  Json c = Counters(id);
  std::set<std::pair<std::string, uint32_t>> want, got;
  for (const Aggregation& a : racks) want.insert({a.switch_id, a.tag});
  for (const auto& [key, sample] : BySwitchTag(c)) got.insert(key);
  EXPECT_EQ(got, want) << c.dump();
  EXPECT_EQ(c["aggregated_packets"], 11 * static_cast<int64_t>(racks.size())) << c.dump();
  // Only GET /jobs/{id} carries the counters; the list keeps the plain job document.
  Reply list = server_.Get("/api/v1/jobs");
  ASSERT_EQ(list.status, 200);
  for (const Json& j : list.json["jobs"]) EXPECT_FALSE(j.contains("ina_counters")) << j.dump();
}

// A long period: a switch is read once, then not again within the period, however many passes.
class InaCountersRateTest : public InaCountersTest {
 protected:
  InaCountersRateTest() : InaCountersTest(3600 * 1000) {}
};

TEST_F(InaCountersRateTest, ReadsAtMostOncePerPeriodPerSwitch) {
  int64_t id = server_.Submit(SmallLeafSpineJob("rated"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(server_.Sync().ok());
  ASSERT_EQ(server_.JobState(id), "running");
  std::vector<Aggregation> aggregations = AggregationsOf(id);
  ASSERT_FALSE(aggregations.empty());
  std::map<std::string, int64_t> calls;
  for (const std::string& sw : server_.fabric().ids()) {
    calls[sw] = server_.fabric().Get(sw)->read_counters_calls();
  }
  for (const Aggregation& a : aggregations) {
    EXPECT_EQ(calls[a.switch_id], 1) << a.switch_id;
    SetCounters(a, id, 42, 0, 0);
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(server_.Sync().ok());
  for (const std::string& sw : server_.fabric().ids()) {
    EXPECT_EQ(server_.fabric().Get(sw)->read_counters_calls(), calls[sw]) << sw;
  }
  Json c = Counters(id);
  EXPECT_EQ(c["switches"].size(), aggregations.size());
  EXPECT_EQ(c["aggregated_packets"], 0);  // still the first read's values
}

}  // namespace
}  // namespace inac::server::testing
