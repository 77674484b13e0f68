// Commands racing the control loop: a command that lands between the loop's
// snapshot and its job-state updates affects its own job only, and after any amount of concurrent
// submits, cancels, progress reports and link changes, one more pass leaves no job stuck and every
// switch holding exactly the plan the API reports. The controller runs over the in-memory stores
// and fake switches; the race is made deterministic with InMemoryStorage::AfterPlanSave.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "server/controller.h"
#include "storage/testing/in_memory_stores.h"
#include "tests/server/server_fixture.h"

namespace inac::server {
namespace {

using testing::FakeFabric;

class ChurnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ControllerOptions o;
    o.debounce_ms = 0;
    o.timer_ms = 3600000;  // passes only when woken
    controller_ = std::make_unique<Controller>(&storage_, fabric_.Factory(), SystemClockMs, o);
    ASSERT_TRUE(controller_->Start().ok());
    const core::Topology topology = fixtures::SmallLeafSpine();
    ASSERT_TRUE(controller_->topology().PutTopology(topology, std::nullopt).ok());
    for (const core::Link& l : topology.links) {
      if (topology.FindSwitch(l.a) && topology.FindSwitch(l.b)) link_ = l.id;  // a fabric link
    }
    ASSERT_FALSE(link_.empty());
    ASSERT_TRUE(controller_->Sync(60000).ok());
  }
  void TearDown() override {
    storage_.AfterPlanSave(nullptr);
    controller_->Stop();
  }

  core::JobId Submit(const std::string& name) {
    std::vector<core::Problem> problems;
    core::JobSpec spec =
        core::JobSpecFromJson(fixtures::SmallLeafSpineJob(name, "vision", 1000), "", &problems);
    EXPECT_TRUE(problems.empty());
    auto created = controller_->jobs().SubmitJob(spec, std::nullopt);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job.id : 0;
  }
  core::JobState State(core::JobId id) {
    auto job = controller_->jobs().GetJob(id);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->state : core::JobState::kFailed;
  }

  // Every managed switch holds the latest plan's intent, and the jobs with entries there are
  // exactly the plan's jobs, all of them running.
  void ExpectSwitchesEqualTheApi() {
    auto plan = controller_->CurrentPlan();
    ASSERT_TRUE(plan.ok() && plan->has_value());
    const core::Plan& p = (*plan)->plan;
    std::set<core::JobId> planned;
    for (const core::JobPlan& j : p.jobs) {
      planned.insert(j.job_id);
      EXPECT_EQ(State(j.job_id), core::JobState::kRunning) << "job " << j.job_id;
    }
    auto active = controller_->jobs().ListJobs(core::JobFilter{
        {core::JobState::kPending, core::JobState::kScheduled, core::JobState::kRunning},
        {},
        0,
        1000});
    ASSERT_TRUE(active.ok());
    for (const core::Job& j : active->jobs) {
      EXPECT_TRUE(planned.count(j.id)) << "active job " << j.id << " is not in plan " << p.version;
    }
    auto intents = storage_.plans().Intents(p.version);
    ASSERT_TRUE(intents.ok());
    for (const std::string& id : fabric_.ids()) {
      auto fake = fabric_.Get(id);
      ASSERT_TRUE(fake);
      auto held = fake->applied_intent();
      ASSERT_TRUE(held.has_value()) << id;
      EXPECT_EQ(held->version, p.version) << id;
      for (const auto& j : held->jobs) {
        EXPECT_TRUE(planned.count(j.job_id)) << id << " holds entries of job " << j.job_id;
      }
    }
  }

  std::string link_;
  storage::InMemoryStorage storage_;
  FakeFabric fabric_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ChurnTest, ACancelDuringPlanningAffectsOnlyThatJob) {
  const core::JobId a = Submit("a");
  const core::JobId b = Submit("b");
  const core::JobId c = Submit("c");
  // The first plan holding all three is saved; before the loop marks them scheduled, b is
  // cancelled (as a client's DELETE would, between the loop's snapshot and its updates).
  std::atomic<bool> cancelled{false};
  storage_.AfterPlanSave([&] {
    if (!cancelled.exchange(true)) {
      auto s = controller_->jobs().CancelJob(b);
      EXPECT_TRUE(s.ok()) << s.status();
    }
  });
  ASSERT_TRUE(controller_->Sync(60000).ok());
  ASSERT_TRUE(cancelled);
  EXPECT_EQ(State(b), core::JobState::kCancelled);
  // The others left pending in the same pass, although one update of the batch was illegal.
  EXPECT_NE(State(a), core::JobState::kPending);
  EXPECT_NE(State(c), core::JobState::kPending);
  // The cancel woke the loop: within one more pass the switches drop b and the rest run.
  ASSERT_TRUE(controller_->Sync(60000).ok());
  EXPECT_EQ(State(a), core::JobState::kRunning);
  EXPECT_EQ(State(c), core::JobState::kRunning);
  ExpectSwitchesEqualTheApi();
}

