-- switchyard's event store on agentdeck 3.1.0's own PostgreSQL layout (ADR 0377). The Python
-- `PostgresEventStore` and this store share the schema (`agentdeck_events` by default): the same
-- table, the same indexes, the same per-log advisory lock before every write's reads.

-- agentdeck's DDL, verbatim but for the schema (the connection's search_path here). Every
-- statement is IF NOT EXISTS, so a schema the Python store created migrates in place, and the
-- Python store's own CREATEs find ours and do nothing.
CREATE TABLE IF NOT EXISTS events (
    id BIGSERIAL PRIMARY KEY,
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_log ON events (namespace, log_key, id);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_run ON events (namespace, log_key, run_id, seq);

-- Ours: each run's latest lifecycle kind, kept by a trigger on `events`. The trigger fires on every
-- insert by any connection, the Python store's included, inside that writer's transaction, and no
-- code of ours writes this table; agentdeck's queries never name it. Claims read a log's open runs
-- here (a partial index) instead of folding the log's history, and run_status, list_runs,
-- claim_resume and append_if_open read one row. Writers of one log take turns on its advisory
-- lock, so the trigger sees a log's lifecycle events in append order: "the last one wins" is the
-- fold's own rule.
CREATE TABLE event_runs (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (namespace, log_key, run_id)
);
CREATE INDEX event_runs_open ON event_runs (namespace, log_key, run_id)
    WHERE status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted');
CREATE INDEX event_runs_by_namespace ON event_runs (namespace);

-- The trigger's body. `data->>'kind'` is NULL for a row whose data is not an object, which the
-- trigger's WHEN skips, so a row the store cannot decode never fails the writer's insert. It runs
-- as its owner (SECURITY DEFINER), so a Python service connecting as another role, with rights on
-- `events` only, writes through it; its search_path is pinned, so that role cannot redirect it.
CREATE FUNCTION event_runs_track() RETURNS trigger
-- Our tables, whatever the writer's search_path (the Python store's is not this schema).
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO event_runs AS r (namespace, log_key, run_id, status)
        VALUES (NEW.namespace, NEW.log_key, NEW.run_id, NEW.data->>'kind')
        ON CONFLICT (namespace, log_key, run_id) DO UPDATE SET status = EXCLUDED.status;
    RETURN NULL;
END;
$$;

-- CREATE TRIGGER locks `events` against inserts until this migration commits, so the backfill
-- below reads every row written before the trigger, and every row written after it fires it.
CREATE TRIGGER event_runs_track AFTER INSERT ON events FOR EACH ROW
    WHEN ((NEW.data->>'kind') IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted',
                                  'run.completed', 'run.failed', 'run.cancelled'))
    EXECUTE FUNCTION event_runs_track();

INSERT INTO event_runs (namespace, log_key, run_id, status)
SELECT DISTINCT ON (namespace, log_key, run_id) namespace, log_key, run_id, data->>'kind'
FROM events
WHERE (data->>'kind') IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted',
                          'run.completed', 'run.failed', 'run.cancelled')
ORDER BY namespace, log_key, run_id, id DESC;

