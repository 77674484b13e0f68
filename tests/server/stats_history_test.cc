// The dashboard's history (server/stats_history.h): buckets, eviction, the reported
// iteration time, the JSON shapes, and GET /api/v1/stats/... on a live server.
#include "server/stats_history.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

core::Topology TwoInaSwitches() {
  core::Topology t;
  core::Switch a;
  a.id = "s1";
  a.ina = core::InaConfig{true, 100, 1000, core::kDefaultAggregatorBytes};
  core::Switch b = a;
  b.id = "s2";
  b.ina.aggregators = 400;
  core::Switch plain;
  plain.id = "s3";  // not INA-capable: no utilisation series
  t.switches = {a, b, plain};
  return t;
}

core::Plan PlanGranting(int64_t s1, int64_t s2) {
  core::Plan plan;
  plan.algorithm = "grid";
  core::JobPlan j;
  j.job_id = 7;
  j.rate_gbps = 40;
  j.lp_bound_gbps = 50;
  j.iteration_ms = 12.5;
  j.aggregators = {{"s1", s1}, {"s2", s2}};
  plan.jobs.push_back(j);
  return plan;
}

TEST(StatsHistoryTest, ObservationsShareABucketAndTheLastWins) {
  StatsHistory h({.resolution_ms = 10000, .window_ms = 60000});
  const core::Topology t = TwoInaSwitches();
  core::Plan p1 = PlanGranting(100, 100);
  core::Plan p2 = PlanGranting(500, 400);
  h.Observe(20000, t, &p1, {});
  h.Observe(29999, t, &p2, {});
  auto buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].start_ms, 20000);
  EXPECT_DOUBLE_EQ(buckets[0].switch_utilisation.at("s1"), 0.5);
  EXPECT_DOUBLE_EQ(buckets[0].switch_utilisation.at("s2"), 1.0);
  EXPECT_FALSE(buckets[0].switch_utilisation.count("s3"));
  h.Observe(30000, t, nullptr, {});  // a new bucket; no plan: nothing granted
  buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[1].start_ms, 30000);
  EXPECT_DOUBLE_EQ(buckets[1].switch_utilisation.at("s1"), 0.0);
  EXPECT_TRUE(buckets[1].jobs.empty());
}

TEST(StatsHistoryTest, EvictsBucketsOlderThanTheWindowAndStaysBounded) {
  StatsHistory h({.resolution_ms = 1000, .window_ms = 5000});
  const core::Topology t = TwoInaSwitches();
  for (int64_t s = 0; s < 100; ++s) h.Observe(s * 1000 + 10, t, nullptr, {});
  auto buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 6u);  // window / resolution + 1
  EXPECT_EQ(buckets.front().start_ms, 94000);
  EXPECT_EQ(buckets.back().start_ms, 99000);
  // A gap longer than the window leaves only the new bucket.
  h.CountSubmission(1000000);
  buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].submissions, 1);
  // A clock that steps back counts into the newest bucket, never before it.
  h.CountReplan(5);
  buckets = h.Buckets();
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].replans, 1);
  // since_ms filters by bucket start.
  h.CountReplan(1003500);
  EXPECT_EQ(h.Buckets(1001000).size(), 1u);
  EXPECT_EQ(h.Buckets(0).size(), 2u);
}

TEST(StatsHistoryTest, ReportedIterationTimeFromProgressReports) {
  StatsHistory h;
  EXPECT_FALSE(h.ReportedIterationMs(7).has_value());
  h.ObserveProgress(7, 1000, 10);
  EXPECT_FALSE(h.ReportedIterationMs(7).has_value());  // one report: no interval yet
  h.ObserveProgress(7, 3000, 30);                      // 2000 ms / 20 iterations
  ASSERT_TRUE(h.ReportedIterationMs(7).has_value());
  EXPECT_DOUBLE_EQ(*h.ReportedIterationMs(7), 100.0);
  h.ObserveProgress(7, 3500, 30);  // no new iteration: unchanged, and the interval restarts later
  EXPECT_DOUBLE_EQ(*h.ReportedIterationMs(7), 100.0);
  h.ObserveProgress(7, 4000, 40);  // 1000 ms / 10 iterations, smoothed with weight 1/2
  EXPECT_DOUBLE_EQ(*h.ReportedIterationMs(7), 100.0);
  h.ObserveProgress(7, 6000, 50);  // 200 ms per iteration
  EXPECT_DOUBLE_EQ(*h.ReportedIterationMs(7), 150.0);
  // Observed into the job's sample while the job is planned; dropped once it is gone.
  const core::Topology t = TwoInaSwitches();
  core::Plan plan = PlanGranting(10, 10);
  core::Job job;
  job.id = 7;
  job.iterations_done = 50;
  job.spec.iterations = 200;
  h.Observe(7000, t, &plan, {job});
  auto buckets = h.Buckets();
  ASSERT_EQ(buckets.back().jobs.count(7), 1u);
  EXPECT_DOUBLE_EQ(*buckets.back().jobs.at(7).reported_iteration_ms, 150.0);
  EXPECT_EQ(buckets.back().jobs.at(7).iterations_done, 50);
  EXPECT_EQ(buckets.back().jobs.at(7).iterations, 200);
  h.Observe(8000, t, nullptr, {});
  EXPECT_FALSE(h.ReportedIterationMs(7).has_value());
}

