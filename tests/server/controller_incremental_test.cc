// Incremental planning in the controller (docs/controller.md "Incremental
// planning"): a change of the inputs is answered by an admission plan that moves nobody, then by
// the background re-plan; a restart that finds an admission plan refines it; with
// "incremental": false the loop plans as before. Sync() waits for the refinement (no timed
// assertions).
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/server/server_fixture.h"

namespace inac::server::testing {
namespace {

using core::Json;

class ControllerIncrementalTest : public ::testing::Test {
 protected:
  void StartWith(bool incremental) {
    TestServerOptions o;
    o.controller.incremental = incremental;
    server_ = std::make_unique<TestServer>(o);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_EQ(server_->PutTopology(topology_), 200);
    ASSERT_TRUE(server_->Sync().ok());
  }
  Json Plan() { return server_->Get("/api/v1/plan").json; }
  std::vector<Json> Events(const std::string& kind) {
    Reply r = server_->Get(absl::StrCat("/api/v1/events?kind=", kind));
    std::vector<Json> out;
    if (r.status != 200) return out;
    for (const Json& e : r.json["events"]) out.push_back(e);
    return out;
  }
  static Json JobOf(const Json& plan, int64_t id) {
    for (const Json& j : plan["jobs"]) {
      if (j["job_id"].get<int64_t>() == id) return j;
    }
    return Json();
  }
  // Every fake switch holds the stored intent of the latest plan.
  void ExpectSwitchesEqualStoredIntents() {
    auto plan = server_->storage().plans().Latest();
    ASSERT_TRUE(plan.ok() && plan->has_value());
    auto intents = server_->storage().plans().Intents((*plan)->plan.version);
    ASSERT_TRUE(intents.ok());
    for (const core::SwitchIntent& intent : *intents) {
      auto fake = server_->fabric().Get(intent.switch_id);
      ASSERT_NE(fake, nullptr) << intent.switch_id;
      auto applied = fake->applied_intent();
      ASSERT_TRUE(applied.has_value()) << intent.switch_id;
      EXPECT_EQ(*applied, intent) << intent.switch_id;
    }
  }

