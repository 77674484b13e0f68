// core::AuditLog on SQLite: the `audit` table of storage/migrations/002_audit_and_retention.sql.
// Each call is one transaction of SqliteDatabase (Append and Prune on the writer, List on a
// reader), with the durability and fault behaviour of the other repositories (docs/storage.md).
//
// Thread safety: safe to use from any thread (see SqliteDatabase).
#pragma once

#include <cstdint>

#include "core/stores.h"
#include "storage/sqlite_database.h"

namespace inac::storage {

// The query behind SqliteAuditLog::List, inside a read transaction the caller opened (also used
// by the offline `inac db audit`, storage/maintenance.h). May throw SQLite::Exception.
core::AuditPage ListAuditRows(SQLite::Database& db, const core::AuditFilter& filter);

class SqliteAuditLog final : public core::AuditLog {
 public:
  explicit SqliteAuditLog(SqliteDatabase* db) : db_(db) {}  // Not owned.
  absl::StatusOr<int64_t> Append(const core::AuditEntry& entry) override;
  absl::StatusOr<core::AuditPage> List(const core::AuditFilter& filter) override;
  absl::StatusOr<int64_t> Prune(int64_t older_than_ms, int64_t max_rows) override;

 private:
  SqliteDatabase* db_;
};

}  // namespace inac::storage