TEST(StatsHistoryTest, JsonIsColumnOrientedWithNullGaps) {
  StatsHistory h({.resolution_ms = 1000, .window_ms = 10000});
  const core::Topology t = TwoInaSwitches();
  core::Plan plan = PlanGranting(250, 100);
  h.Observe(1000, t, nullptr, {});
  h.Observe(2000, t, &plan, {});
  h.CountSubmission(2100);
  h.CountReplan(2200);
  h.CountReplan(2300);

  Json sw = h.SwitchesJson(0);
  EXPECT_EQ(sw["resolution_ms"], 1000);
  EXPECT_EQ(sw["window_ms"], 10000);
  EXPECT_EQ(sw["times_ms"], Json::parse("[1000, 2000]"));
  ASSERT_EQ(sw["switches"].size(), 2u);
  EXPECT_EQ(sw["switches"][0]["id"], "s1");
  EXPECT_EQ(sw["switches"][0]["aggregator_utilisation"], Json::parse("[0.0, 0.25]"));
  EXPECT_EQ(sw["switches"][1]["aggregator_utilisation"], Json::parse("[0.0, 0.25]"));

  Json jobs = h.JobsJson(0, std::nullopt);
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  const Json& j = jobs["jobs"][0];
  EXPECT_EQ(j["job_id"], 7);
  EXPECT_EQ(j["rate_gbps"], Json::parse("[null, 40.0]"));
  EXPECT_EQ(j["lp_bound_gbps"], Json::parse("[null, 50.0]"));
  EXPECT_EQ(j["predicted_iteration_ms"], Json::parse("[null, 12.5]"));
  EXPECT_EQ(j["reported_iteration_ms"], Json::parse("[null, null]"));
  EXPECT_EQ(h.JobsJson(0, 8)["jobs"].size(), 0u);
  EXPECT_EQ(h.JobsJson(2000, 7)["times_ms"], Json::parse("[2000]"));

  Json ctl = h.ControllerJson(0);
  EXPECT_EQ(ctl["submissions"], Json::parse("[0, 1]"));
  EXPECT_EQ(ctl["replans"], Json::parse("[0, 2]"));
}

TEST(StatsApiTest, ServedToViewersWithTheControllersHistory) {
  TestServer server;
  ASSERT_TRUE(server.Start().ok());
  ASSERT_EQ(server.PutTopology(SmallLeafSpine()), 200);
  const int64_t job = server.Submit(SmallLeafSpineJob("stats"));
  ASSERT_GT(job, 0);
  ASSERT_TRUE(server.Sync().ok());

  Reply ctl = server.Get("/api/v1/stats/controller", kViewerToken);
  ASSERT_EQ(ctl.status, 200) << ctl;
  int64_t submissions = 0, replans = 0;
  for (const Json& v : ctl.json["submissions"]) submissions += v.get<int64_t>();
  for (const Json& v : ctl.json["replans"]) replans += v.get<int64_t>();
  EXPECT_EQ(submissions, 1);
  EXPECT_GE(replans, 1);

  Reply sw = server.Get("/api/v1/stats/switches", kViewerToken);
  ASSERT_EQ(sw.status, 200) << sw;
  ASSERT_FALSE(sw.json["times_ms"].empty());
  bool granted = false;  // the job aggregates on an INA leaf
  for (const Json& s : sw.json["switches"]) {
    const Json& last = s["aggregator_utilisation"].back();
    if (last.is_number() && last.get<double>() > 0) granted = true;
  }
  EXPECT_TRUE(granted) << sw.body;

  Reply jobs = server.Get(absl::StrCat("/api/v1/stats/jobs?job=", job), kViewerToken);
  ASSERT_EQ(jobs.status, 200) << jobs;
  ASSERT_EQ(jobs.json["jobs"].size(), 1u);
  EXPECT_EQ(jobs.json["jobs"][0]["job_id"], job);
  EXPECT_GT(jobs.json["jobs"][0]["rate_gbps"].back().get<double>(), 0);

  EXPECT_EQ(server.Get("/api/v1/stats/jobs?job=0", kViewerToken).status, 400);
  Reply bad = server.Get("/api/v1/stats/switches?since_ms=-1", kViewerToken);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.field(), "since_ms");
  EXPECT_EQ(server.Get("/api/v1/stats/controller?since_ms=x", kViewerToken).status, 400);
  EXPECT_EQ(server.Get("/api/v1/stats/controller", "").status, 401);
}

}  // namespace
}  // namespace inac::server::testing
