-- INAC schema, version 2: the audit log of API writes, and the indexes that retention of finished
-- jobs needs (docs/storage.md "Retention"). Applied in one transaction by
-- storage/sqlite_database.cc. Never edit a released migration: add 003_*.sql instead.

-- One row per write request (POST, PUT, PATCH, DELETE) that passed authentication, with the
-- status it was answered with. Never a token or a request body. AUTOINCREMENT keeps sequence
-- numbers unique even after retention deleted the oldest rows.
CREATE TABLE audit (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms     INTEGER NOT NULL,
  actor       TEXT    NOT NULL,  -- the token's name; "anonymous" when no tokens are configured
  role        TEXT    NOT NULL,  -- admin|operator|viewer|worker; "none" without tokens
  remote_addr TEXT    NOT NULL,
  method      TEXT    NOT NULL,
  path        TEXT    NOT NULL,  -- without the query string
  status      INTEGER NOT NULL CHECK (status BETWEEN 100 AND 599),
  job_id      INTEGER            -- the job the request named or created; context only, no FK
);
CREATE INDEX audit_by_actor ON audit (actor, seq);
CREATE INDEX audit_by_time ON audit (time_ms);

-- Retention deletes a finished job's idempotency keys with it: without this index every deleted
-- job would scan the whole key table (the key is the primary key), once for the DELETE and once
-- for the foreign-key check.
CREATE INDEX idempotency_keys_by_job ON idempotency_keys (job_id);

-- Finished jobs by age, for retention (a partial index: active jobs are not in it).
CREATE INDEX jobs_finished_by_time ON jobs (updated_ms, id)
  WHERE state IN ('completed', 'cancelled', 'failed');
