#include "core/job.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace inac::core {

namespace {
constexpr std::array<std::string_view, 6> kStateNames = {"pending",   "scheduled", "running",
                                                         "completed", "cancelled", "failed"};
}  // namespace

std::string_view JobStateName(JobState state) { return kStateNames[static_cast<size_t>(state)]; }

std::optional<JobState> ParseJobState(std::string_view name) {
  for (size_t i = 0; i < kStateNames.size(); ++i) {
    if (kStateNames[i] == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kCancelled ||
         state == JobState::kFailed;
}

bool IsLegalTransition(JobState from, JobState to) {
  using S = JobState;
  switch (from) {
    case S::kPending:
      return to == S::kScheduled || to == S::kCancelled || to == S::kFailed;
    case S::kScheduled:
      return to == S::kRunning || to == S::kPending || to == S::kCancelled || to == S::kFailed;
    case S::kRunning:
      return to == S::kCompleted || to == S::kScheduled || to == S::kPending ||
             to == S::kCancelled || to == S::kFailed;
    case S::kCompleted:
    case S::kCancelled:
    case S::kFailed:
      return false;
  }
  return false;
}

absl::Status CheckTransition(JobState from, JobState to) {
  if (IsLegalTransition(from, to)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("illegal job state transition ",
                                                    std::string(JobStateName(from)), " -> ",
                                                    std::string(JobStateName(to))));
}

absl::Status Transition(Job& job, JobState to) {
  absl::Status status = CheckTransition(job.state, to);
  if (status.ok()) job.state = to;
  return status;
}

}  // namespace inac::core
