#include "storage/testing/in_memory_stores.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/store_rules.h"

namespace inac::storage {

namespace {

using State = InMemoryStorage::State;

// Returns the injected error (consuming one) or OK. Called first by every write, under the lock.
absl::Status CheckInjected(State& s) {
  if (s.injected_count <= 0) return absl::OkStatus();
  --s.injected_count;
  return s.injected_error;
}

int64_t AppendLocked(State& s, const std::vector<core::Event>& events,
                     std::optional<core::JobId> default_job_id = std::nullopt) {
  for (core::Event e : events) {
    e.seq = ++s.last_seq;
    if (!e.job_id) e.job_id = default_job_id;
    s.events.emplace(e.seq, std::move(e));
  }
  return s.last_seq;
}

std::vector<core::SwitchState> SwitchStatesOf(const State& s) {
  std::vector<core::SwitchState> states;
  for (const auto& [id, state] : s.switch_states) states.push_back(state);
  return states;
}

class Base {
 public:
  Base(absl::Mutex* mu, State* state) : mu_(mu), s_(state) {}

 protected:
  absl::Mutex* mu_;  // Not owned.
  State* s_;         // Not owned; guarded by *mu_.
};

class TopologyStoreImpl final : public core::TopologyStore, Base {
 public:
  using Base::Base;
  absl::StatusOr<std::optional<core::TopologyRecord>> Get() override {
    absl::MutexLock l(mu_);
    return s_->topology;
  }
  absl::StatusOr<int64_t> Put(const core::Topology& topology, int64_t now_ms,
                              std::optional<int64_t> expected_version,
                              const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    int64_t current = s_->topology ? s_->topology->version : 0;
    if (expected_version && *expected_version != current) {
      return absl::FailedPreconditionError(
          absl::StrCat("topology version is ", current, ", not the expected ", *expected_version));
    }
    s_->topology = core::TopologyRecord{topology, current + 1, now_ms};
    AppendLocked(*s_, events);
    return current + 1;
  }
};

class JobStoreImpl final : public core::JobStore, Base {
 public:
  using Base::Base;
  absl::StatusOr<core::CreateJobResult> Create(
      const core::JobSpec& spec, int64_t now_ms,
      const std::optional<core::IdempotencyKey>& idempotency,
      const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    if (idempotency) {
      auto it = s_->idempotency.find(idempotency->key);
      if (it != s_->idempotency.end()) {
        if (it->second.second != idempotency->body_hash) {
          return absl::AlreadyExistsError(
              absl::StrCat("conflict: idempotency key \"", idempotency->key, "\" was used for job ",
                           it->second.first, " with a different request body"));
        }
        return core::CreateJobResult{s_->jobs.at(it->second.first), false};
      }
    }
    core::Job job;
    job.id = ++s_->last_job_id;
    job.spec = spec;
    job.created_ms = job.updated_ms = now_ms;
    s_->jobs.emplace(job.id, job);
    if (idempotency) {
      s_->idempotency.emplace(idempotency->key, std::make_pair(job.id, idempotency->body_hash));
    }
    AppendLocked(*s_, events, job.id);
    return core::CreateJobResult{std::move(job), true};
  }