-- A timestamp as Event::to_json writes `ts` (the same function as the switchyard layout's).
CREATE FUNCTION event_ts_text(ts TIMESTAMPTZ) RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || CASE WHEN to_char(ts AT TIME ZONE 'UTC', 'US') = '000000' THEN ''
                ELSE '.' || to_char(ts AT TIME ZONE 'UTC', 'US') END
        || 'Z'
$$;

-- The lock every write of a log takes before its first read, agentdeck's: a transaction-scoped
-- advisory lock on p_key, the first 8 bytes of BLAKE2b(namespace || '\0' || log_key) read as a
-- signed big-endian integer (computed by the caller: PostgreSQL has no BLAKE2b). Every statement
-- after it reads what committed before it got the lock, which needs READ COMMITTED: under a
-- stronger isolation a function's statements share the transaction's first snapshot, taken
-- before the lock, and two claims could both win. agentdeck pins READ COMMITTED on its
-- connection; a server or role configured otherwise is refused here instead of being wrong.
CREATE FUNCTION lock_log(p_key BIGINT) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'the event store needs READ COMMITTED transactions, and this one is %',
            current_setting('transaction_isolation')
            USING HINT = 'set default_transaction_isolation to ''read committed'' for the '
                         'store''s user (ALTER ROLE … SET default_transaction_isolation)';
    END IF;
    PERFORM pg_advisory_xact_lock(p_key);
END;
$$;

-- Appends a batch in one call under the log's lock: the run's next seq (agentdeck's MAX(seq) + 1,
-- one index seek), the database clock read after the lock (so ts never goes back within a run)
-- and the batch's rows, whose JSON is put together from its parts around seq and ts and stored as
-- JSONB.
--
-- Arguments: the lock key, the run (p_namespace, p_log_key, p_run_id), an injected "now" (p_clock,
-- NULL for the database clock), and each event's JSON around its seq and ts:
-- p_heads[i] || seq || p_mid || event_ts_text(ts) || p_tails[i]. Reply: (first seq, ts text).
CREATE FUNCTION append_events(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_clock TIMESTAMPTZ,
    p_heads TEXT[], p_mid TEXT, p_tails TEXT[]
) RETURNS TABLE (first_seq BIGINT, ts_text TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_first BIGINT;
    v_now TIMESTAMPTZ;
BEGIN
    PERFORM lock_log(p_key);
    v_now := COALESCE(p_clock, clock_timestamp());
    SELECT COALESCE(max(e.seq) + 1, 0) INTO v_first FROM events AS e
        WHERE e.namespace = p_namespace AND e.log_key = p_log_key AND e.run_id = p_run_id;
    INSERT INTO events (namespace, log_key, run_id, seq, data)
        SELECT p_namespace, p_log_key, p_run_id, v_first + b.n - 1,
               CAST(b.head || (v_first + b.n - 1) || p_mid || event_ts_text(v_now) || b.tail
                    AS jsonb)
        FROM unnest(p_heads, p_tails) WITH ORDINALITY AS b(head, tail, n);
    RETURN QUERY SELECT v_first, event_ts_text(v_now);
END;
$$;

-- append_if_open (ADR 0365) under the log's lock: the run's latest lifecycle kind from
-- event_runs, and the batch written only while the run is open. Arguments as append_events'.
-- Reply: one row (first seq, ts text, the run's latest lifecycle kind before the call); the first
-- two are NULL when the run is not open and nothing was written, and the kind is '' for a run
-- with no lifecycle event.
CREATE FUNCTION append_if_open(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_clock TIMESTAMPTZ,
    p_heads TEXT[], p_mid TEXT, p_tails TEXT[]
) RETURNS TABLE (first_seq BIGINT, ts_text TEXT, status_before TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_status TEXT;
BEGIN
    PERFORM lock_log(p_key);
    SELECT r.status INTO v_status FROM event_runs AS r
        WHERE r.namespace = p_namespace AND r.log_key = p_log_key AND r.run_id = p_run_id;
    IF v_status IS NULL
       OR v_status NOT IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted') THEN
        RETURN QUERY SELECT NULL::BIGINT, NULL::TEXT, COALESCE(v_status, '');
        RETURN;
    END IF;
    RETURN QUERY
        SELECT a.first_seq, a.ts_text, v_status
        FROM append_events(p_key, p_namespace, p_log_key, p_run_id, p_clock, p_heads, p_mid,
                           p_tails) AS a;
END;
$$;

-- claim_resume under the log's lock: writes the run.resumed event only while the run's latest
-- lifecycle kind is run.paused or run.interrupted, so of concurrent resumes exactly one writes
-- (the others find run.resumed). Arguments: the lock key, the run, an injected "now", the event's
-- JSON parts. Reply: (seq, ts text), or no row when the run is not resumable.
CREATE FUNCTION claim_resume(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_clock TIMESTAMPTZ,
    p_head TEXT, p_mid TEXT, p_tail TEXT
) RETURNS TABLE (seq BIGINT, ts_text TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    PERFORM lock_log(p_key);
    IF NOT EXISTS (SELECT 1 FROM event_runs AS r
                   WHERE r.namespace = p_namespace AND r.log_key = p_log_key
                     AND r.run_id = p_run_id
                     AND r.status IN ('run.paused', 'run.interrupted')) THEN
        RETURN;
    END IF;
    RETURN QUERY
        SELECT a.first_seq, a.ts_text
        FROM append_events(p_key, p_namespace, p_log_key, p_run_id, p_clock, ARRAY[p_head],
                           p_mid, ARRAY[p_tail]) AS a;
END;
$$;

-- The open runs of a log with their latest event (of any kind, the run's last sign of life) and
-- its ts: event_runs' partial index, then one seek of events_by_run per open run.
CREATE FUNCTION open_runs(p_namespace TEXT, p_log_key TEXT)
RETURNS TABLE (run_id TEXT, last_ts TIMESTAMPTZ, data JSONB)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT r.run_id, CAST(tail.data->>'ts' AS timestamptz), tail.data
    FROM event_runs AS r
    CROSS JOIN LATERAL (
        SELECT e.data FROM events AS e
        WHERE e.namespace = r.namespace AND e.log_key = r.log_key AND e.run_id = r.run_id
        ORDER BY e.seq DESC LIMIT 1
    ) AS tail
    WHERE r.namespace = p_namespace AND r.log_key = p_log_key
      AND r.status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted')
    ORDER BY r.run_id
$$;

-- claim_start in one call (ADRs 0223, 0348, 0377): agentdeck's rule (a fresh open run holds the
-- log; stale ones are overridden) plus ours (a run id already in the log is refused).
--
-- Arguments: the lock key, the log, the new run, p_stale_after_us (the staleness window in
-- microseconds, saturated at the bigint maximum: "never stale"), p_clock (an injected "now", NULL
-- for the database clock), and the opening event's JSON around its seq and ts.
--
-- Reply rows: ('exists', NULL, NULL, NULL) when the run id already has events; ('held', holder,
-- NULL, NULL) when a fresh open run holds the log (the smallest run id, as agentdeck's loop over
-- runs sorted by id); otherwise one ('won', NULL, ts text of the opening event, NULL) row and one
-- ('overridden', run id, NULL, data) row per stale open run with its latest event, by run id.
--
-- Two looks, as the switchyard layout's (ADR 0348): without the lock, then under it. A claim that
-- a committed open run already defeats answers from the first look and takes no lock; only a
-- claim that found the log free queues for the lock and looks again. A lost claim writes nothing,
-- so its commit never waits for a WAL flush.
CREATE FUNCTION claim_start(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_stale_after_us BIGINT,
    p_clock TIMESTAMPTZ, p_head TEXT, p_mid TEXT, p_tail TEXT
) RETURNS TABLE (outcome TEXT, run_id TEXT, ts_text TEXT, data TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_now TIMESTAMPTZ;
    v_holder TEXT;
BEGIN
    FOR v_locked IN 0..1 LOOP
        IF v_locked = 1 THEN
            PERFORM lock_log(p_key);
        END IF;
        v_now := COALESCE(p_clock, clock_timestamp());
        IF EXISTS (SELECT 1 FROM events AS e WHERE e.namespace = p_namespace
                   AND e.log_key = p_log_key AND e.run_id = p_run_id) THEN
            RETURN QUERY SELECT 'exists'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- Fresh: ts > now - stale_after, i.e. age < stale_after, in exact microseconds (no
        -- timestamp arithmetic that could leave the representable range).
        SELECT o.run_id INTO v_holder FROM open_runs(p_namespace, p_log_key) AS o
            WHERE extract(epoch FROM (v_now - o.last_ts)) * 1000000 < p_stale_after_us
            ORDER BY o.run_id LIMIT 1;
        IF v_holder IS NOT NULL THEN
            RETURN QUERY SELECT 'held'::TEXT, v_holder, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
    END LOOP;
    RETURN QUERY
        SELECT 'overridden'::TEXT, o.run_id, NULL::TEXT, CAST(o.data AS TEXT)
        FROM open_runs(p_namespace, p_log_key) AS o
        ORDER BY o.run_id;
    RETURN QUERY
        SELECT 'won'::TEXT, NULL::TEXT, a.ts_text, NULL::TEXT
        FROM append_events(p_key, p_namespace, p_log_key, p_run_id, p_clock, ARRAY[p_head],
                           p_mid, ARRAY[p_tail]) AS a;
END;
$$;
