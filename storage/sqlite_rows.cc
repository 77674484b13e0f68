#include "storage/sqlite_rows.h"

#include <bit>

#include <SQLiteCpp/Statement.h>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/status.h"
#include "storage/job_spec_codec.h"

namespace inac::storage::rows {

namespace {

constexpr char kJobColumns[] =
    "id, state, spec, iterations_done, loss, failure_reason, created_ms, updated_ms";

absl::StatusOr<core::Json> ParseStored(const std::string& text, absl::string_view what) {
  std::vector<core::Problem> problems;
  std::optional<core::Json> json = core::ParseJsonText(text, &problems);
  if (!json) {
    return absl::DataLossError(
        absl::StrCat("stored ", what, " is not JSON: ", core::FormatProblems(problems)));
  }
  return std::move(*json);
}

absl::Status DecodeProblems(const std::vector<core::Problem>& problems, absl::string_view what) {
  if (problems.empty()) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("stored ", what, " does not decode: ", core::FormatProblems(problems)));
}

// Decodes a row of kJobColumns. With `known_spec` the spec column is not decoded.
absl::StatusOr<core::Job> JobFromRow(SQLite::Statement& row,
                                     const core::JobSpec* known_spec = nullptr) {
  core::Job job;
  job.id = row.getColumn(0).getInt64();
  std::string state = row.getColumn(1).getString();
  std::optional<core::JobState> parsed = core::ParseJobState(state);
  if (!parsed) return absl::DataLossError(absl::StrCat("job ", job.id, ": bad state ", state));
  job.state = *parsed;
  if (known_spec != nullptr) {
    job.spec = *known_spec;
  } else {
    absl::StatusOr<core::JobSpec> spec = DecodeStoredJobSpec(row.getColumn(2).getString());
    if (!spec.ok()) {
      return absl::DataLossError(absl::StrCat("job ", job.id, ": ", spec.status().message()));
    }
    job.spec = std::move(*spec);
  }
  job.iterations_done = row.getColumn(3).getInt64();
  if (!row.getColumn(4).isNull()) job.loss = row.getColumn(4).getDouble();
  job.failure_reason = row.getColumn(5).getString();
  job.created_ms = row.getColumn(6).getInt64();
  job.updated_ms = row.getColumn(7).getInt64();
  return job;
}

absl::StatusOr<core::PlanRecord> PlanFromRow(SQLite::Statement& row) {
  int64_t version = row.getColumn(0).getInt64();
  std::string what = absl::StrCat("plan ", version);
  INAC_ASSIGN_OR_RETURN(core::Json doc, ParseStored(row.getColumn(2).getString(), what));
  absl::StatusOr<core::Plan> plan = core::PlanFromJson(doc);
  if (!plan.ok()) {
    return absl::DataLossError(absl::StrCat(what, " does not decode: ", plan.status().message()));
  }
  core::PlanRecord record{std::move(*plan), row.getColumn(1).getInt64()};
  record.plan.version = version;
  return record;
}

}  // namespace

