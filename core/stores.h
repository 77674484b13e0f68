// Repository interfaces: what the controller persists and how it reads it back (docs/storage.md;
// their place in the data flow: docs/architecture.md). Implemented by storage/ (SqliteStorage on
// SQLite, InMemoryStorage for unit tests of other layers); both pass the same contract tests
// (tests/storage/store_contract_test.cc).
//
// Atomicity. Every write method is ONE transaction: it either happens entirely or not at all, and
// once it returns OK it is durable (SqliteStorage: WAL + synchronous=FULL). A write method that
// takes `events` appends them to the EventLog in that same transaction, so a state change and the
// event row describing it are never seen apart. (This is the chosen alternative to a general
// unit-of-work: every multi-row change the controller makes -- job + event, job batch + events,
// plan + all its intents + events -- is one call.)
//
// Errors (canonical codes, never exceptions):
//   NotFound            unknown job id / plan version
//   FailedPrecondition  illegal job state transition (core::CheckTransition), stale expected
//                       version, database refused at open (newer schema, not a database, in use)
//   AlreadyExists       idempotency key reused with a different request body (a conflict)
//   InvalidArgument     malformed arguments (negative limit, mismatching intent, ...)
//   ResourceExhausted   disk full (SQLITE_FULL); nothing of the failed write is kept
//   Unavailable         a storage fault: database busy, I/O error, the file corrupt, deleted,
//                       replaced or read-only (Storage::Health); never the caller's fault, and a
//                       write that returns it was not acknowledged
//   DataLoss            stored value that no longer decodes
//   PermissionDenied    only at open: the database file is not writable
//
// Thread safety: every implementation is safe to call from any thread; writes are serialised.
//
// Every member of the structs below has an initializer so that designated initializers
// (`List({.tenant = "t", .limit = 10})`) compile under -Wextra -Werror.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/job.h"
#include "core/plan.h"
#include "core/topology.h"

namespace inac::core {

// --- Event log ---

// One row of the append-only event log.
struct Event {
  int64_t seq = 0;      // assigned by the log on append (ignored on input); strictly increasing
  int64_t time_ms = 0;  // Unix epoch milliseconds, set by the caller
  std::string kind{};   // e.g. "job_submitted", "job_state", "plan_saved", "switch_error"
  std::optional<JobId> job_id{};
  std::string message{};
  std::string data_json = "{}";  // a JSON document (text), stored verbatim

  bool operator==(const Event&) const = default;
};

struct EventFilter {
  int64_t after_seq = 0;          // only events with seq > after_seq
  std::optional<JobId> job_id{};  // only events of this job
  std::optional<std::string> kind{};
  int64_t limit = 1000;  // at most this many (> 0), in increasing seq order
};

class EventLog {
 public:
  virtual ~EventLog() = default;

  // Appends `event` and returns its sequence number. Sequence numbers are never reused, even after
  // Trim. InvalidArgument for an empty kind.
  virtual absl::StatusOr<int64_t> Append(const Event& event) = 0;
  // Events matching `filter`, oldest first. InvalidArgument for limit <= 0.
  virtual absl::StatusOr<std::vector<Event>> List(const EventFilter& filter) = 0;
  // Sequence number of the newest event ever appended (0 for none).
  virtual absl::StatusOr<int64_t> LastSeq() = 0;
  // Retention by count: deletes the oldest events so that at most `keep_last` remain; returns how
  // many were deleted. InvalidArgument for keep_last < 0.
  virtual absl::StatusOr<int64_t> Trim(int64_t keep_last) = 0;
};

// --- Audit log ---

// One write request to the API as the audit log keeps it (docs/controller.md "Audit log and
// retention"): who made it, from where, what, and the answer. Never a token or a request body.
struct AuditEntry {
  int64_t seq = 0;      // assigned by the log on append (ignored on input); strictly increasing
  int64_t time_ms = 0;  // Unix epoch milliseconds, set by the caller
  std::string actor{};  // the token's name; "anonymous" when the API has no tokens
  std::string role{};   // the token's role ("admin", ...); "none" when the API has no tokens
  std::string remote_addr{};
  std::string method{};           // "POST", "PUT", "PATCH", "DELETE"
  std::string path{};             // without the query string
  int status = 0;                 // the HTTP status answered (100..599)
  std::optional<JobId> job_id{};  // the job the request named or created

  bool operator==(const AuditEntry&) const = default;
};

struct AuditFilter {
  int64_t after_seq = 0;               // cursor: only entries with seq > after_seq (>= 0)
  std::optional<std::string> actor{};  // exact match
  int64_t limit = 100;                 // > 0
};

struct AuditPage {
  std::vector<AuditEntry> entries{};        // increasing seq order
  std::optional<int64_t> next_after_seq{};  // set when more match: the next page's after_seq
};

class AuditLog {
 public:
  virtual ~AuditLog() = default;