  absl::StatusOr<core::Job> Get(core::JobId id) override {
    absl::MutexLock l(mu_);
    auto it = s_->jobs.find(id);
    if (it == s_->jobs.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
    return it->second;
  }

  absl::StatusOr<core::Job> Update(core::JobId id, const core::JobUpdate& update, int64_t now_ms,
                                   const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    auto it = s_->jobs.find(id);
    if (it == s_->jobs.end()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
    core::Job job = it->second;
    INAC_RETURN_IF_ERROR(ApplyJobUpdate(update, now_ms, job));
    it->second = job;
    AppendLocked(*s_, events, id);
    return job;
  }

  absl::Status UpdateMany(const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates,
                          int64_t now_ms, const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    std::map<core::JobId, core::Job> changed;  // applied only if every update succeeds
    for (const auto& [id, update] : updates) {
      auto it = changed.find(id);
      if (it == changed.end()) {
        auto stored = s_->jobs.find(id);
        if (stored == s_->jobs.end()) {
          return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
        }
        it = changed.emplace(id, stored->second).first;
      }
      INAC_RETURN_IF_ERROR(ApplyJobUpdate(update, now_ms, it->second));
    }
    for (auto& [id, job] : changed) s_->jobs[id] = std::move(job);
    AppendLocked(*s_, events);
    return absl::OkStatus();
  }

  absl::StatusOr<core::JobPage> List(const core::JobFilter& filter) override {
    INAC_RETURN_IF_ERROR(ValidateJobFilter(filter));
    absl::MutexLock l(mu_);
    core::JobPage page;
    for (auto it = s_->jobs.upper_bound(filter.after_id); it != s_->jobs.end(); ++it) {
      if (!JobMatches(filter, it->second)) continue;
      if (static_cast<int64_t>(page.jobs.size()) == filter.limit) {
        page.next_after_id = page.jobs.back().id;
        break;
      }
      page.jobs.push_back(it->second);
    }
    return page;
  }

  absl::StatusOr<std::map<core::JobState, int64_t>> CountByState() override {
    absl::MutexLock l(mu_);
    std::map<core::JobState, int64_t> counts;
    for (const auto& [id, job] : s_->jobs) ++counts[job.state];
    return counts;
  }

  absl::StatusOr<int64_t> PruneFinished(int64_t older_than_ms, int64_t max_rows) override {
    INAC_RETURN_IF_ERROR(ValidatePruneBatch(max_rows));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    // Oldest first, as SqliteJobStore: by (updated_ms, id).
    std::vector<std::pair<int64_t, core::JobId>> old;
    for (const auto& [id, job] : s_->jobs) {
      if (core::IsTerminal(job.state) && job.updated_ms < older_than_ms) {
        old.emplace_back(job.updated_ms, id);
      }
    }
    std::sort(old.begin(), old.end());
    if (static_cast<int64_t>(old.size()) > max_rows) old.resize(max_rows);
    for (const auto& [updated, id] : old) {
      s_->jobs.erase(id);
      std::erase_if(s_->idempotency, [id](const auto& kv) { return kv.second.first == id; });
      std::erase_if(s_->events, [id](const auto& kv) { return kv.second.job_id == id; });
    }
    return static_cast<int64_t>(old.size());
  }
};

class PlanStoreImpl final : public core::PlanStore, Base {
 public:
  using Base::Base;
  absl::StatusOr<int64_t> Save(const core::Plan& plan,
                               const std::vector<core::SwitchIntent>& intents, int64_t now_ms,
                               const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateIntents(intents));
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    if (plan.version < 0) return absl::InvalidArgumentError("plan version must not be negative");
    std::function<void()> hook;
    auto version = SaveLocked(plan, intents, now_ms, events, &hook);
    if (version.ok() && hook) hook();  // after the commit, outside the lock
    return version;
  }

  absl::StatusOr<int64_t> SaveLocked(const core::Plan& plan,
                                     const std::vector<core::SwitchIntent>& intents, int64_t now_ms,
                                     const std::vector<core::Event>& events,
                                     std::function<void()>* hook) {
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    *hook = s_->after_plan_save;
    int64_t latest = s_->plans.empty() ? 0 : s_->plans.rbegin()->first;
    int64_t version = plan.version > 0 ? plan.version : latest + 1;
    if (version <= latest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "plan version ", version, " is not newer than the latest saved plan ", latest));
    }
    core::PlanRecord record{plan, now_ms};
    record.plan.version = version;
    s_->plans.emplace(version, std::move(record));
    std::vector<core::SwitchIntent> stored = intents;
    for (core::SwitchIntent& intent : stored) intent.version = version;
    std::sort(stored.begin(), stored.end(),
              [](const auto& a, const auto& b) { return a.switch_id < b.switch_id; });
    s_->intents.emplace(version, std::move(stored));
    AppendLocked(*s_, events);
    return version;
  }

  absl::StatusOr<std::optional<core::PlanRecord>> Latest() override {
    absl::MutexLock l(mu_);
    if (s_->plans.empty()) return std::optional<core::PlanRecord>();
    return std::optional<core::PlanRecord>(s_->plans.rbegin()->second);
  }