absl::StatusOr<core::Job> ReadJob(SQLite::Database& db, core::JobId id) {
  SQLite::Statement q(db, absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?"));
  q.bind(1, static_cast<int64_t>(id));
  if (!q.executeStep()) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return JobFromRow(q);
}

absl::StatusOr<core::JobPage> ListJobs(SQLite::Database& db, const core::JobFilter& filter) {
  std::string sql = absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id > ?");
  if (!filter.states.empty()) {
    sql += " AND state IN (";
    for (size_t i = 0; i < filter.states.size(); ++i) sql += i == 0 ? "?" : ", ?";
    sql += ")";
  }
  if (filter.tenant) sql += " AND tenant = ?";
  sql += " ORDER BY id LIMIT ?";
  SQLite::Statement q(db, sql);
  int n = 1;
  q.bind(n++, static_cast<int64_t>(filter.after_id));
  for (core::JobState s : filter.states) q.bind(n++, std::string(core::JobStateName(s)));
  if (filter.tenant) q.bind(n++, *filter.tenant);
  q.bind(n++, static_cast<int64_t>(filter.limit + 1));  // one more tells whether a next page exists
  core::JobPage page;
  while (q.executeStep()) {
    if (static_cast<int64_t>(page.jobs.size()) == filter.limit) {
      page.next_after_id = page.jobs.back().id;
      break;
    }
    INAC_ASSIGN_OR_RETURN(core::Job job, JobFromRow(q));
    page.jobs.push_back(std::move(job));
  }
  return page;
}

absl::StatusOr<std::vector<core::Job>> ReadActiveJobs(SQLite::Database& db, const SpecMap* known,
                                                      SpecMap* decoded) {
  SQLite::Statement q(db, absl::StrCat("SELECT ", kJobColumns,
                                       " FROM jobs WHERE state IN ('pending', 'scheduled', "
                                       "'running') ORDER BY id"));
  std::vector<core::Job> jobs;
  while (q.executeStep()) {
    std::shared_ptr<const core::JobSpec> spec;
    if (known != nullptr) {
      auto it = known->find(q.getColumn(0).getInt64());
      if (it != known->end()) spec = it->second;
    }
    INAC_ASSIGN_OR_RETURN(core::Job job, JobFromRow(q, spec.get()));
    if (decoded != nullptr) {
      decoded->emplace(job.id, spec ? spec : std::make_shared<const core::JobSpec>(job.spec));
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

core::JobId InsertJob(SQLite::Database& db, const core::JobSpec& spec, int64_t now_ms) {
  SQLite::Statement q(db,
                      "INSERT INTO jobs (state, tenant, name, priority, spec, created_ms, "
                      "updated_ms) VALUES ('pending', ?, ?, ?, ?, ?, ?)");
  q.bind(1, spec.tenant);
  q.bind(2, spec.name);
  q.bind(3, spec.priority);
  q.bind(4, core::JobSpecToJson(spec).dump());
  q.bind(5, static_cast<int64_t>(now_ms));
  q.bind(6, static_cast<int64_t>(now_ms));
  q.exec();
  return db.getLastInsertRowid();
}

void UpdateJobRow(SQLite::Database& db, const core::Job& job) {
  SQLite::Statement q(db,
                      "UPDATE jobs SET state = ?, iterations_done = ?, loss = ?, "
                      "failure_reason = ?, updated_ms = ? WHERE id = ?");
  q.bind(1, std::string(core::JobStateName(job.state)));
  q.bind(2, static_cast<int64_t>(job.iterations_done));
  if (job.loss) {
    q.bind(3, *job.loss);
  } else {
    q.bind(3);
  }
  q.bind(4, job.failure_reason);
  q.bind(5, static_cast<int64_t>(job.updated_ms));
  q.bind(6, static_cast<int64_t>(job.id));
  q.exec();
}

int64_t AppendEvents(SQLite::Database& db, const std::vector<core::Event>& events,
                     std::optional<core::JobId> default_job_id) {
  if (events.empty()) return 0;
  SQLite::Statement q(
      db, "INSERT INTO events (time_ms, kind, job_id, message, data) VALUES (?, ?, ?, ?, ?)");
  for (const core::Event& e : events) {
    q.reset();
    q.bind(1, static_cast<int64_t>(e.time_ms));
    q.bind(2, e.kind);
    std::optional<core::JobId> job = e.job_id ? e.job_id : default_job_id;
    if (job) {
      q.bind(3, static_cast<int64_t>(*job));
    } else {
      q.bind(3);
    }
    q.bind(4, e.message);
    q.bind(5, e.data_json);
    q.exec();
  }
  return db.getLastInsertRowid();
}

int64_t LastEventSeq(SQLite::Database& db) {
  // sqlite_sequence remembers the largest seq ever used, even after trimming.
  SQLite::Statement q(db, "SELECT seq FROM sqlite_sequence WHERE name = 'events'");
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

int64_t TopologyVersion(SQLite::Database& db) {
  SQLite::Statement q(db, "SELECT version FROM topology WHERE id = 1");
  return q.executeStep() ? q.getColumn(0).getInt64() : 0;
}

absl::StatusOr<std::optional<core::TopologyRecord>> ReadTopology(SQLite::Database& db) {
  SQLite::Statement q(db, "SELECT version, updated_ms, doc FROM topology WHERE id = 1");
  if (!q.executeStep()) return std::optional<core::TopologyRecord>();
  INAC_ASSIGN_OR_RETURN(core::Json doc, ParseStored(q.getColumn(2).getString(), "topology"));
  std::vector<core::Problem> problems;
  core::TopologyRecord record;
  record.topology = core::TopologyFromJson(doc, &problems);
  INAC_RETURN_IF_ERROR(DecodeProblems(problems, "topology"));
  record.version = q.getColumn(0).getInt64();
  record.updated_ms = q.getColumn(1).getInt64();
  return std::optional<core::TopologyRecord>(std::move(record));
}

absl::StatusOr<core::PlanRecord> ReadPlan(SQLite::Database& db, int64_t version) {
  SQLite::Statement q(db, "SELECT version, created_ms, doc FROM plans WHERE version = ?");
  q.bind(1, static_cast<int64_t>(version));
  if (!q.executeStep()) return absl::NotFoundError(absl::StrCat("plan ", version, " not found"));
  return PlanFromRow(q);
}

absl::StatusOr<std::vector<core::SwitchIntent>> ReadIntents(SQLite::Database& db, int64_t version) {
  SQLite::Statement q(
      db, "SELECT switch_id, doc FROM switch_intents WHERE plan_version = ? ORDER BY switch_id");
  q.bind(1, static_cast<int64_t>(version));
  std::vector<core::SwitchIntent> intents;
  while (q.executeStep()) {
    std::string what =
        absl::StrCat("intent of switch ", q.getColumn(0).getString(), " in plan ", version);
    INAC_ASSIGN_OR_RETURN(core::Json doc, ParseStored(q.getColumn(1).getString(), what));
    absl::StatusOr<core::SwitchIntent> intent = core::SwitchIntentFromJson(doc);
    if (!intent.ok()) {
      return absl::DataLossError(
          absl::StrCat(what, " does not decode: ", intent.status().message()));
    }
    intent->version = version;
    intents.push_back(std::move(*intent));
  }
  return intents;
}

std::vector<core::SwitchState> ReadSwitchStates(SQLite::Database& db,
                                                const std::string* only_switch) {
  std::string sql =
      "SELECT switch_id, applied_version, last_error, last_contact_ms, election_id "
      "FROM switch_states";
  if (only_switch) sql += " WHERE switch_id = ?";
  sql += " ORDER BY switch_id";
  SQLite::Statement q(db, sql);
  if (only_switch) q.bind(1, *only_switch);
  std::vector<core::SwitchState> states;
  while (q.executeStep()) {
    core::SwitchState s;
    s.switch_id = q.getColumn(0).getString();
    s.applied_version = q.getColumn(1).getInt64();
    s.last_error = q.getColumn(2).getString();
    s.last_contact_ms = q.getColumn(3).getInt64();
    s.election_id = std::bit_cast<uint64_t>(q.getColumn(4).getInt64());
    states.push_back(std::move(s));
  }
  return states;
}

}  // namespace inac::storage::rows
