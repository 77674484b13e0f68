-- INAC schema, version 1. Applied in one transaction by storage/sqlite_database.cc, which also
-- records the version (PRAGMA user_version and a schema_version row). Never edit a released
-- migration: add 002_*.sql instead. JSON columns hold the core/json.h encoding of the domain type.

-- One row per migration applied.
CREATE TABLE schema_version (
  version    INTEGER PRIMARY KEY,
  name       TEXT    NOT NULL,
  applied_ms INTEGER NOT NULL
);

-- The current topology (at most one row), versioned for optimistic concurrency.
CREATE TABLE topology (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  version    INTEGER NOT NULL CHECK (version > 0),
  updated_ms INTEGER NOT NULL,
  doc        TEXT    NOT NULL  -- core::TopologyToJson
);

CREATE TABLE jobs (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
  state           TEXT    NOT NULL CHECK (state IN
                    ('pending', 'scheduled', 'running', 'completed', 'cancelled', 'failed')),
  tenant          TEXT    NOT NULL,
  name            TEXT    NOT NULL,
  priority        INTEGER NOT NULL,
  spec            TEXT    NOT NULL,  -- core::JobSpecToJson
  iterations_done INTEGER NOT NULL DEFAULT 0,
  loss            REAL,
  failure_reason  TEXT    NOT NULL DEFAULT '',
  created_ms      INTEGER NOT NULL,
  updated_ms      INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_tenant ON jobs (tenant, id);

-- Client idempotency keys of job submissions: key -> the job it created.
CREATE TABLE idempotency_keys (
  key        TEXT    PRIMARY KEY,
  job_id     INTEGER NOT NULL REFERENCES jobs (id),
  body_hash  TEXT    NOT NULL,
  created_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE plans (
  version    INTEGER PRIMARY KEY CHECK (version > 0),
  algorithm  TEXT    NOT NULL,
  created_ms INTEGER NOT NULL,
  doc        TEXT    NOT NULL  -- core::PlanToJson
);

-- The per-switch intents derived from each plan (a complete set per plan version).
CREATE TABLE switch_intents (
  plan_version INTEGER NOT NULL REFERENCES plans (version) ON DELETE CASCADE,
  switch_id    TEXT    NOT NULL,
  doc          TEXT    NOT NULL,  -- core::SwitchIntentToJson
  PRIMARY KEY (plan_version, switch_id)
) WITHOUT ROWID;

-- What the southbound last achieved on each switch.
CREATE TABLE switch_states (
  switch_id       TEXT    PRIMARY KEY,
  applied_version INTEGER NOT NULL,
  last_error      TEXT    NOT NULL,
  last_contact_ms INTEGER NOT NULL,
  election_id     INTEGER NOT NULL  -- uint64 stored bit for bit
) WITHOUT ROWID;

-- Append-only event log; AUTOINCREMENT keeps sequence numbers unique even after trimming.
CREATE TABLE events (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms INTEGER NOT NULL,
  kind    TEXT    NOT NULL,
  job_id  INTEGER,  -- context only, no foreign key
  message TEXT    NOT NULL,
  data    TEXT    NOT NULL  -- JSON text
);
CREATE INDEX events_by_job ON events (job_id, seq) WHERE job_id IS NOT NULL;
CREATE INDEX events_by_kind ON events (kind, seq);
