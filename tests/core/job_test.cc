#include "core/job.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/models.h"

namespace inac::core {
namespace {

constexpr JobState kAll[] = {JobState::kPending,   JobState::kScheduled, JobState::kRunning,
                             JobState::kCompleted, JobState::kCancelled, JobState::kFailed};

TEST(JobStateTest, NamesRoundTrip) {
  for (JobState s : kAll) EXPECT_EQ(ParseJobState(JobStateName(s)), s);
  EXPECT_EQ(JobStateName(JobState::kRunning), "running");
  EXPECT_FALSE(ParseJobState("Running"));
  EXPECT_FALSE(ParseJobState(""));
}

TEST(JobStateTest, TransitionTable) {
  using S = JobState;
  // The whole table, row by row (from -> allowed targets).
  std::map<S, std::set<S>> legal = {
      {S::kPending, {S::kScheduled, S::kCancelled, S::kFailed}},
      {S::kScheduled, {S::kRunning, S::kPending, S::kCancelled, S::kFailed}},
      {S::kRunning, {S::kCompleted, S::kScheduled, S::kPending, S::kCancelled, S::kFailed}},
      {S::kCompleted, {}},
      {S::kCancelled, {}},
      {S::kFailed, {}},
  };
  for (S from : kAll) {
    for (S to : kAll) {
      EXPECT_EQ(IsLegalTransition(from, to), legal[from].count(to) > 0)
          << JobStateName(from) << " -> " << JobStateName(to);
    }
  }
}

TEST(JobStateTest, TerminalStates) {
  EXPECT_TRUE(IsTerminal(JobState::kCompleted));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
}

TEST(JobStateTest, TransitionLeavesJobUnchangedWhenIllegal) {
  Job job;
  ASSERT_TRUE(Transition(job, JobState::kScheduled).ok());
  ASSERT_TRUE(Transition(job, JobState::kRunning).ok());
  ASSERT_TRUE(Transition(job, JobState::kCompleted).ok());
  absl::Status s = Transition(job, JobState::kRunning);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "illegal job state transition completed -> running");
  EXPECT_EQ(job.state, JobState::kCompleted);
}

TEST(ModelsTest, TableMatchesAlgorithmsDoc) {
  EXPECT_EQ(BuiltinModels().size(), 8u);
  const ModelProfile* r50 = FindModel("ResNet50");
  ASSERT_NE(r50, nullptr);
  EXPECT_EQ(r50->gradient_bytes, 102236160);  // 97.5 MiB
  EXPECT_DOUBLE_EQ(r50->compute_ms, 323);
  ASSERT_NE(FindModel("bert-large"), nullptr);
  EXPECT_EQ(FindModel("bert-large")->gradient_bytes, int64_t{1279} * 1024 * 1024);
  EXPECT_EQ(FindModel("GPT-9"), nullptr);
}

}  // namespace
}  // namespace inac::core