  absl::StatusOr<core::PlanRecord> Get(int64_t version) override {
    absl::MutexLock l(mu_);
    auto it = s_->plans.find(version);
    if (it == s_->plans.end()) {
      return absl::NotFoundError(absl::StrCat("plan ", version, " not found"));
    }
    return it->second;
  }

  absl::StatusOr<std::vector<core::SwitchIntent>> Intents(int64_t version) override {
    absl::MutexLock l(mu_);
    auto it = s_->intents.find(version);
    if (it == s_->intents.end()) {
      return absl::NotFoundError(absl::StrCat("plan ", version, " not found"));
    }
    return it->second;
  }

  absl::StatusOr<int64_t> Prune(int64_t keep_last) override {
    if (keep_last < 1) return absl::InvalidArgumentError("must keep at least the latest plan");
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    int64_t deleted = 0;
    while (static_cast<int64_t>(s_->plans.size()) > keep_last) {
      s_->intents.erase(s_->plans.begin()->first);
      s_->plans.erase(s_->plans.begin());
      ++deleted;
    }
    return deleted;
  }
};

class SwitchStateStoreImpl final : public core::SwitchStateStore, Base {
 public:
  using Base::Base;
  absl::StatusOr<std::optional<core::SwitchState>> Get(const std::string& switch_id) override {
    absl::MutexLock l(mu_);
    auto it = s_->switch_states.find(switch_id);
    if (it == s_->switch_states.end()) return std::optional<core::SwitchState>();
    return std::optional<core::SwitchState>(it->second);
  }
  absl::StatusOr<std::vector<core::SwitchState>> List() override {
    absl::MutexLock l(mu_);
    return SwitchStatesOf(*s_);
  }
  absl::Status Put(const core::SwitchState& state,
                   const std::vector<core::Event>& events) override {
    INAC_RETURN_IF_ERROR(ValidateSwitchState(state));
    INAC_RETURN_IF_ERROR(ValidateEvents(events));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    s_->switch_states[state.switch_id] = state;
    AppendLocked(*s_, events);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> MaxElectionId() override {
    absl::MutexLock l(mu_);
    uint64_t max = 0;
    for (const auto& [id, state] : s_->switch_states) max = std::max(max, state.election_id);
    return max;
  }
};

class EventLogImpl final : public core::EventLog, Base {
 public:
  using Base::Base;
  absl::StatusOr<int64_t> Append(const core::Event& event) override {
    INAC_RETURN_IF_ERROR(ValidateEvent(event));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    return AppendLocked(*s_, {event});
  }
  absl::StatusOr<std::vector<core::Event>> List(const core::EventFilter& filter) override {
    INAC_RETURN_IF_ERROR(ValidateEventFilter(filter));
    absl::MutexLock l(mu_);
    std::vector<core::Event> events;
    for (auto it = s_->events.upper_bound(filter.after_seq);
         it != s_->events.end() && static_cast<int64_t>(events.size()) < filter.limit; ++it) {
      const core::Event& e = it->second;
      if (filter.job_id && e.job_id != filter.job_id) continue;
      if (filter.kind && e.kind != *filter.kind) continue;
      events.push_back(e);
    }
    return events;
  }
  absl::StatusOr<int64_t> LastSeq() override {
    absl::MutexLock l(mu_);
    return s_->last_seq;
  }
  absl::StatusOr<int64_t> Trim(int64_t keep_last) override {
    if (keep_last < 0) return absl::InvalidArgumentError("keep_last must not be negative");
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    int64_t deleted = 0;
    while (static_cast<int64_t>(s_->events.size()) > keep_last) {
      s_->events.erase(s_->events.begin());
      ++deleted;
    }
    return deleted;
  }
};

class AuditLogImpl final : public core::AuditLog, Base {
 public:
  using Base::Base;
  absl::StatusOr<int64_t> Append(const core::AuditEntry& entry) override {
    INAC_RETURN_IF_ERROR(ValidateAuditEntry(entry));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    core::AuditEntry stored = entry;
    stored.seq = ++s_->last_audit_seq;
    s_->audit.emplace(stored.seq, stored);
    return stored.seq;
  }
  absl::StatusOr<core::AuditPage> List(const core::AuditFilter& filter) override {
    INAC_RETURN_IF_ERROR(ValidateAuditFilter(filter));
    absl::MutexLock l(mu_);
    core::AuditPage page;
    for (auto it = s_->audit.upper_bound(filter.after_seq); it != s_->audit.end(); ++it) {
      if (filter.actor && it->second.actor != *filter.actor) continue;
      if (static_cast<int64_t>(page.entries.size()) == filter.limit) {
        page.next_after_seq = page.entries.back().seq;
        break;
      }
      page.entries.push_back(it->second);
    }
    return page;
  }
  absl::StatusOr<int64_t> Prune(int64_t older_than_ms, int64_t max_rows) override {
    INAC_RETURN_IF_ERROR(ValidatePruneBatch(max_rows));
    absl::MutexLock l(mu_);
    INAC_RETURN_IF_ERROR(CheckInjected(*s_));
    // Oldest first, as SqliteAuditLog: by (time_ms, seq).
    std::vector<std::pair<int64_t, int64_t>> old;
    for (const auto& [seq, entry] : s_->audit) {
      if (entry.time_ms < older_than_ms) old.emplace_back(entry.time_ms, seq);
    }
    std::sort(old.begin(), old.end());
    if (static_cast<int64_t>(old.size()) > max_rows) old.resize(max_rows);
    for (const auto& [time, seq] : old) s_->audit.erase(seq);
    return static_cast<int64_t>(old.size());
  }
};

}  // namespace

class InMemoryStorage::Stores {
 public:
  Stores(absl::Mutex* mu, State* state)
      : topology(mu, state),
        jobs(mu, state),
        plans(mu, state),
        switches(mu, state),
        events(mu, state),
        audit(mu, state) {}
  TopologyStoreImpl topology;
  JobStoreImpl jobs;
  PlanStoreImpl plans;
  SwitchStateStoreImpl switches;
  EventLogImpl events;
  AuditLogImpl audit;
};

InMemoryStorage::InMemoryStorage() : stores_(std::make_unique<Stores>(&mu_, &state_)) {}
InMemoryStorage::~InMemoryStorage() = default;

core::TopologyStore& InMemoryStorage::topology() { return stores_->topology; }
core::JobStore& InMemoryStorage::jobs() { return stores_->jobs; }
core::PlanStore& InMemoryStorage::plans() { return stores_->plans; }
core::SwitchStateStore& InMemoryStorage::switch_states() { return stores_->switches; }
core::EventLog& InMemoryStorage::events() { return stores_->events; }
core::AuditLog& InMemoryStorage::audit() { return stores_->audit; }

void InMemoryStorage::FailNextWrites(absl::Status status, int count) {
  absl::MutexLock l(&mu_);
  state_.injected_error = std::move(status);
  state_.injected_count = count;
}

void InMemoryStorage::SetHealth(absl::Status status) {
  absl::MutexLock l(&mu_);
  state_.health = std::move(status);
}

absl::Status InMemoryStorage::Health() {
  absl::MutexLock l(&mu_);
  return state_.health;
}

void InMemoryStorage::AfterPlanSave(std::function<void()> hook) {
  absl::MutexLock l(&mu_);
  state_.after_plan_save = std::move(hook);
}

absl::StatusOr<core::Snapshot> InMemoryStorage::ReadSnapshot() {
  absl::MutexLock l(&mu_);
  core::Snapshot snapshot;
  snapshot.topology = state_.topology;
  for (const auto& [id, job] : state_.jobs) {
    if (!core::IsTerminal(job.state)) snapshot.jobs.push_back(job);
  }
  if (!state_.plans.empty()) {
    snapshot.plan = state_.plans.rbegin()->second;
    snapshot.intents = state_.intents.at(snapshot.plan->plan.version);
  }
  snapshot.switch_states = SwitchStatesOf(state_);
  snapshot.last_event_seq = state_.last_seq;
  return snapshot;
}

}  // namespace inac::storage
