-- The agentdeck 3.1.0 SqliteEventStore table and indexes, verbatim. Every statement is
-- IF NOT EXISTS, so a file the Python seed created migrates without change and both sides
-- keep reading and writing it.
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_log ON events (namespace, log_key, id);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON events (namespace, log_key, run_id, seq);

-- Ours (ADR 0031): a partial index over lifecycle rows only, holding each row's kind, so a run's
-- latest lifecycle kind is one seek (claim_resume, run_status) and list_runs walks lifecycle rows
-- only, never parsing the JSON of the streamed events. SQLite maintains it on every insert,
-- whichever process (Rust or the Python seed) writes the file. The kind expression must stay
-- byte-for-byte the one in src/sql.rs (`kind!()`), or the planner will not match it; a test checks
-- the plans. json_valid guards the expression, so a row that is not JSON is simply not indexed
-- instead of failing its insert (or this CREATE INDEX on an old file).
CREATE INDEX IF NOT EXISTS events_life ON events (
    namespace,
    log_key,
    run_id,
    id,
    (CASE WHEN json_valid(data) THEN json_extract(data, '$.kind') END)
) WHERE (CASE WHEN json_valid(data) THEN json_extract(data, '$.kind') END) IN (
    'run.started', 'run.paused', 'run.resumed', 'run.interrupted',
    'run.completed', 'run.failed', 'run.cancelled'
);
