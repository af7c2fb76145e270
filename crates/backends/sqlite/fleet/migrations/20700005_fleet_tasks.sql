-- Control of a task on SQLite (ADR 0380, section 7): a record per task submitted with an id, an
-- end-event log and per-queue retention and end counts, in tables of their own. The seed's
-- tables are untouched, and rows the seed writes fire nothing here.

-- One record per task submitted through the port with an id, kept while the task lives and,
-- after its end, for the queue's retention. `row_id` is the row the task sits in while it
-- waits (`queues.id`), is scheduled (`queue_scheduled.id`) or is dead (`queue_dead.id`);
-- `receipt` is our delivery's `queue_processing.task_id` (kept after the delivery ends, as the
-- receipt index only covers running records). `done` puts ended records in their retention
-- bucket: 1 completed, 2 failed or cancelled (dead records live as long as their letter).
CREATE TABLE IF NOT EXISTS switchyard_tasks (
    name TEXT NOT NULL,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL,
    tier TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    touched_at REAL NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    row_id INTEGER,
    receipt TEXT,
    progress BLOB,
    last_error TEXT,
    result BLOB,
    done INTEGER GENERATED ALWAYS AS (
        CASE state WHEN 'completed' THEN 1 WHEN 'failed' THEN 2 WHEN 'cancelled' THEN 2 END
    ) VIRTUAL,
    UNIQUE (name, task_id)
);
-- The record of a row (reserve's trigger, promotion, dead-letter moves); row ids of the three
-- tables overlap, so lookups name the state too. Records in no row (running, ended but dead)
-- are not in it.
CREATE INDEX IF NOT EXISTS switchyard_tasks_row ON switchyard_tasks (name, state, row_id)
    WHERE row_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS switchyard_tasks_receipt ON switchyard_tasks (name, receipt)
    WHERE state = 'running';
-- Retention trims, oldest first per bucket.
CREATE INDEX IF NOT EXISTS switchyard_tasks_done ON switchyard_tasks (name, done, finished_at)
    WHERE done IS NOT NULL;

-- The end-event log of every queue. `seq` is shared by all queues; the one writer makes its
-- order the commit order.
CREATE TABLE IF NOT EXISTS switchyard_task_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    task_id TEXT NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    at REAL NOT NULL,
    error TEXT,
    result BLOB,
    result_size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS switchyard_task_events_name ON switchyard_task_events (name, seq);

-- Per queue: retention (NULL: the default of `Retention::default()`, spelt again in the
-- triggers below), how many ended records each bucket holds (so a trim by count never counts
-- rows), the last event seq trims removed (gap detection), and the end counts.
CREATE TABLE IF NOT EXISTS switchyard_queue_tasks (
    name TEXT PRIMARY KEY,
    ok_n INTEGER,
    ok_ms INTEGER,
    bad_n INTEGER,
    bad_ms INTEGER,
    ev_n INTEGER,
    ev_ms INTEGER,
    kept_ok INTEGER NOT NULL DEFAULT 0,
    kept_bad INTEGER NOT NULL DEFAULT 0,
    trimmed_through INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    dead INTEGER NOT NULL DEFAULT 0,
    cancelled INTEGER NOT NULL DEFAULT 0
);

-- A submit in one statement: inserting a row here appends the body to its tier (or schedules
-- it at `at`, or `delay` seconds from now) and, for a body with an id, creates its record
-- pointing at the new row. A taken id fails the unique constraint of `switchyard_tasks`, which
-- undoes the whole statement: a multi-row insert (a batch) writes all of it or nothing.
CREATE VIEW IF NOT EXISTS switchyard_task_submit AS
SELECT NULL AS name, NULL AS tier, NULL AS body, NULL AS task_id, NULL AS max_attempts,
       NULL AS last_error, NULL AS at, NULL AS delay
WHERE 0;
CREATE TRIGGER IF NOT EXISTS switchyard_task_submit_row INSTEAD OF INSERT ON switchyard_task_submit
BEGIN
    INSERT INTO queues (name, tier, body, attempts)
    SELECT new.name, new.tier, new.body, 0 WHERE new.at IS NULL AND new.delay IS NULL;
    INSERT INTO queue_scheduled (name, available_at, body, tier, attempts)
    SELECT new.name,
           COALESCE(new.at, ((julianday('now') - 2440587.5) * 86400.0) + new.delay),
           new.body, new.tier, 0
    WHERE new.at IS NOT NULL OR new.delay IS NOT NULL;
    INSERT INTO switchyard_tasks (name, task_id, state, tier, max_attempts, submitted_at,
                                  touched_at, row_id, last_error)
    SELECT new.name, new.task_id,
           CASE WHEN new.at IS NULL AND new.delay IS NULL THEN 'waiting' ELSE 'scheduled' END,
           new.tier, new.max_attempts, ((julianday('now') - 2440587.5) * 86400.0),
           ((julianday('now') - 2440587.5) * 86400.0), last_insert_rowid(), new.last_error
    WHERE new.task_id IS NOT NULL;
END;

-- The same for the hot path, a submit to run now: its trigger only appends to a tier.
CREATE VIEW IF NOT EXISTS switchyard_task_push AS
SELECT NULL AS name, NULL AS tier, NULL AS body, NULL AS task_id, NULL AS max_attempts,
       NULL AS last_error
WHERE 0;
CREATE TRIGGER IF NOT EXISTS switchyard_task_push_row INSTEAD OF INSERT ON switchyard_task_push
BEGIN
    INSERT INTO queues (name, tier, body, attempts) VALUES (new.name, new.tier, new.body, 0);
    INSERT INTO switchyard_tasks (name, task_id, state, tier, max_attempts, submitted_at,
                                  touched_at, row_id, last_error)
    SELECT new.name, new.task_id, 'waiting', new.tier, new.max_attempts,
           ((julianday('now') - 2440587.5) * 86400.0), ((julianday('now') - 2440587.5) * 86400.0),
           last_insert_rowid(), new.last_error
    WHERE new.task_id IS NOT NULL;
END;

-- The one-statement reserve (ADR 0070) marks a recorded task running in the statement that pops
-- it. The pop names a recorded task's delivery with a receipt starting with `t` (random hex
-- never does), so id-less deliveries skip this trigger, and every later step of a delivery
-- knows from its receipt alone whether a record is involved. The flag `cancel_requested` is
-- left as it is (a task a seed consumer held while it was cancelled stays cancelled).
CREATE TRIGGER IF NOT EXISTS switchyard_reserve_task AFTER INSERT ON queue_processing
WHEN new.src_id IS NOT NULL AND substr(new.task_id, 1, 1) = 't'
BEGIN
    UPDATE switchyard_tasks
    SET state = 'running', receipt = new.task_id, row_id = NULL, attempt = new.attempts,
        started_at = ((julianday('now') - 2440587.5) * 86400.0),
        touched_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE name = new.name AND state = 'waiting' AND row_id = new.src_id;
