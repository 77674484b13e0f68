#include <SQLiteCpp/Statement.h>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "storage/sqlite_rows.h"
#include "storage/sqlite_storage.h"
#include "storage/store_rules.h"

namespace inac::storage {

absl::StatusOr<core::CreateJobResult> SqliteJobStore::Create(
    const core::JobSpec& spec, int64_t now_ms,
    const std::optional<core::IdempotencyKey>& idempotency,
    const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  core::CreateJobResult result;
  INAC_RETURN_IF_ERROR(db_->Write("create job", [&](SQLite::Database& db) -> absl::Status {
    if (idempotency) {
      SQLite::Statement q(db, "SELECT job_id, body_hash FROM idempotency_keys WHERE key = ?");
      q.bind(1, idempotency->key);
      if (q.executeStep()) {
        core::JobId existing = q.getColumn(0).getInt64();
        if (q.getColumn(1).getString() != idempotency->body_hash) {
          return absl::AlreadyExistsError(absl::StrCat("conflict: idempotency key \"",
                                                       idempotency->key, "\" was used for job ",
                                                       existing, " with a different request body"));
        }
        INAC_ASSIGN_OR_RETURN(result.job, rows::ReadJob(db, existing));
        result.created = false;
        return absl::OkStatus();
      }
    }
    core::JobId id = rows::InsertJob(db, spec, now_ms);
    if (idempotency) {
      SQLite::Statement q(db,
                          "INSERT INTO idempotency_keys (key, job_id, body_hash, created_ms) "
                          "VALUES (?, ?, ?, ?)");
      q.bind(1, idempotency->key);
      q.bind(2, static_cast<int64_t>(id));
      q.bind(3, idempotency->body_hash);
      q.bind(4, static_cast<int64_t>(now_ms));
      q.exec();
    }
    rows::AppendEvents(db, events, id);
    result.job = core::Job();
    result.job.id = id;
    result.job.spec = spec;
    result.job.created_ms = result.job.updated_ms = now_ms;
    result.created = true;
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<core::Job> SqliteJobStore::Get(core::JobId id) {
  absl::StatusOr<core::Job> job = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(db_->Read("get job", [&](SQLite::Database& db) -> absl::Status {
    job = rows::ReadJob(db, id);
    return absl::OkStatus();
  }));
  return job;
}

absl::StatusOr<core::Job> SqliteJobStore::Update(core::JobId id, const core::JobUpdate& update,
                                                 int64_t now_ms,
                                                 const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  core::Job job;
  INAC_RETURN_IF_ERROR(db_->Write("update job", [&](SQLite::Database& db) -> absl::Status {
    INAC_ASSIGN_OR_RETURN(job, rows::ReadJob(db, id));
    INAC_RETURN_IF_ERROR(ApplyJobUpdate(update, now_ms, job));
    rows::UpdateJobRow(db, job);
    rows::AppendEvents(db, events, id);
    return absl::OkStatus();
  }));
  return job;
}

absl::Status SqliteJobStore::UpdateMany(
    const std::vector<std::pair<core::JobId, core::JobUpdate>>& updates, int64_t now_ms,
    const std::vector<core::Event>& events) {
  INAC_RETURN_IF_ERROR(ValidateEvents(events));
  return db_->Write("update jobs", [&](SQLite::Database& db) -> absl::Status {
    for (const auto& [id, update] : updates) {
      INAC_ASSIGN_OR_RETURN(core::Job job, rows::ReadJob(db, id));
      INAC_RETURN_IF_ERROR(ApplyJobUpdate(update, now_ms, job));
      rows::UpdateJobRow(db, job);
    }
    rows::AppendEvents(db, events);
    return absl::OkStatus();
  });
}

absl::StatusOr<core::JobPage> SqliteJobStore::List(const core::JobFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateJobFilter(filter));
  absl::StatusOr<core::JobPage> page = absl::InternalError("unset");
  INAC_RETURN_IF_ERROR(db_->Read("list jobs", [&](SQLite::Database& db) -> absl::Status {
    page = rows::ListJobs(db, filter);
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<std::map<core::JobState, int64_t>> SqliteJobStore::CountByState() {
  std::map<core::JobState, int64_t> counts;
  INAC_RETURN_IF_ERROR(db_->Read("count jobs", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db, "SELECT state, count(*) FROM jobs GROUP BY state");
    while (q.executeStep()) {
      std::optional<core::JobState> state = core::ParseJobState(q.getColumn(0).getString());
      if (!state) return absl::DataLossError("job with an unknown state");
      counts[*state] = q.getColumn(1).getInt64();
    }
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<int64_t> SqliteJobStore::PruneFinished(int64_t older_than_ms, int64_t max_rows) {
  INAC_RETURN_IF_ERROR(ValidatePruneBatch(max_rows));
  int64_t deleted = 0;
  INAC_RETURN_IF_ERROR(db_->Write("prune finished jobs", [&](SQLite::Database& db) -> absl::Status {
    // The partial index jobs_finished_by_time (migration 002) holds exactly the terminal jobs in
    // age order: a batch reads `max_rows` index entries. Named, because without statistics the
    // planner prefers jobs_by_state, which scans and sorts every finished job for each batch.
    SQLite::Statement pick(db,
                           "SELECT id FROM jobs INDEXED BY jobs_finished_by_time WHERE state IN "
                           "('completed', 'cancelled', 'failed') AND updated_ms < ? "
                           "ORDER BY updated_ms, id LIMIT ?");
    pick.bind(1, static_cast<int64_t>(older_than_ms));
    pick.bind(2, static_cast<int64_t>(max_rows));
    std::vector<int64_t> ids;
    while (pick.executeStep()) ids.push_back(pick.getColumn(0).getInt64());
    // Keys first: they reference the job (foreign key, no cascade).
    SQLite::Statement keys(db, "DELETE FROM idempotency_keys WHERE job_id = ?");
    SQLite::Statement events(db, "DELETE FROM events WHERE job_id = ?");
    SQLite::Statement job(db, "DELETE FROM jobs WHERE id = ?");
    for (int64_t id : ids) {
      for (SQLite::Statement* q : {&keys, &events, &job}) {
        q->reset();
        q->bind(1, id);
        q->exec();
      }
    }
    deleted = static_cast<int64_t>(ids.size());
    return absl::OkStatus();
  }));
  return deleted;
}

}  // namespace inac::storage