  // Appends `entry` in its own transaction and returns its sequence number (never reused, even
  // after Prune). The one write that is not fsynced: it survives a process crash, but a power cut
  // before the next durable commit may lose it (SqliteStorage; docs/storage.md "Durability").
  // InvalidArgument for an empty actor, role, method or path, or a status outside 100..599.
  virtual absl::StatusOr<int64_t> Append(const AuditEntry& entry) = 0;
  // Entries matching `filter`, oldest first. InvalidArgument for limit <= 0 or after_seq < 0.
  virtual absl::StatusOr<AuditPage> List(const AuditFilter& filter) = 0;
  // Retention: deletes at most `max_rows` of the entries with time_ms < older_than_ms, oldest
  // first, in one transaction; returns how many were deleted (fewer than `max_rows`: none of that
  // age is left). InvalidArgument for max_rows <= 0.
  virtual absl::StatusOr<int64_t> Prune(int64_t older_than_ms, int64_t max_rows) = 0;
};

// --- Topology ---

struct TopologyRecord {
  Topology topology;
  int64_t version = 0;  // 1 for the first Put, +1 per Put
  int64_t updated_ms = 0;

  bool operator==(const TopologyRecord&) const = default;
};

class TopologyStore {
 public:
  virtual ~TopologyStore() = default;

  // The current topology; nullopt if none was ever stored.
  virtual absl::StatusOr<std::optional<TopologyRecord>> Get() = 0;
  // Replaces the topology (the caller validated it) and returns the new version. With
  // `expected_version`, FailedPrecondition unless it equals the current version (0 = none yet):
  // optimistic concurrency for read-modify-write such as setting one link down.
  virtual absl::StatusOr<int64_t> Put(const Topology& topology, int64_t now_ms,
                                      std::optional<int64_t> expected_version = std::nullopt,
                                      const std::vector<Event>& events = {}) = 0;
};

// --- Jobs ---

// Client-supplied idempotency for job submission. `body_hash` identifies the request body (any
// stable digest of the canonical body); the store compares it byte for byte.
struct IdempotencyKey {
  std::string key{};
  std::string body_hash{};
};

struct CreateJobResult {
  Job job;
  bool created = false;  // false: the key was seen before with the same body; `job` is that job
};

// A partial update of a job; unset fields are left alone.
struct JobUpdate {
  std::optional<JobState> state{};  // checked with core::CheckTransition against the stored state
  std::optional<std::string> failure_reason{};
  std::optional<int64_t> iterations_done{};
  std::optional<double> loss{};
};

struct JobFilter {
  std::vector<JobState> states{};       // any of these; empty = any state
  std::optional<std::string> tenant{};  // exact match
  JobId after_id = 0;                   // cursor: only ids > after_id
  int64_t limit = 100;                  // > 0
};

struct JobPage {
  std::vector<Job> jobs{};               // increasing id order
  std::optional<JobId> next_after_id{};  // set when more match: the next page's after_id
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Creates a job in state pending with created_ms = updated_ms = now_ms and a fresh id (ids
  // increase, never reused). With `idempotency`: if the key is new it is bound to the new job; if
  // it was bound before with the same body_hash, returns that job with created = false and writes
  // nothing (events are not appended); with a different body_hash, AlreadyExists ("conflict").
  // `events` whose job_id is unset get the new job's id. The caller validated `spec`.
  virtual absl::StatusOr<CreateJobResult> Create(
      const JobSpec& spec, int64_t now_ms,
      const std::optional<IdempotencyKey>& idempotency = std::nullopt,
      const std::vector<Event>& events = {}) = 0;

  // NotFound for an unknown id.
  virtual absl::StatusOr<Job> Get(JobId id) = 0;

  // Applies `update` (updated_ms = now_ms) and returns the job as stored. A state change is checked
  // with core::CheckTransition (FailedPrecondition, nothing written); setting the current state
  // again is a no-op for the state. NotFound for an unknown id.
  virtual absl::StatusOr<Job> Update(JobId id, const JobUpdate& update, int64_t now_ms,
                                     const std::vector<Event>& events = {}) = 0;

  // Applies several updates in one transaction: all or nothing (the first failing update's
  // status is returned and nothing is written). Updates apply in order; an id may repeat.
  virtual absl::Status UpdateMany(const std::vector<std::pair<JobId, JobUpdate>>& updates,
                                  int64_t now_ms, const std::vector<Event>& events = {}) = 0;

  // Jobs matching `filter`, by increasing id. InvalidArgument for limit <= 0.
  virtual absl::StatusOr<JobPage> List(const JobFilter& filter) = 0;

  // Number of jobs in each state (states with no job are absent).
  virtual absl::StatusOr<std::map<JobState, int64_t>> CountByState() = 0;

  // Retention: deletes at most `max_rows` of the jobs in a terminal state (completed, cancelled,
  // failed) whose updated_ms < older_than_ms, oldest first, together with their idempotency keys
  // (a replayed key then creates a new job) and their events, in one transaction; returns how many
  // jobs were deleted (fewer than `max_rows`: none of that age is left). Never touches a job that
  // is not terminal, however old. Ids stay never reused. InvalidArgument for max_rows <= 0.
  virtual absl::StatusOr<int64_t> PruneFinished(int64_t older_than_ms, int64_t max_rows) = 0;
};

// --- Plans and per-switch intents ---

struct PlanRecord {
  Plan plan;  // plan.version is the stored version
  int64_t created_ms = 0;

