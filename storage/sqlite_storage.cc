#include "storage/sqlite_storage.h"

#include <algorithm>
#include <bit>
#include <memory>

#include <SQLiteCpp/Statement.h>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/status.h"
#include "storage/sqlite_rows.h"
#include "storage/store_rules.h"

namespace inac::storage {

// --- Decoded values ---

std::shared_ptr<const core::TopologyRecord> DecodedCache::FindTopology(int64_t version) const {
  absl::MutexLock l(&mu_);
  if (topology_ && topology_->version == version) return topology_;
  return nullptr;
}

void DecodedCache::PutTopology(std::shared_ptr<const core::TopologyRecord> record) {
  absl::MutexLock l(&mu_);
  if (!topology_ || topology_->version <= record->version) topology_ = std::move(record);
}

std::shared_ptr<const rows::SpecMap> DecodedCache::specs() const {
  absl::MutexLock l(&mu_);
  return specs_;
}

void DecodedCache::SetSpecs(std::shared_ptr<const rows::SpecMap> specs) {
  absl::MutexLock l(&mu_);
  specs_ = std::move(specs);
}

namespace {

// The stored topology, from the cache when its version is there (inside a read transaction).
absl::StatusOr<std::optional<core::TopologyRecord>> LoadTopology(SQLite::Database& db,
                                                                 DecodedCache& cache) {
  int64_t version = rows::TopologyVersion(db);
  if (version == 0) return std::optional<core::TopologyRecord>();
  if (auto hit = cache.FindTopology(version)) return std::optional<core::TopologyRecord>(*hit);
  INAC_ASSIGN_OR_RETURN(std::optional<core::TopologyRecord> record, rows::ReadTopology(db));
  if (record) cache.PutTopology(std::make_shared<const core::TopologyRecord>(*record));
  return record;
}

}  // namespace

// --- Topology ---

absl::StatusOr<std::optional<core::TopologyRecord>> SqliteTopologyStore::Get() {
  absl::StatusOr<std::optional<core::TopologyRecord>> record = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(db_->Read("get topology", [&](SQLite::Database& db) -> absl::Status {
    record = LoadTopology(db, *cache_);
    return absl::OkStatus();
  }));
  return record;
}

absl::StatusOr<int64_t> SqliteTopologyStore::Put(const core::Topology& topology, int64_t now_ms,
                                                 std::optional<int64_t> expected_version,
                                                 const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  std::string doc = core::TopologyToJson(topology).dump();
  int64_t version = 0;
  INAC_RETURN_IF_ERROR(db_->Write("put topology", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db, "SELECT version FROM topology WHERE id = 1");
    int64_t current = q.executeStep() ? q.getColumn(0).getInt64() : 0;
    if (expected_version && *expected_version != current) {
      return absl::FailedPreconditionError(
          absl::StrCat("topology version is ", current, ", not the expected ", *expected_version));
    }
    version = current + 1;
    SQLite::Statement put(db,
                          "INSERT INTO topology (id, version, updated_ms, doc) VALUES (1, ?, ?, ?) "
                          "ON CONFLICT (id) DO UPDATE SET version = excluded.version, "
                          "updated_ms = excluded.updated_ms, doc = excluded.doc");
    put.bind(1, static_cast<int64_t>(version));
    put.bind(2, static_cast<int64_t>(now_ms));
    put.bind(3, doc);
    put.exec();
    rows::AppendEvents(db, events);
    return absl::OkStatus();
  }));
  cache_->PutTopology(std::make_shared<const core::TopologyRecord>(
      core::TopologyRecord{topology, version, now_ms}));
  return version;
}

// --- Plans ---

std::shared_ptr<const PlanCache::Entry> PlanCache::Find(int64_t version) const {
  absl::MutexLock l(&mu_);
  if (entry_ && entry_->record.plan.version == version) return entry_;
  return nullptr;
}

void PlanCache::Put(std::shared_ptr<const Entry> entry) {
  absl::MutexLock l(&mu_);
  if (!entry_ || entry_->record.plan.version <= entry->record.plan.version) {
    entry_ = std::move(entry);
  }
}

