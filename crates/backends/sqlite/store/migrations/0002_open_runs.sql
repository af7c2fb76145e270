-- Ours (ADR 0031): the open runs of every log, kept by SQLite itself. The trigger fires on every
-- insert into events by any connection of any process, the Python seed's included, inside that
-- writer's transaction; no code of ours writes this table. A claim reads the log's open runs here
-- (one range of a primary key) instead of walking the log's whole history.
-- The kind expression is the one of events_life (0001) and src/sql.rs.
CREATE TABLE IF NOT EXISTS events_open_runs (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (namespace, log_key, run_id)
) WITHOUT ROWID;

-- A lifecycle event decides whether its run is open: a terminal kind closes it, any other opens it
-- (the fold's "last lifecycle event wins"). Other kinds, and rows that are not JSON, change nothing.
CREATE TRIGGER IF NOT EXISTS events_open_runs_track AFTER INSERT ON events
WHEN (CASE WHEN json_valid(NEW.data) THEN json_extract(NEW.data, '$.kind') END) IN (
    'run.started', 'run.paused', 'run.resumed', 'run.interrupted',
    'run.completed', 'run.failed', 'run.cancelled'
)
BEGIN
    DELETE FROM events_open_runs
     WHERE namespace = NEW.namespace AND log_key = NEW.log_key AND run_id = NEW.run_id
       AND json_extract(NEW.data, '$.kind') IN ('run.completed', 'run.failed', 'run.cancelled');
    INSERT OR IGNORE INTO events_open_runs (namespace, log_key, run_id)
    SELECT NEW.namespace, NEW.log_key, NEW.run_id
     WHERE json_extract(NEW.data, '$.kind') NOT IN ('run.completed', 'run.failed', 'run.cancelled');
END;

-- Rows written before the trigger existed (a file the seed created): fold them once. This runs in
-- the migration's write transaction, so no insert can slip between the backfill and the trigger.
INSERT OR IGNORE INTO events_open_runs (namespace, log_key, run_id)
SELECT namespace, log_key, run_id FROM (
    SELECT namespace, log_key, run_id, MAX(id),
           (CASE WHEN json_valid(data) THEN json_extract(data, '$.kind') END) AS kind
      FROM events
     WHERE (CASE WHEN json_valid(data) THEN json_extract(data, '$.kind') END) IN (
        'run.started', 'run.paused', 'run.resumed', 'run.interrupted',
        'run.completed', 'run.failed', 'run.cancelled'
     )
     GROUP BY namespace, log_key, run_id
) WHERE kind NOT IN ('run.completed', 'run.failed', 'run.cancelled');