  core::Topology topology_ = SmallLeafSpine();
  std::unique_ptr<TestServer> server_;
};

Json SecondJob() {
  Json spec = fixtures::SmallLeafSpineJob("second");
  spec["workers"] = {"h1_0", "h1_1"};
  spec["parameter_servers"] = {"h0_0"};
  return spec;
}

TEST_F(ControllerIncrementalTest, NewJobIsAdmittedThenRefined) {
  StartWith(true);
  const int64_t a = server_->Submit(fixtures::SmallLeafSpineJob("first"));
  ASSERT_GT(a, 0);
  ASSERT_TRUE(server_->Sync().ok());
  const Json first = Plan();
  // The first plan has nothing to admit onto: it is the full plan, final at once.
  EXPECT_FALSE(absl::StartsWith(first["fingerprint"].get<std::string>(), "admitted:"));
  EXPECT_TRUE(Events("plan_admitted").empty());
  EXPECT_EQ(server_->JobState(a), "running");

  const int64_t b = server_->Submit(SecondJob());
  ASSERT_GT(b, 0);
  ASSERT_TRUE(server_->Sync().ok());  // waits for the admission and the refinement
  auto admitted = Events("plan_admitted");
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_TRUE(absl::StrContains(admitted[0]["message"].get<std::string>(), "admitted 1 job(s)"))
      << admitted[0].dump();
  auto refined = Events("plan_refined");
  ASSERT_EQ(refined.size(), 1u);
  const Json last = Plan();
  EXPECT_FALSE(absl::StartsWith(last["fingerprint"].get<std::string>(), "admitted:"));
  EXPECT_EQ(last["version"].get<int64_t>(), first["version"].get<int64_t>() + 2);
  // The admission plan kept job a's routes verbatim and placed b.
  auto admission = server_->storage().plans().Get(first["version"].get<int64_t>() + 1);
  ASSERT_TRUE(admission.ok()) << admission.status();
  EXPECT_TRUE(absl::StartsWith(admission->plan.fingerprint, "admitted:"));
  const core::JobPlan* kept = admission->plan.FindJob(a);
  ASSERT_NE(kept, nullptr);
  auto before = server_->storage().plans().Get(first["version"].get<int64_t>());
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(kept->flows, before->plan.FindJob(a)->flows);
  EXPECT_EQ(kept->aggregator_paths, before->plan.FindJob(a)->aggregator_paths);
  ASSERT_NE(admission->plan.FindJob(b), nullptr);
  EXPECT_FALSE(admission->plan.FindJob(b)->flows.empty());
  EXPECT_EQ(admission->plan.fingerprint,
            absl::StrCat("admitted:", last["fingerprint"].get<std::string>()));
  EXPECT_EQ(server_->JobState(a), "running");
  EXPECT_EQ(server_->JobState(b), "running");
  ExpectSwitchesEqualStoredIntents();
  // Nothing changed: the next pass neither admits nor refines.
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(Plan()["version"], last["version"]);
}

TEST_F(ControllerIncrementalTest, CancelDropsTheJobAndKeepsTheOther) {
  StartWith(true);
  const int64_t a = server_->Submit(fixtures::SmallLeafSpineJob("first"));
  const int64_t b = server_->Submit(SecondJob());
  ASSERT_TRUE(server_->Sync().ok());
  const Json before = Plan();
  ASSERT_EQ(server_->Call("DELETE", absl::StrCat("/api/v1/jobs/", b)).status, 200);
  ASSERT_TRUE(server_->Sync().ok());
  auto admitted = Events("plan_admitted");
  ASSERT_FALSE(admitted.empty());
  EXPECT_TRUE(absl::StrContains(admitted.back()["message"].get<std::string>(), "removed 1"))
      << admitted.back().dump();
  const Json after = Plan();
  EXPECT_TRUE(JobOf(after, b).is_null());
  EXPECT_EQ(JobOf(after, a)["flows"], JobOf(before, a)["flows"]);
  ExpectSwitchesEqualStoredIntents();
}

// A controller stopped while an admission plan was in force refines it at the next start (the
// stored plan is not re-admitted; the refined plan gets the plain fingerprint).
TEST_F(ControllerIncrementalTest, RestartRefinesAnAdmissionPlanInForce) {
  StartWith(true);
  const int64_t a = server_->Submit(fixtures::SmallLeafSpineJob("first"));
  ASSERT_TRUE(server_->Sync().ok());
  auto latest = server_->storage().plans().Latest();
  ASSERT_TRUE(latest.ok() && latest->has_value());
  core::Plan plan = (*latest)->plan;
  const std::string fingerprint = plan.fingerprint;
  auto intents = server_->storage().plans().Intents(plan.version);
  ASSERT_TRUE(intents.ok());
  // What a crash after the admission and before the refinement leaves behind.
  plan.fingerprint = absl::StrCat("admitted:", fingerprint);
  plan.version = 0;
  auto saved = server_->storage().plans().Save(plan, *intents, 1, {});
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(server_->Sync().ok());
  const Json now = Plan();
  EXPECT_EQ(now["fingerprint"], fingerprint);
  EXPECT_EQ(now["version"].get<int64_t>(), *saved + 1);
  EXPECT_EQ(Events("plan_refined").size(), 1u);
  EXPECT_TRUE(Events("plan_admitted").empty());
  EXPECT_EQ(server_->JobState(a), "running");
  // And a restart with the final plan in force keeps it (no re-plan).
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(Plan()["version"], now["version"]);
}

TEST_F(ControllerIncrementalTest, WithoutIncrementalEveryChangeIsOneFullPlan) {
  StartWith(false);
  const int64_t a = server_->Submit(fixtures::SmallLeafSpineJob("first"));
  ASSERT_TRUE(server_->Sync().ok());
  const int64_t v1 = Plan()["version"].get<int64_t>();
  const int64_t b = server_->Submit(SecondJob());
  ASSERT_TRUE(server_->Sync().ok());
  EXPECT_EQ(Plan()["version"].get<int64_t>(), v1 + 1);
  EXPECT_TRUE(Events("plan_admitted").empty());
  EXPECT_TRUE(Events("plan_refined").empty());
  EXPECT_EQ(server_->JobState(a), "running");
  EXPECT_EQ(server_->JobState(b), "running");
}

}  // namespace
}  // namespace inac::server::testing
