// core/stores.h on SQLite. Schema: storage/migrations/*.sql; guarantees and fault
// behaviour: docs/storage.md.
//
// Durability: a write that returned OK is in the WAL and fsynced (synchronous=FULL) -- it survives
// a process kill and a power cut. Each write method is one BEGIN IMMEDIATE transaction on the
// single writer connection; reads (and ReadSnapshot) are one read transaction each on a reader
// connection, so they never block writes and never see half a write.
//
// Thread safety: every class here is safe to use from any thread (see SqliteDatabase).
#pragma once

#include <memory>
#include <string>

#include "core/stores.h"
#include "storage/sqlite_audit_log.h"
#include "storage/sqlite_database.h"
#include "storage/sqlite_rows.h"

namespace inac::storage {

// Decoded values that cannot go stale -- the topology of a given version, the specs of active jobs
// (immutable after Create) -- so that the controller loop's repeated snapshots skip JSON decoding.
// Thread-safe; values are shared, immutable.
class DecodedCache {
 public:
  // The topology record of `version`, or null.
  std::shared_ptr<const core::TopologyRecord> FindTopology(int64_t version) const;
  void PutTopology(std::shared_ptr<const core::TopologyRecord> record);
  // The specs decoded by the last snapshot (never null).
  std::shared_ptr<const rows::SpecMap> specs() const;
  // Replaces them (bounding the cache to the jobs active in the last snapshot).
  void SetSpecs(std::shared_ptr<const rows::SpecMap> specs);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const core::TopologyRecord> topology_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const rows::SpecMap> specs_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const rows::SpecMap>();
};

class SqliteTopologyStore final : public core::TopologyStore {
 public:
  // Neither is owned.
  SqliteTopologyStore(SqliteDatabase* db, DecodedCache* cache) : db_(db), cache_(cache) {}
  absl::StatusOr<std::optional<core::TopologyRecord>> Get() override;
  absl::StatusOr<int64_t> Put(const core::Topology& topology, int64_t now_ms,
                              std::optional<int64_t> expected_version,
                              const std::vector<core::Event>& events) override;

 private:
  SqliteDatabase* db_;
  DecodedCache* cache_;
};

class SqliteJobStore final : public core::JobStore {
 public:
  explicit SqliteJobStore(SqliteDatabase* db) : db_(db) {}  // Not owned.
  absl::StatusOr<core::CreateJobResult> Create(
      const core::JobSpec& spec, int64_t now_ms,
      const std::optional<core::IdempotencyKey>& idempotency,
      const std::vector<core::Event>& events) override;
  absl::StatusOr<core::Job> Get(core::JobId id) override;
  absl::StatusOr<core::Job> Update(core::JobId id, const core::JobUpdate& update, int64_t now_ms,
                                   const std::vector<core::Event>& events) override;
  absl::Status UpdateMany(const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates,
                          int64_t now_ms, const std::vector<core::Event>& events) override;
  absl::StatusOr<core::JobPage> List(const core::JobFilter& filter) override;
  absl::StatusOr<std::map<core::JobState, int64_t>> CountByState() override;
  absl::StatusOr<int64_t> PruneFinished(int64_t older_than_ms, int64_t max_rows) override;

 private:
  SqliteDatabase* db_;
};

// The newest plan and its intents, decoded. Plans are immutable once saved, so an entry keyed by
// version never goes stale; it spares the controller loop decoding the plan on every snapshot
// (seconds for a 10,000-job plan). Filled by PlanStore::Save and by the first read of a version.
class PlanCache {
 public:
  struct Entry {
    core::PlanRecord record;
    std::vector<core::SwitchIntent> intents;  // by switch id, version set
  };
  // The entry for `version`, or null.
  std::shared_ptr<const Entry> Find(int64_t version) const;
  // Keeps `entry` unless the cache already holds a newer version.
  void Put(std::shared_ptr<const Entry> entry);

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Entry> entry_ ABSL_GUARDED_BY(mu_);
};

class SqlitePlanStore final : public core::PlanStore {
 public:
  // Neither is owned.
  SqlitePlanStore(SqliteDatabase* db, PlanCache* cache) : db_(db), cache_(cache) {}
  absl::StatusOr<int64_t> Save(const core::Plan& plan,
                               const std::vector<core::SwitchIntent>& intents, int64_t now_ms,
                               const std::vector<core::Event>& events) override;
  absl::StatusOr<std::optional<core::PlanRecord>> Latest() override;
  absl::StatusOr<core::PlanRecord> Get(int64_t version) override;
  absl::StatusOr<std::vector<core::SwitchIntent>> Intents(int64_t version) override;
  absl::StatusOr<int64_t> Prune(int64_t keep_last) override;

 private:
  SqliteDatabase* db_;
  PlanCache* cache_;
};

class SqliteSwitchStateStore final : public core::SwitchStateStore {
 public:
  explicit SqliteSwitchStateStore(SqliteDatabase* db) : db_(db) {}  // Not owned.
  absl::StatusOr<std::optional<core::SwitchState>> Get(const std::string& switch_id) override;
  absl::StatusOr<std::vector<core::SwitchState>> List() override;
  absl::Status Put(const core::SwitchState& state, const std::vector<core::Event>& events) override;
  absl::StatusOr<uint64_t> MaxElectionId() override;

 private:
  SqliteDatabase* db_;
};

class SqliteEventLog final : public core::EventLog {
 public:
  explicit SqliteEventLog(SqliteDatabase* db) : db_(db) {}  // Not owned.
  absl::StatusOr<int64_t> Append(const core::Event& event) override;
  absl::StatusOr<std::vector<core::Event>> List(const core::EventFilter& filter) override;
  absl::StatusOr<int64_t> LastSeq() override;
  absl::StatusOr<int64_t> Trim(int64_t keep_last) override;

 private:
  SqliteDatabase* db_;
};

class SqliteStorage final : public core::Storage {
 public:
  // Opens `path` with SqliteDatabase::Open (lock, schema checks, migrations; errors name the
  // file and leave it untouched).
  static absl::StatusOr<std::unique_ptr<SqliteStorage>> Open(const std::string& path,
                                                             const SqliteOptions& options = {});

  core::TopologyStore& topology() override { return topology_; }
  core::JobStore& jobs() override { return jobs_; }
  core::PlanStore& plans() override { return plans_; }
  core::SwitchStateStore& switch_states() override { return switch_states_; }
  core::EventLog& events() override { return events_; }
  core::AuditLog& audit() override { return audit_; }
  absl::StatusOr<core::Snapshot> ReadSnapshot() override;
  // SqliteDatabase::Health: file identity and writability, corruption seen, one small read.
  absl::Status Health() override { return db_->Health(); }

  SqliteDatabase& database() { return *db_; }

 private:
  explicit SqliteStorage(std::unique_ptr<SqliteDatabase> db);
  std::unique_ptr<SqliteDatabase> db_;
  PlanCache plan_cache_;
  DecodedCache decoded_cache_;
  SqliteTopologyStore topology_;
  SqliteJobStore jobs_;
  SqlitePlanStore plans_;
  SqliteSwitchStateStore switch_states_;
  SqliteEventLog events_;
  SqliteAuditLog audit_;
};

}  // namespace inac::storage
