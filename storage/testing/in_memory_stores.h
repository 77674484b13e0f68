// In-memory implementation of core/stores.h for unit tests of the scheduler-facing, southbound and
// server code (fakes, not mocks: docs/architecture.md "Tests"). Same semantics as SqliteStorage --
// both pass tests/storage/store_contract_test.cc -- except durability: everything is lost with the
// object.
//
// Thread safety: all methods may be called from any thread; one mutex guards all state, so every
// write is atomic and ReadSnapshot is consistent.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/stores.h"

namespace inac::storage {

class InMemoryStorage final : public core::Storage {
 public:
  InMemoryStorage();
  ~InMemoryStorage() override;

  core::TopologyStore& topology() override;
  core::JobStore& jobs() override;
  core::PlanStore& plans() override;
  core::SwitchStateStore& switch_states() override;
  core::EventLog& events() override;
  core::AuditLog& audit() override;
  absl::StatusOr<core::Snapshot> ReadSnapshot() override;

  // OK unless SetHealth set a fault. Not tied to FailNextWrites: that one models single failed
  // writes (a transient fault), this one the state of the store (what readiness reports), so a
  // test of an error path does not also change readiness while its injected writes are pending.
  absl::Status Health() override;

  // Fault injection for tests of callers: the next `count` write calls (of any store) return
  // `status` and change nothing. Reads are unaffected.
  void FailNextWrites(absl::Status status, int count = 1);
  // Fault injection for readiness: Health() returns `status` until set again (OK clears it).
  void SetHealth(absl::Status status);
  // Runs `hook` after every successful plans().Save, once the save committed (outside the store's
  // lock, so the hook may call the stores): a test's way to interleave a command with the
  // controller loop deterministically. An empty hook removes it.
  void AfterPlanSave(std::function<void()> hook);

  // The shared state; public so the store classes in the .cc can reach it.
  struct State {
    std::optional<core::TopologyRecord> topology;
    std::map<core::JobId, core::Job> jobs;
    core::JobId last_job_id = 0;
    std::map<std::string, std::pair<core::JobId, std::string>> idempotency;  // key -> job, hash
    std::map<int64_t, core::PlanRecord> plans;
    std::map<int64_t, std::vector<core::SwitchIntent>> intents;
    std::map<std::string, core::SwitchState> switch_states;
    std::map<int64_t, core::Event> events;
    int64_t last_seq = 0;
    std::map<int64_t, core::AuditEntry> audit;
    int64_t last_audit_seq = 0;
    absl::Status injected_error;
    int injected_count = 0;
    absl::Status health;
    std::function<void()> after_plan_save;
  };
  class Stores;

 private:
  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Stores> stores_;
};

}  // namespace inac::storage