namespace {

// The version of the newest plan (0 if none).
int64_t LatestPlanVersion(SQLite::Database& db) {
  SQLite::Statement q(db, "SELECT coalesce(max(version), 0) FROM plans");
  q.executeStep();
  return q.getColumn(0).getInt64();
}

// The plan `version` (known to exist) and its intents: from the cache, or decoded and cached.
absl::StatusOr<std::shared_ptr<const PlanCache::Entry>> LoadPlan(SQLite::Database& db,
                                                                 PlanCache& cache,
                                                                 int64_t version) {
  if (auto hit = cache.Find(version)) return hit;
  auto entry = std::make_shared<PlanCache::Entry>();
  INAC_ASSIGN_OR_RETURN(entry->record, rows::ReadPlan(db, version));
  INAC_ASSIGN_OR_RETURN(entry->intents, rows::ReadIntents(db, version));
  cache.Put(entry);
  return entry;
}

}  // namespace

absl::StatusOr<int64_t> SqlitePlanStore::Save(const core::Plan& plan,
                                              const std::vector<core::SwitchIntent>& intents,
                                              int64_t now_ms,
                                              const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateIntents(intents));
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  if (plan.version < 0) return absl::InvalidArgumentError("plan version must not be negative");
  int64_t version = 0;
  INAC_RETURN_IF_ERROR(db_->Write("save plan", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db, "SELECT coalesce(max(version), 0) FROM plans");
    q.executeStep();
    int64_t latest = q.getColumn(0).getInt64();
    version = plan.version > 0 ? plan.version : latest + 1;
    if (version <= latest) {
      return absl::FailedPreconditionError(absl::StrCat(
          "plan version ", version, " is not newer than the latest saved plan ", latest));
    }
    core::Plan stored = plan;
    stored.version = version;
    SQLite::Statement put(
        db, "INSERT INTO plans (version, algorithm, created_ms, doc) VALUES (?, ?, ?, ?)");
    put.bind(1, static_cast<int64_t>(version));
    put.bind(2, plan.algorithm);
    put.bind(3, static_cast<int64_t>(now_ms));
    put.bind(4, core::PlanToJson(stored).dump());
    put.exec();
    SQLite::Statement intent_q(
        db, "INSERT INTO switch_intents (plan_version, switch_id, doc) VALUES (?, ?, ?)");
    for (const core::SwitchIntent& intent : intents) {
      core::SwitchIntent copy = intent;
      copy.version = version;
      intent_q.reset();
      intent_q.bind(1, static_cast<int64_t>(version));
      intent_q.bind(2, intent.switch_id);
      intent_q.bind(3, core::SwitchIntentToJson(copy).dump());
      intent_q.exec();
    }
    rows::AppendEvents(db, events);
    return absl::OkStatus();
  }));
  auto entry = std::make_shared<PlanCache::Entry>();
  entry->record = core::PlanRecord{plan, now_ms};
  entry->record.plan.version = version;
  entry->intents = intents;
  for (core::SwitchIntent& intent : entry->intents) intent.version = version;
  std::sort(entry->intents.begin(), entry->intents.end(),
            [](const auto& a, const auto& b) { return a.switch_id < b.switch_id; });
  cache_->Put(std::move(entry));
  return version;
}

absl::StatusOr<std::optional<core::PlanRecord>> SqlitePlanStore::Latest() {
  std::optional<core::PlanRecord> record;
  INAC_RETURN_IF_ERROR(db_->Read("get latest plan", [&](SQLite::Database& db) -> absl::Status {
    int64_t version = LatestPlanVersion(db);
    if (version == 0) return absl::OkStatus();
    INAC_ASSIGN_OR_RETURN(auto entry, LoadPlan(db, *cache_, version));
    record = entry->record;
    return absl::OkStatus();
  }));
  return record;
}

absl::StatusOr<core::PlanRecord> SqlitePlanStore::Get(int64_t version) {
  absl::StatusOr<core::PlanRecord> record = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(db_->Read("get plan", [&](SQLite::Database& db) -> absl::Status {
    if (auto hit = cache_->Find(version)) {
      // Cached versions exist unless pruned; Prune never removes the newest plan, but check.
      SQLite::Statement q(db, "SELECT 1 FROM plans WHERE version = ?");
      q.bind(1, static_cast<int64_t>(version));
      if (q.executeStep()) {
        record = hit->record;
        return absl::OkStatus();
      }
    }
    record = rows::ReadPlan(db, version);
    return absl::OkStatus();
  }));
  return record;
}

