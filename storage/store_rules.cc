#include "storage/store_rules.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/json.h"

namespace inac::storage {

absl::Status ValidateEvent(const core::Event& event) {
  if (event.kind.empty()) return absl::InvalidArgumentError("event kind must not be empty");
  std::vector<core::Problem> problems;
  if (!core::ParseJsonText(event.data_json, &problems)) {
    return absl::InvalidArgumentError(
        absl::StrCat("event data_json is not JSON: ", core::FormatProblems(problems)));
  }
  return absl::OkStatus();
}

absl::Status ValidateEvents(const std::vector<core::Event>& events) {
  for (const core::Event& e : events) {
    if (absl::Status s = ValidateEvent(e); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateEventFilter(const core::EventFilter& filter) {
  if (filter.limit <= 0) return absl::InvalidArgumentError("event limit must be positive");
  return absl::OkStatus();
}

absl::Status ValidateJobFilter(const core::JobFilter& filter) {
  if (filter.limit <= 0) return absl::InvalidArgumentError("job limit must be positive");
  return absl::OkStatus();
}

absl::Status ValidateIntents(const std::vector<core::SwitchIntent>& intents) {
  std::set<std::string> seen;
  for (const core::SwitchIntent& intent : intents) {
    if (intent.switch_id.empty()) {
      return absl::InvalidArgumentError("switch intent with an empty switch id");
    }
    if (!seen.insert(intent.switch_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two intents for switch \"", intent.switch_id, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSwitchState(const core::SwitchState& state) {
  if (state.switch_id.empty()) return absl::InvalidArgumentError("switch state without switch id");
  return absl::OkStatus();
}

absl::Status ValidateAuditEntry(const core::AuditEntry& entry) {
  if (entry.actor.empty() || entry.role.empty() || entry.method.empty() || entry.path.empty()) {
    return absl::InvalidArgumentError("audit entry needs an actor, a role, a method and a path");
  }
  if (entry.status < 100 || entry.status > 599) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit entry status ", entry.status, " is not an HTTP status"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAuditFilter(const core::AuditFilter& filter) {
  if (filter.limit <= 0) return absl::InvalidArgumentError("audit limit must be positive");
  if (filter.after_seq < 0) return absl::InvalidArgumentError("audit cursor must not be negative");
  return absl::OkStatus();
}

absl::Status ValidatePruneBatch(int64_t max_rows) {
  if (max_rows <= 0) return absl::InvalidArgumentError("prune batch size must be positive");
  return absl::OkStatus();
}

absl::Status ApplyJobUpdate(const core::JobUpdate& update, int64_t now_ms, core::Job& job) {
  if (update.iterations_done && *update.iterations_done < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job.id, ": iterations_done must not be negative"));
  }
  if (update.state && *update.state != job.state) {
    if (absl::Status s = core::CheckTransition(job.state, *update.state); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("job ", job.id, ": ", s.message()));
    }
    job.state = *update.state;
  }
  if (update.failure_reason) job.failure_reason = *update.failure_reason;
  if (update.iterations_done) job.iterations_done = *update.iterations_done;
  if (update.loss) job.loss = *update.loss;
  job.updated_ms = now_ms;
  return absl::OkStatus();
}

bool JobMatches(const core::JobFilter& filter, const core::Job& job) {
  if (!filter.states.empty() &&
      std::find(filter.states.begin(), filter.states.end(), job.state) == filter.states.end()) {
    return false;
  }
  return !filter.tenant || job.spec.tenant == *filter.tenant;
}

}  // namespace inac::storage
