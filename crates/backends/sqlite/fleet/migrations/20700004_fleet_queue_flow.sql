-- The queue features of ADR 0280 on SQLite (ADR 0290): pause and rate-limit state per queue,
-- progress on a delivery, stored schedules, and an index to find a dead letter by its bytes.
-- Tables and columns the seed never reads; a seed consumer ignores pause and rate limits.

-- One row per queue that has been paused or limited. `tokens` is the bucket as of
-- `refilled_at` (unix seconds, SQLite's clock); the current count is refilled continuously at
-- `rate_max` per `rate_per_ms`, capped at `rate_max`. No limit: all three rate columns NULL.
CREATE TABLE IF NOT EXISTS switchyard_queue_flow (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    rate_max INTEGER,
    rate_per_ms INTEGER,
    tokens REAL,
    refilled_at REAL
);

-- Every reservation of ours (`src_id` set) takes one token of a limited queue, in the statement
-- that reserves: the reserve's own condition (or LIMIT) saw at least that many whole tokens at
-- the same instant ('now' is fixed for the whole statement), so the bucket never goes below 0.
CREATE TRIGGER IF NOT EXISTS switchyard_reserve_token AFTER INSERT ON queue_processing
WHEN new.src_id IS NOT NULL
BEGIN
    UPDATE switchyard_queue_flow
    SET tokens = MIN(rate_max, tokens + MAX(0.0,
            ((julianday('now') - 2440587.5) * 86400.0) - refilled_at) * rate_max * 1000.0 / rate_per_ms) - 1,
        refilled_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE name = new.name AND rate_max IS NOT NULL;
END;

-- The last progress document of a delivery; it goes with the row when the delivery ends.
ALTER TABLE queue_processing ADD COLUMN progress BLOB;

-- Recurring schedules: one document per name, read by the typed layer's scheduler.
CREATE TABLE IF NOT EXISTS switchyard_schedules (
    name TEXT PRIMARY KEY,
    doc BLOB NOT NULL
);

-- `dlq_requeue_chosen` names dead letters by their bytes: the oldest with given bytes is an
-- index lookup, not a scan of the queue's dead letters per chosen body.
CREATE INDEX IF NOT EXISTS switchyard_queue_dead_name_body ON queue_dead (name, body, id);