absl::StatusOr<std::vector<core::SwitchIntent>> SqlitePlanStore::Intents(int64_t version) {
  absl::StatusOr<std::vector<core::SwitchIntent>> intents = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(db_->Read("get intents", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db, "SELECT 1 FROM plans WHERE version = ?");
    q.bind(1, static_cast<int64_t>(version));
    if (!q.executeStep()) {
      intents = absl::NotFoundError(absl::StrCat("plan ", version, " not found"));
    } else if (auto hit = cache_->Find(version)) {
      intents = hit->intents;
    } else {
      intents = rows::ReadIntents(db, version);
    }
    return absl::OkStatus();
  }));
  return intents;
}

absl::StatusOr<int64_t> SqlitePlanStore::Prune(int64_t keep_last) {
  if (keep_last < 1) return absl::InvalidArgumentError("must keep at least the latest plan");
  int64_t deleted = 0;
  INAC_RETURN_IF_ERROR(db_->Write("prune plans", [&](SQLite::Database& db) -> absl::Status {
    // switch_intents rows go with their plan (ON DELETE CASCADE).
    SQLite::Statement q(db,
                        "DELETE FROM plans WHERE version NOT IN "
                        "(SELECT version FROM plans ORDER BY version DESC LIMIT ?)");
    q.bind(1, static_cast<int64_t>(keep_last));
    deleted = q.exec();
    return absl::OkStatus();
  }));
  return deleted;
}

// --- Switch states ---

absl::StatusOr<std::optional<core::SwitchState>> SqliteSwitchStateStore::Get(
    const std::string& switch_id) {
  std::optional<core::SwitchState> state;
  INAC_RETURN_IF_ERROR(db_->Read("get switch state", [&](SQLite::Database& db) -> absl::Status {
    std::vector<core::SwitchState> states = rows::ReadSwitchStates(db, &switch_id);
    if (!states.empty()) state = std::move(states.front());
    return absl::OkStatus();
  }));
  return state;
}

absl::StatusOr<std::vector<core::SwitchState>> SqliteSwitchStateStore::List() {
  std::vector<core::SwitchState> states;
  INAC_RETURN_IF_ERROR(db_->Read("list switch states", [&](SQLite::Database& db) -> absl::Status {
    states = rows::ReadSwitchStates(db);
    return absl::OkStatus();
  }));
  return states;
}

absl::Status SqliteSwitchStateStore::Put(const core::SwitchState& state,
                                         const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateSwitchState(state));
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  return db_->Write("put switch state", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db,
                        "INSERT OR REPLACE INTO switch_states (switch_id, applied_version, "
                        "last_error, last_contact_ms, election_id) VALUES (?, ?, ?, ?, ?)");
    q.bind(1, state.switch_id);
    q.bind(2, static_cast<int64_t>(state.applied_version));
    q.bind(3, state.last_error);
    q.bind(4, static_cast<int64_t>(state.last_contact_ms));
    q.bind(5, std::bit_cast<int64_t>(state.election_id));
    q.exec();
    rows::AppendEvents(db, events);
    return absl::OkStatus();
  });
}

absl::StatusOr<uint64_t> SqliteSwitchStateStore::MaxElectionId() {
  // Stored bit for bit as int64: compare as unsigned here rather than with SQL max().
  uint64_t max = 0;
  INAC_RETURN_IF_ERROR(db_->Read("max election id", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db, "SELECT election_id FROM switch_states");
    while (q.executeStep()) {
      max = std::max(max, std::bit_cast<uint64_t>(q.getColumn(0).getInt64()));
    }
    return absl::OkStatus();
  }));
  return max;
}

// --- Events ---

absl::StatusOr<int64_t> SqliteEventLog::Append(const core::Event& event) {
  INAC_RETURN_IF_ERROR(ValidateEvent(event));
  int64_t seq = 0;
  INAC_RETURN_IF_ERROR(db_->Write("append event", [&](SQLite::Database& db) -> absl::Status {
    seq = rows::AppendEvents(db, {event});
    return absl::OkStatus();
  }));
  return seq;
}