TEST_F(ChurnTest, AfterConcurrentCommandsNoJobIsStuckAndSwitchesEqualTheApi) {
  // Four clients, a bounded number of commands each, while the loop runs passes.
  constexpr int kClients = 4;
  constexpr int kCommands = 60;
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      std::vector<core::JobId> mine;
      for (int i = 0; i < kCommands; ++i) {
        switch (rng() % 5) {
          case 0:
          case 1:
            mine.push_back(Submit(absl::StrCat("c", t, "-", i)));
            break;
          case 2:
            if (!mine.empty()) {
              // FailedPrecondition when it already ended: a legal answer, not a failure.
              auto s = controller_->jobs().CancelJob(mine[rng() % mine.size()]);
              if (!s.ok() && !absl::IsFailedPrecondition(s.status())) failures++;
            }
            break;
          case 3:
            if (!mine.empty()) {
              core::JobId id = mine[rng() % mine.size()];
              auto job = controller_->jobs().GetJob(id);
              if (job.ok()) {
                auto s = controller_->jobs().ReportProgress(id, job->iterations_done + 1, 0.5);
                if (!s.ok() && !absl::IsFailedPrecondition(s.status()) &&
                    !absl::IsInvalidArgument(s.status())) {
                  failures++;
                }
              }
            }
            break;
          case 4: {
            auto s = controller_->topology().SetLinkStatus(
                link_, rng() % 2 ? core::LinkStatus::kDown : core::LinkStatus::kUp, std::nullopt);
            if (!s.ok() && !absl::IsUnavailable(s.status())) failures++;
            break;
          }
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(
      controller_->topology().SetLinkStatus(link_, core::LinkStatus::kUp, std::nullopt).ok());
  // One pass to plan what the commands left, one to confirm it on the switches.
  ASSERT_TRUE(controller_->Sync(60000).ok());
  ASSERT_TRUE(controller_->Sync(60000).ok());
  auto pending = controller_->jobs().ListJobs(
      core::JobFilter{{core::JobState::kPending, core::JobState::kScheduled}, {}, 0, 1000});
  ASSERT_TRUE(pending.ok());
  EXPECT_TRUE(pending->jobs.empty())
      << pending->jobs.size() << " job(s) stuck, the first " << pending->jobs.front().id;
  ExpectSwitchesEqualTheApi();
}

}  // namespace
}  // namespace inac::server

namespace inac::server {
namespace {

// A job stored before a limit existed (here a tenant with a space) can never be placed: it fails
// with the reason instead of waiting in pending forever.
TEST_F(ChurnTest, AStoredJobThatBreaksALimitFails) {
  std::vector<core::Problem> problems;
  core::JobSpec spec =
      core::JobSpecFromJson(fixtures::SmallLeafSpineJob("old", "vision", 10), "", &problems);
  ASSERT_TRUE(problems.empty());
  spec.tenant = "team b";  // refused by the API today
  auto created = storage_.jobs().Create(spec, 1, std::nullopt, {});
  ASSERT_TRUE(created.ok()) << created.status();
  const core::JobId good = Submit("good");
  ASSERT_TRUE(controller_->Sync(60000).ok());
  auto old = controller_->jobs().GetJob(created->job.id);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->state, core::JobState::kFailed);
  EXPECT_TRUE(old->failure_reason.find("tenant") != std::string::npos) << old->failure_reason;
  EXPECT_NE(State(good), core::JobState::kPending);
}

}  // namespace
}  // namespace inac::server

namespace inac::server {
namespace {

// A fabric whose switches have no P4Runtime endpoint: jobs run on nothing INAC programmed, and
// the job's running event says so.
TEST(UnmanagedFabricTest, ARunningJobSaysNothingWasProgrammed) {
  storage::InMemoryStorage storage;
  testing::FakeFabric fabric;
  ControllerOptions o;
  o.debounce_ms = 0;
  o.timer_ms = 3600000;
  Controller controller(&storage, fabric.Factory(), SystemClockMs, o);
  ASSERT_TRUE(controller.Start().ok());
  ASSERT_TRUE(controller.topology().PutTopology(fixtures::LeafSpine(2, 2, 2), std::nullopt).ok());
  std::vector<core::Problem> problems;
  auto created = controller.jobs().SubmitJob(
      core::JobSpecFromJson(fixtures::SmallLeafSpineJob("j"), "", &problems), std::nullopt);
  ASSERT_TRUE(problems.empty());
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(controller.Sync(60000).ok());
  ASSERT_TRUE(controller.Sync(60000).ok());
  core::EventFilter filter;
  filter.job_id = created->job.id;
  filter.kind = "job_running";
  auto events = controller.Events(filter);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_TRUE(absl::StrContains((*events)[0].message, "nothing was programmed"))
      << (*events)[0].message;
  controller.Stop();
}

}  // namespace
}  // namespace inac::server