  bool operator==(const PlanRecord&) const = default;
};

class PlanStore {
 public:
  virtual ~PlanStore() = default;

  // Saves `plan` and the complete set of per-switch `intents` derived from it in one transaction
  // and returns the plan's version: plan.version if it is > 0, else the latest version + 1. Every
  // intent is stored with that version (its own `version` field is overwritten). FailedPrecondition
  // if the version is not greater than the latest saved one; InvalidArgument if two intents name
  // the same switch or a switch id is empty.
  virtual absl::StatusOr<int64_t> Save(const Plan& plan, const std::vector<SwitchIntent>& intents,
                                       int64_t now_ms, const std::vector<Event>& events = {}) = 0;

  // The newest plan; nullopt if none was saved.
  virtual absl::StatusOr<std::optional<PlanRecord>> Latest() = 0;
  // NotFound for an unknown (or pruned) version.
  virtual absl::StatusOr<PlanRecord> Get(int64_t version) = 0;
  // The intents saved with plan `version`, by switch id. NotFound for an unknown version.
  virtual absl::StatusOr<std::vector<SwitchIntent>> Intents(int64_t version) = 0;
  // Deletes all but the newest `keep_last` (>= 1) plans and their intents; returns how many plans
  // were deleted. InvalidArgument for keep_last < 1.
  virtual absl::StatusOr<int64_t> Prune(int64_t keep_last) = 0;
};

// --- Per-switch southbound state ---

struct SwitchState {
  std::string switch_id{};
  int64_t applied_version = 0;  // plan version whose intent the switch holds (0: none)
  std::string last_error{};     // empty when the last attempt succeeded
  int64_t last_contact_ms = 0;
  uint64_t election_id = 0;  // low 64 bits of the P4Runtime election id last used (high = 0)

  bool operator==(const SwitchState&) const = default;
};

class SwitchStateStore {
 public:
  virtual ~SwitchStateStore() = default;

  // nullopt if the switch has no record.
  virtual absl::StatusOr<std::optional<SwitchState>> Get(const std::string& switch_id) = 0;
  // All records, by switch id.
  virtual absl::StatusOr<std::vector<SwitchState>> List() = 0;
  // Inserts or replaces the record of state.switch_id (InvalidArgument if empty).
  virtual absl::Status Put(const SwitchState& state, const std::vector<Event>& events = {}) = 0;
  // The largest election_id of any record (0 for none): a restarted controller uses a higher one.
  virtual absl::StatusOr<uint64_t> MaxElectionId() = 0;
};

// --- Consistent snapshot for the controller loop ---

struct Snapshot {
  std::optional<TopologyRecord> topology{};
  std::vector<Job> jobs{};                   // every non-terminal job, by increasing id
  std::optional<PlanRecord> plan{};          // the latest plan
  std::vector<SwitchIntent> intents{};       // the latest plan's intents, by switch id
  std::vector<SwitchState> switch_states{};  // by switch id
  int64_t last_event_seq = 0;
};

class SnapshotReader {
 public:
  virtual ~SnapshotReader() = default;
  // Reads everything in ONE read transaction: no write that committed after the read began is
  // partly visible.
  virtual absl::StatusOr<Snapshot> ReadSnapshot() = 0;
};

// Everything the controller persists, behind one object (the composition root owns it).
class Storage : public SnapshotReader {
 public:
  virtual TopologyStore& topology() = 0;
  virtual JobStore& jobs() = 0;
  virtual PlanStore& plans() = 0;
  virtual SwitchStateStore& switch_states() = 0;
  virtual EventLog& events() = 0;
  virtual AuditLog& audit() = 0;

  // Whether the store can durably accept writes now: OK, or Unavailable naming the fault -- the
  // database file was deleted or replaced since it was opened, is read-only, was found corrupt,
  // or cannot be read. Cheap enough for a readiness probe (no scan, never writes); the
  // controller's readiness (GET /readyz) reflects it. Pure virtual so that every store decides.
  virtual absl::Status Health() = 0;
};

}  // namespace inac::core
