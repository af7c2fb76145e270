-- Ours (ADR 0394): the line of runs waiting for each session, beside the log and never in it, so
-- the seed (which reads only `events`) sees neither the table nor a waiting run. `pos` rises per
-- log as runs join; a run's place is its rank among the log's rows. `entry` is the waiting run's
-- claim as switchyard encodes it (`QueuedRun::to_json`).
CREATE TABLE IF NOT EXISTS events_line (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    pos INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (namespace, log_key, pos)
) WITHOUT ROWID;

-- One entry per run id and log: a push of a waiting id is refused.
CREATE UNIQUE INDEX IF NOT EXISTS events_line_run ON events_line (namespace, log_key, run_id);
