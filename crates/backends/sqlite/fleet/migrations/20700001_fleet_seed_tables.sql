-- The tables of fleet-framework 0.1.0's SqliteBackend, as the seed creates them. `IF NOT EXISTS`
-- everywhere: a file the seed already created is adopted as it is.
CREATE TABLE IF NOT EXISTS kv (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB,
    expires_at REAL,
    PRIMARY KEY (ns, key)
);
CREATE TABLE IF NOT EXISTS pool_items (
    name TEXT NOT NULL,
    item_id TEXT NOT NULL,
    payload BLOB,
    tags TEXT,
    expires_at REAL,
    PRIMARY KEY (name, item_id)
);
CREATE TABLE IF NOT EXISTS pool_claims (
    name TEXT NOT NULL,
    item_id TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (name, item_id)
);
CREATE TABLE IF NOT EXISTS locks (
    name TEXT PRIMARY KEY,
    token TEXT,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS queues (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    tier TEXT NOT NULL,
    body BLOB
);
CREATE INDEX IF NOT EXISTS queues_name_tier ON queues (name, tier, id);
CREATE TABLE IF NOT EXISTS queue_processing (
    name TEXT NOT NULL,
    task_id TEXT NOT NULL,
    body BLOB,
    deadline REAL,
    PRIMARY KEY (name, task_id)
);
CREATE TABLE IF NOT EXISTS queue_scheduled (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    available_at REAL,
    body BLOB
);
CREATE INDEX IF NOT EXISTS queue_scheduled_name_at ON queue_scheduled (name, available_at);
CREATE TABLE IF NOT EXISTS queue_dead (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    body BLOB
);
CREATE INDEX IF NOT EXISTS queue_dead_name_id ON queue_dead (name, id);
CREATE TABLE IF NOT EXISTS streams (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    score REAL,
    body BLOB
);
CREATE INDEX IF NOT EXISTS streams_name_score ON streams (name, score);
CREATE TABLE IF NOT EXISTS workers (
    automation_type TEXT NOT NULL,
    worker_id TEXT NOT NULL,
    hardware TEXT,
    config TEXT,
    config_gen INTEGER DEFAULT 0,
    state TEXT DEFAULT 'IDLE',
    last_seen REAL DEFAULT 0,
    last_error TEXT,
    stats TEXT DEFAULT '{}',
    PRIMARY KEY (automation_type, worker_id)
);
CREATE TABLE IF NOT EXISTS worker_stats_history (
    automation_type TEXT NOT NULL,
    worker_id TEXT NOT NULL,
    ts REAL,
    frame TEXT
);
CREATE INDEX IF NOT EXISTS worker_stats_history_idx ON worker_stats_history (automation_type, worker_id, ts);
CREATE TABLE IF NOT EXISTS catalog (
    automation_type TEXT PRIMARY KEY,
    doc BLOB
);
