#include "storage/sqlite_audit_log.h"

#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>

#include "core/status.h"
#include "storage/store_rules.h"

namespace inac::storage {

absl::StatusOr<int64_t> SqliteAuditLog::Append(const core::AuditEntry& entry) {
  INAC_RETURN_IF_ERROR(ValidateAuditEntry(entry));
  int64_t seq = 0;
  // Not fsynced: the audit entry follows a write that was (see WriteUnsynced).
  INAC_RETURN_IF_ERROR(
      db_->WriteUnsynced("append audit entry", [&](SQLite::Database& db) -> absl::Status {
        SQLite::Statement q(db,
                            "INSERT INTO audit (time_ms, actor, role, remote_addr, method, path, "
                            "status, job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
        q.bind(1, static_cast<int64_t>(entry.time_ms));
        q.bind(2, entry.actor);
        q.bind(3, entry.role);
        q.bind(4, entry.remote_addr);
        q.bind(5, entry.method);
        q.bind(6, entry.path);
        q.bind(7, entry.status);
        if (entry.job_id) {
          q.bind(8, static_cast<int64_t>(*entry.job_id));
        } else {
          q.bind(8);
        }
        q.exec();
        seq = db.getLastInsertRowid();
        return absl::OkStatus();
      }));
  return seq;
}

core::AuditPage ListAuditRows(SQLite::Database& db, const core::AuditFilter& filter) {
  core::AuditPage page;
  std::string sql =
      "SELECT seq, time_ms, actor, role, remote_addr, method, path, status, job_id FROM audit "
      "WHERE seq > ?";
  if (filter.actor) sql += " AND actor = ?";
  sql += " ORDER BY seq LIMIT ?";
  SQLite::Statement q(db, sql);
  int n = 1;
  q.bind(n++, static_cast<int64_t>(filter.after_seq));
  if (filter.actor) q.bind(n++, *filter.actor);
  // One more than asked: whether another page follows.
  q.bind(n++, static_cast<int64_t>(filter.limit) + 1);
  while (q.executeStep()) {
    if (static_cast<int64_t>(page.entries.size()) == filter.limit) {
      page.next_after_seq = page.entries.back().seq;
      break;
    }
    core::AuditEntry e;
    e.seq = q.getColumn(0).getInt64();
    e.time_ms = q.getColumn(1).getInt64();
    e.actor = q.getColumn(2).getString();
    e.role = q.getColumn(3).getString();
    e.remote_addr = q.getColumn(4).getString();
    e.method = q.getColumn(5).getString();
    e.path = q.getColumn(6).getString();
    e.status = q.getColumn(7).getInt();
    if (!q.getColumn(8).isNull()) e.job_id = q.getColumn(8).getInt64();
    page.entries.push_back(std::move(e));
  }
  return page;
}

absl::StatusOr<core::AuditPage> SqliteAuditLog::List(const core::AuditFilter& filter) {
  INAC_RETURN_IF_ERROR(ValidateAuditFilter(filter));
  core::AuditPage page;
  INAC_RETURN_IF_ERROR(db_->Read("list audit entries", [&](SQLite::Database& db) -> absl::Status {
    page = ListAuditRows(db, filter);
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<int64_t> SqliteAuditLog::Prune(int64_t older_than_ms, int64_t max_rows) {
  INAC_RETURN_IF_ERROR(ValidatePruneBatch(max_rows));
  int64_t deleted = 0;
  INAC_RETURN_IF_ERROR(db_->Write("prune audit log", [&](SQLite::Database& db) -> absl::Status {
    SQLite::Statement q(db,
                        "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE time_ms < ? "
                        "ORDER BY time_ms, seq LIMIT ?)");
    q.bind(1, static_cast<int64_t>(older_than_ms));
    q.bind(2, static_cast<int64_t>(max_rows));
    deleted = q.exec();
    return absl::OkStatus();
  }));
  return deleted;
}

}  // namespace inac::storage
