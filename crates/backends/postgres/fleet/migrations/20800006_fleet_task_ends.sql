-- The ends of one queue no longer wait for each other's commit (ADR 0383, amending 0380).
--
-- Until now every end updated the queue's `fleet_queue_flow` row (the next event `seq`, the end
-- counts, the kept counts) and held that row's lock to its commit, so the ends of a queue
-- committed one after the other, each waiting for the previous one's WAL flush: with task
-- records the ack of a busy queue waited about one commit more than an ack without a record.
--
-- Now:
-- * An end takes the queue's end lock (a transaction-level advisory lock, see
--   `fleet_ends_lock`) SHARED before it draws its events' numbers, and holds it to its commit.
--   Ends share it, so they commit together. A reader of the log's position (`fleet_task_get`,
--   `fleet_read_events`) and `fleet_task_maintain` take it EXCLUSIVE first: they wait for the
--   ends that already drew numbers to commit (or roll back), and ends that start meanwhile wait
--   for them. So a reader never sees an event appear later below a number it already saw.
-- * Events are numbered from one sequence of the schema, `fleet_task_event_seq`: rising in each
--   queue's log but not dense (numbers of other queues and of rolled-back ends are skipped). The
--   log's end is the newest event kept, or the last trimmed one (`trimmed_through`), or for a
--   log written before this migration its old `event_seq`. The sequence starts past every number
--   already given, so old cursors stay valid.
-- * End counts and kept counts are added up in `fleet_task_counts`, one row per queue and slot
--   (the connection's backend pid modulo 64): concurrent ends on other connections write other
--   rows. Readers sum the slots. The counts of the flow rows move to slot 0.

CREATE SEQUENCE IF NOT EXISTS fleet_task_event_seq;
SELECT setval('fleet_task_event_seq', m)
FROM (SELECT greatest(coalesce((SELECT max(event_seq) FROM fleet_queue_flow), 0),
                      coalesce((SELECT max(seq) FROM fleet_task_events), 0)) AS m) x
WHERE m > 0;

CREATE TABLE IF NOT EXISTS fleet_task_counts (
    name text NOT NULL,
    slot integer NOT NULL,
    completed bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    dead bigint NOT NULL DEFAULT 0,
    cancelled bigint NOT NULL DEFAULT 0,
    kept_ok bigint NOT NULL DEFAULT 0,
    kept_bad bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (name, slot)
);

INSERT INTO fleet_task_counts (name, slot, completed, failed, dead, cancelled, kept_ok, kept_bad)
SELECT f.name, 0, f.completed, f.failed, f.dead, f.cancelled, f.kept_ok, f.kept_bad
FROM fleet_queue_flow f
WHERE f.completed <> 0 OR f.failed <> 0 OR f.dead <> 0 OR f.cancelled <> 0 OR f.kept_ok <> 0
   OR f.kept_bad <> 0
ON CONFLICT (name, slot) DO UPDATE SET
    completed = fleet_task_counts.completed + excluded.completed,
    failed = fleet_task_counts.failed + excluded.failed,
    dead = fleet_task_counts.dead + excluded.dead,
    cancelled = fleet_task_counts.cancelled + excluded.cancelled,
    kept_ok = fleet_task_counts.kept_ok + excluded.kept_ok,
    kept_bad = fleet_task_counts.kept_bad + excluded.kept_bad;
UPDATE fleet_queue_flow
SET completed = 0, failed = 0, dead = 0, cancelled = 0, kept_ok = 0, kept_bad = 0
WHERE completed <> 0 OR failed <> 0 OR dead <> 0 OR cancelled <> 0 OR kept_ok <> 0
   OR kept_bad <> 0;

-- fleet_ends_lock(q) -> the key of queue q's end lock: a constant class for the fleet's end
-- locks and a hash of the schema and the queue. Two queues whose keys collide share a lock,
-- which only makes one wait for the other.
CREATE OR REPLACE FUNCTION fleet_ends_lock(q text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT hashtextextended(current_schema() || '/' || q, 3830)
$$;

-- fleet_events_end(q) -> the end of queue q's log: the newest event, or the last one trimmed,
-- or (a log written before 20800006) the flow row's last number. Exact only under the
-- exclusive end lock.
CREATE OR REPLACE FUNCTION fleet_events_end(q text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT greatest(
        coalesce((SELECT max(e.seq) FROM fleet_task_events e WHERE e.name = q), 0),
        coalesce((SELECT greatest(f.event_seq, f.trimmed_through) FROM fleet_queue_flow f
                  WHERE f.name = q), 0))
$$;

-- fleet_note_ends(q, task_ids, states, attempts, ats, errors, results, channel)
-- Tasks of queue q just ended in this transaction, as given (one entry each, in order): under
-- the queue's end lock held shared to commit, trims each bucket that grew (at most 10 records
-- beyond the ones that just ended, so an end stays O(1) amortized and a count of 0 keeps
-- nothing), counts the ends and the kept records in this connection's slot, appends one event
-- each numbered in the given order, and wakes the readers of the queue's events. The trims read
-- the kept counts without a lock: a concurrent end may trim a record more or less, which the
-- next end (or `fleet_task_maintain`, exact under the exclusive lock) corrects.
CREATE OR REPLACE FUNCTION fleet_note_ends(
    q text, tids text[], states text[], attempts integer[], ats double precision[],
    errors text[], results bytea[], channel text
) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := cardinality(tids);
    n_ok bigint := 0;
    n_failed bigint := 0;
    n_dead bigint := 0;
    n_cancelled bigint := 0;
    n_bad bigint;
    d_ok bigint := 0;
    d_bad bigint := 0;
    kept_ok bigint;
    kept_bad bigint;
    fl record;
    seqs bigint[];
    ev_key text;
    notified bigint;
BEGIN
    IF coalesce(n, 0) = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        CASE states[i]
            WHEN 'completed' THEN n_ok := n_ok + 1;
            WHEN 'failed' THEN n_failed := n_failed + 1;
            WHEN 'dead' THEN n_dead := n_dead + 1;
            ELSE n_cancelled := n_cancelled + 1;
        END CASE;
    END LOOP;
    n_bad := n_failed + n_cancelled;
    -- Before any number is drawn: a reader holding the lock exclusive waits for this commit.
    PERFORM pg_advisory_xact_lock_shared(fleet_ends_lock(q));
    SELECT f.ok_n, f.ok_ms, f.bad_n, f.bad_ms INTO fl FROM fleet_queue_flow f WHERE f.name = q;
    SELECT coalesce(sum(c.kept_ok), 0), coalesce(sum(c.kept_bad), 0) INTO kept_ok, kept_bad
    FROM fleet_task_counts c WHERE c.name = q;
    IF n_ok > 0 AND (kept_ok + n_ok > coalesce(fl.ok_n, 1000)
                     OR EXISTS (SELECT 1 FROM fleet_tasks t
                                WHERE t.name = q AND t.state = 'completed'
                                  AND t.finished_at <= fleet_now()
                                      - coalesce(fl.ok_ms, 86400000) / 1000.0)) THEN
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state = 'completed'
                    ORDER BY t.finished_at, t.id LIMIT n_ok + 10
                ) c
                WHERE c.k <= kept_ok + n_ok - coalesce(fl.ok_n, 1000)
                   OR c.finished_at <= fleet_now() - coalesce(fl.ok_ms, 86400000) / 1000.0)
              AND x.state = 'completed'
            FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS d_ok = ROW_COUNT;
    END IF;
    IF n_bad > 0 THEN
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state IN ('failed', 'cancelled')
                    ORDER BY t.finished_at, t.id LIMIT n_bad + 10
                ) c
                WHERE c.k <= kept_bad + n_bad - coalesce(fl.bad_n, 1000)
                   OR c.finished_at <= fleet_now() - coalesce(fl.bad_ms, 86400000) / 1000.0)
              AND x.state IN ('failed', 'cancelled')
            FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS d_bad = ROW_COUNT;
    END IF;
    INSERT INTO fleet_task_counts AS c
        (name, slot, completed, failed, dead, cancelled, kept_ok, kept_bad)
    VALUES (q, pg_backend_pid() % 64, n_ok, n_failed, n_dead, n_cancelled, n_ok - d_ok,
            n_bad - d_bad)
    ON CONFLICT (name, slot) DO UPDATE SET
        completed = c.completed + excluded.completed,
        failed = c.failed + excluded.failed,
        dead = c.dead + excluded.dead,
        cancelled = c.cancelled + excluded.cancelled,
        kept_ok = c.kept_ok + excluded.kept_ok,
        kept_bad = c.kept_bad + excluded.kept_bad;
    -- n numbers, handed out smallest first in the given order.
    SELECT array_agg(s.v ORDER BY s.v) INTO seqs
    FROM (SELECT nextval('fleet_task_event_seq') AS v FROM generate_series(1, n)) s;
    INSERT INTO fleet_task_events
        (name, seq, task_id, state, attempt, at, error, result, result_size)
    SELECT q, seqs[x.o], x.tid, x.st, x.att, x.at, left(x.err, 1024),
           CASE WHEN octet_length(x.res) <= 1024 THEN x.res END,
           coalesce(octet_length(x.res), 0)
    FROM unnest(tids, states, attempts, ats, errors, results)
        WITH ORDINALITY AS x(tid, st, att, at, err, res, o);
    -- The readers of the queue's events are notified (at commit) when one holds a lease.
    ev_key := fleet_events_key(q);
    SELECT count(*) INTO notified FROM (
        SELECT pg_notify(channel, 't:' || ev_key) FROM fleet_waiters w
        WHERE w.queue_key = ev_key AND w.until > fleet_now() LIMIT 1
    ) w;
