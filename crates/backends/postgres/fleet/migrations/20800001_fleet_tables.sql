-- The PostgreSQL fleet's tables (ADR 0230), created in the schema the backend is opened with
-- (the connection's search_path). Every name starts with `fleet_`, so the fleet shares a schema
-- with the other switchyard adapters without touching their tables.
--
-- Instants are unix seconds (double precision) read from the server's clock, `fleet_now()`;
-- documents the seed's Python peers read (hardware, config, stats, frames) are text as
-- `json.dumps` writes them; payloads are bytea.

CREATE OR REPLACE FUNCTION fleet_now() RETURNS double precision
LANGUAGE sql STABLE AS $$ SELECT extract(epoch FROM now())::double precision $$;

CREATE TABLE IF NOT EXISTS fleet_kv (
    ns text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL,
    expires_at double precision,
    PRIMARY KEY (ns, key)
);

-- A pool item and its claim are one row: claiming is one UPDATE of the chosen row.
CREATE TABLE IF NOT EXISTS fleet_pool_items (
    name text NOT NULL,
    item_id text NOT NULL,
    payload bytea NOT NULL,
    tags jsonb NOT NULL,
    expires_at double precision,
    claim_until double precision,
    claim_token text,
    PRIMARY KEY (name, item_id)
);

-- A lock row outlives its holders: `fence` rises with every grant and survives release.
CREATE TABLE IF NOT EXISTS fleet_locks (
    name text PRIMARY KEY,
    token text,
    expires_at double precision NOT NULL,
    fence bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS fleet_counters (
    name text PRIMARY KEY,
    value bigint NOT NULL
);

-- Every task of every queue is one row, whatever it is doing (ADR 0231): `state` says where it
-- is, `tier` which tier it belongs to (0 high, 1 normal, 2 low), `pos` its place (a tier's and
-- the dead letters' order; a task that goes back to the end of a line draws a new one), `due`
-- the reservation's deadline or the retry's time, `receipt` the current delivery.
CREATE SEQUENCE IF NOT EXISTS fleet_task_pos;
CREATE TABLE IF NOT EXISTS fleet_tasks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    state text NOT NULL DEFAULT 'ready'
        CHECK (state IN ('ready', 'reserved', 'scheduled', 'dead')),
    tier smallint NOT NULL CHECK (tier BETWEEN 0 AND 2),
    pos bigint NOT NULL DEFAULT nextval('fleet_task_pos'),
    body bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    receipt text,
    due double precision
);
CREATE INDEX IF NOT EXISTS fleet_tasks_ready ON fleet_tasks (name, tier, pos) WHERE state = 'ready';
CREATE INDEX IF NOT EXISTS fleet_tasks_reserved ON fleet_tasks (name, due) WHERE state = 'reserved';
CREATE INDEX IF NOT EXISTS fleet_tasks_scheduled ON fleet_tasks (name, due) WHERE state = 'scheduled';
CREATE INDEX IF NOT EXISTS fleet_tasks_dead ON fleet_tasks (name, pos) WHERE state = 'dead';
CREATE UNIQUE INDEX IF NOT EXISTS fleet_tasks_receipt ON fleet_tasks (receipt) WHERE state = 'reserved';

-- Identical envelopes are stored once per stream; the hash keeps the unique index small
-- whatever the envelope's size.
CREATE TABLE IF NOT EXISTS fleet_streams (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    score double precision NOT NULL,
    body bytea NOT NULL,
    body_hash bytea GENERATED ALWAYS AS (sha256(body)) STORED,
    UNIQUE (name, body_hash)
);
CREATE INDEX IF NOT EXISTS fleet_streams_score ON fleet_streams (name, score);

CREATE TABLE IF NOT EXISTS fleet_workers (
    automation_type text NOT NULL,
    worker_id text NOT NULL,
    hardware text NOT NULL,
    config text NOT NULL DEFAULT '{}',
    config_gen bigint NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'IDLE',
    last_seen double precision NOT NULL DEFAULT 0,
    last_error text,
    applied_gen bigint,
    stats text NOT NULL DEFAULT '{}',
    PRIMARY KEY (automation_type, worker_id)
);

-- Generations outlive workers: a re-registered worker starts above any generation it had.
CREATE TABLE IF NOT EXISTS fleet_worker_gens (
    automation_type text NOT NULL,
    worker_id text NOT NULL,
    config_gen bigint NOT NULL,
    PRIMARY KEY (automation_type, worker_id)
);

CREATE TABLE IF NOT EXISTS fleet_worker_stats (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    automation_type text NOT NULL,
    worker_id text NOT NULL,
    ts double precision NOT NULL,
    frame text NOT NULL
);
CREATE INDEX IF NOT EXISTS fleet_worker_stats_ts ON fleet_worker_stats (automation_type, worker_id, ts);

CREATE TABLE IF NOT EXISTS fleet_catalog (
    automation_type text PRIMARY KEY,
    doc bytea NOT NULL
);