END;

-- Every end of a record, whichever step makes it, appends its event and counts it, in the ending
-- statement, so no end lacks its event or count. Every ending statement sets `finished_at`
-- (and only those and a dead letter's requeue, which clears it), so statements that never end a
-- task (the reserve's above) do not carry this trigger. The ending step then trims the buckets
-- (see `TRIM_SQL` in the adapter). A record leaves its bucket only when removed, or when a dead
-- letter of its id replaces it (`old.done` counts that). Results up to 1 KiB travel inline;
-- the error is cut to 1,024 characters here and to 1 KiB when read.
CREATE TRIGGER IF NOT EXISTS switchyard_task_end AFTER UPDATE OF finished_at ON switchyard_tasks
WHEN new.state IN ('completed', 'failed', 'dead', 'cancelled') AND new.state IS NOT old.state
BEGIN
    INSERT INTO switchyard_task_events (name, task_id, state, attempt, at, error, result, result_size)
    VALUES (new.name, new.task_id, new.state, new.attempt,
            COALESCE(new.finished_at, ((julianday('now') - 2440587.5) * 86400.0)),
            substr(new.last_error, 1, 1024),
            CASE WHEN length(new.result) <= 1024 THEN new.result END,
            COALESCE(length(new.result), 0));
    INSERT INTO switchyard_queue_tasks (name, completed, failed, dead, cancelled, kept_ok, kept_bad)
    VALUES (new.name, new.state = 'completed', new.state = 'failed', new.state = 'dead',
            new.state = 'cancelled', (new.done IS 1) - (old.done IS 1),
            (new.done IS 2) - (old.done IS 2))
    ON CONFLICT (name) DO UPDATE SET completed = completed + excluded.completed,
        failed = failed + excluded.failed, dead = dead + excluded.dead,
        cancelled = cancelled + excluded.cancelled, kept_ok = kept_ok + excluded.kept_ok,
        kept_bad = kept_bad + excluded.kept_bad;
END;

-- Removing an ended record (retention) keeps its bucket's count right.
CREATE TRIGGER IF NOT EXISTS switchyard_task_removed AFTER DELETE ON switchyard_tasks
WHEN old.done IS NOT NULL
BEGIN
    UPDATE switchyard_queue_tasks
    SET kept_ok = kept_ok - (old.done = 1), kept_bad = kept_bad - (old.done = 2)
    WHERE name = old.name;
END;
