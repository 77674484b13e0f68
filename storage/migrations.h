// The schema migrations compiled into the binary (storage/migrations/NNN_name.sql, embedded at
// build time by storage/embed_migrations.cmake). Migration N takes the schema from version N-1 to
// N; SqliteDatabase::Open applies the missing ones in order, one transaction each.
#pragma once

#include <span>
#include <string_view>

namespace inac::storage {

struct Migration {
  int version;            // 1, 2, 3, ... (the file's numeric prefix)
  std::string_view name;  // file name without extension, e.g. "001_init"
  std::string_view sql;   // the file's text
};

// All migrations, by increasing version (versions are 1..N without gaps: checked at build time).
std::span<const Migration> Migrations();

// The schema version this binary writes: Migrations().back().version.
int LatestSchemaVersion();

}  // namespace inac::storage