END $$;

-- fleet_task_get(q, task_id) -> the record as `task_get` reads it, with the log's end
-- Under the queue's end lock held exclusive, so the end it answers is one no later end falls
-- below: a reader waiting from it sees this task's end.
CREATE OR REPLACE FUNCTION fleet_task_get(q text, tid text)
RETURNS TABLE (o_state text, o_cancel boolean, o_attempts integer, o_max integer,
               o_tier smallint, o_submitted double precision, o_started double precision,
               o_finished double precision, o_due double precision, o_progress bytea,
               o_error text, o_result bytea, o_end bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(fleet_ends_lock(q));
    RETURN QUERY
    SELECT t.state, t.cancel_requested, t.attempts, t.max_attempts, t.tier, t.submitted_at,
           t.started_at, t.finished_at, t.due, t.progress, t.last_error, t.result,
           fleet_events_end(q)
    FROM fleet_tasks t WHERE t.name = q AND t.task_id = tid;
END $$;

-- fleet_read_events(q, from_seq, lim) -> (log end, last trimmed, event...) rows
-- Up to lim events of queue q after `from_seq` (NULL, older than the oldest kept or past the log's
-- end: from the oldest kept), under the queue's end lock held exclusive; one row with NULL event
-- columns when there is none, so the log's end and last trimmed number always come back.
CREATE OR REPLACE FUNCTION fleet_read_events(q text, from_seq bigint, lim bigint)
RETURNS TABLE (o_end bigint, o_trimmed bigint, o_seq bigint, o_task_id text, o_state text,
               o_attempt integer, o_at double precision, o_error text, o_result bytea,
               o_size bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(fleet_ends_lock(q));
    RETURN QUERY
    WITH f AS (
        SELECT fleet_events_end(q) AS e,
               coalesce((SELECT fl.trimmed_through FROM fleet_queue_flow fl
                         WHERE fl.name = q), 0) AS tr
    )
    SELECT f.e, f.tr, x.seq, x.task_id, x.state, x.attempt, x.at, x.error, x.result,
           x.result_size
    FROM f LEFT JOIN LATERAL (
        SELECT e.* FROM fleet_task_events e
        WHERE e.name = q AND e.seq > CASE
            WHEN from_seq IS NULL OR from_seq > f.e OR from_seq < f.tr THEN f.tr ELSE from_seq END
        ORDER BY e.seq LIMIT lim) x ON true
    ORDER BY x.seq;
END $$;

-- fleet_task_maintain(q, n) -> how many finished records it removed
-- Removes up to n records of each bucket past the queue's retention and every event past the
-- log's count or age, raising `trimmed_through` to the last event removed; under the queue's end
-- lock held exclusive, so the kept counts it reads and lowers are exact.
CREATE OR REPLACE FUNCTION fleet_task_maintain(q text, n bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    f record;
    kept_ok bigint;
    kept_bad bigint;
    d_ok bigint;
    d_bad bigint;
    trimmed bigint;
    cut bigint;
    aged bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(fleet_ends_lock(q));
    SELECT fl.ok_n, fl.ok_ms, fl.bad_n, fl.bad_ms, fl.ev_n, fl.ev_ms, fl.trimmed_through INTO f
    FROM fleet_queue_flow fl WHERE fl.name = q;
    SELECT coalesce(sum(c.kept_ok), 0), coalesce(sum(c.kept_bad), 0) INTO kept_ok, kept_bad
    FROM fleet_task_counts c WHERE c.name = q;
    d_ok := fleet_trim_bucket(q, true, n, kept_ok - coalesce(f.ok_n, 1000),
                              coalesce(f.ok_ms, 86400000));
    d_bad := fleet_trim_bucket(q, false, n, kept_bad - coalesce(f.bad_n, 1000),
                               coalesce(f.bad_ms, 86400000));
    IF d_ok > 0 OR d_bad > 0 THEN
        INSERT INTO fleet_task_counts AS c (name, slot, kept_ok, kept_bad)
        VALUES (q, pg_backend_pid() % 64, -d_ok, -d_bad)
        ON CONFLICT (name, slot) DO UPDATE SET
            kept_ok = c.kept_ok + excluded.kept_ok,
            kept_bad = c.kept_bad + excluded.kept_bad;
    END IF;
    trimmed := coalesce(f.trimmed_through, 0);
    -- Past the count: every event older than the newest `ev_n` kept.
    SELECT e.seq INTO cut FROM fleet_task_events e
    WHERE e.name = q AND e.seq > trimmed
    ORDER BY e.seq DESC OFFSET coalesce(f.ev_n, 10000) LIMIT 1;
    SELECT max(e.seq) INTO aged FROM fleet_task_events e
    WHERE e.name = q AND e.seq > trimmed
      AND e.at <= fleet_now() - coalesce(f.ev_ms, 86400000) / 1000.0;
    cut := greatest(coalesce(cut, 0), coalesce(aged, 0));
    IF cut > trimmed THEN
        DELETE FROM fleet_task_events e WHERE e.name = q AND e.seq <= cut;
        INSERT INTO fleet_queue_flow AS fl (name, trimmed_through) VALUES (q, cut)
        ON CONFLICT (name) DO UPDATE SET trimmed_through = greatest(fl.trimmed_through, cut);
    END IF;
    RETURN d_ok + d_bad;
END $$;