absl::StatusOr<std::vector<core::Event>> SqliteEventLog::List(const core::EventFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateEventFilter(filter));
  std::vector<core::Event> events;
  INAC_RETURN_IF_ERROR(db_->Read("list events", [&](SQLite::Database& db) -> absl::Status {
    std::string sql = "SELECT seq, time_ms, kind, job_id, message, data FROM events WHERE seq > ?";
    if (filter.job_id) sql += " AND job_id = ?";
    if (filter.kind) sql += " AND kind = ?";
    sql += " ORDER BY seq LIMIT ?";
    SQLite::Statement q(db, sql);
    int n = 1;
    q.bind(n++, static_cast<int64_t>(filter.after_seq));
    if (filter.job_id) q.bind(n++, static_cast<int64_t>(*filter.job_id));
    if (filter.kind) q.bind(n++, *filter.kind);
    q.bind(n++, static_cast<int64_t>(filter.limit));
    while (q.executeStep()) {
      core::Event e;
      e.seq = q.getColumn(0).getInt64();
      e.time_ms = q.getColumn(1).getInt64();
      e.kind = q.getColumn(2).getString();
      if (!q.getColumn(3).isNull()) e.job_id = q.getColumn(3).getInt64();
      e.message = q.getColumn(4).getString();
      e.data_json = q.getColumn(5).getString();
      events.push_back(std::move(e));
    }
    return absl::OkStatus();
  }));
  return events;
}

absl::StatusOr<int64_t> SqliteEventLog::LastSeq() {
  int64_t seq = 0;
  INAC_RETURN_IF_ERROR(db_->Read("last event seq", [&](SQLite::Database& db) -> absl::Status {
    seq = rows::LastEventSeq(db);
    return absl::OkStatus();
  }));
  return seq;
}

absl::StatusOr<int64_t> SqliteEventLog::Trim(int64_t keep_last) {
  if (keep_last < 0) return absl::InvalidArgumentError("keep_last must not be negative");
  int64_t deleted = 0;
  INAC_RETURN_IF_ERROR(db_->Write("trim events", [&](SQLite::Database& db) -> absl::Status {
    if (keep_last == 0) {
      deleted = db.exec("DELETE FROM events");
      return absl::OkStatus();
    }
    // Everything older than the keep_last-th newest event (nothing if there are fewer).
    SQLite::Statement q(db,
                        "DELETE FROM events WHERE seq < "
                        "(SELECT seq FROM events ORDER BY seq DESC LIMIT 1 OFFSET ?)");
    q.bind(1, static_cast<int64_t>(keep_last - 1));
    deleted = q.exec();
    return absl::OkStatus();
  }));
  return deleted;
}

// --- Storage ---

SqliteStorage::SqliteStorage(std::unique_ptr<SqliteDatabase> db)
    : db_(std::move(db)),
      topology_(db_.get(), &decoded_cache_),
      jobs_(db_.get()),
      plans_(db_.get(), &plan_cache_),
      switch_states_(db_.get()),
      events_(db_.get()),
      audit_(db_.get()) {}

absl::StatusOr<std::unique_ptr<SqliteStorage>> SqliteStorage::Open(const std::string& path,
                                                                   const SqliteOptions& options) {
  INAC_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> db, SqliteDatabase::Open(path, options));
  return std::unique_ptr<SqliteStorage>(new SqliteStorage(std::move(db)));
}

absl::StatusOr<core::Snapshot> SqliteStorage::ReadSnapshot() {
  core::Snapshot snapshot;
  INAC_RETURN_IF_ERROR(db_->Read("read snapshot", [&](SQLite::Database& db) -> absl::Status {
    INAC_ASSIGN_OR_RETURN(snapshot.topology, LoadTopology(db, decoded_cache_));
    std::shared_ptr<const rows::SpecMap> known = decoded_cache_.specs();
    auto decoded = std::make_shared<rows::SpecMap>();
    INAC_ASSIGN_OR_RETURN(snapshot.jobs, rows::ReadActiveJobs(db, known.get(), decoded.get()));
    decoded_cache_.SetSpecs(std::move(decoded));
    if (int64_t version = LatestPlanVersion(db); version > 0) {
      INAC_ASSIGN_OR_RETURN(auto entry, LoadPlan(db, plan_cache_, version));
      snapshot.plan = entry->record;
      snapshot.intents = entry->intents;
    }
    snapshot.switch_states = rows::ReadSwitchStates(db);
    snapshot.last_event_seq = rows::LastEventSeq(db);
    return absl::OkStatus();
  }));
  return snapshot;
}

}  // namespace inac::storage
