-- switchyard's event store on PostgreSQL (ADR 0222). Every object lives in the adapter's schema
-- (the connection's search_path); the migration runner records this file in store_migrations.

-- The run log. `data` is the event's JSON exactly as Event::to_json writes it (TEXT, not JSONB:
-- JSONB would reorder keys and drop the bytes every other adapter stores). `kind` is the event's
-- kind, so nothing of ours ever parses `data` in SQL.
CREATE TABLE events (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    CONSTRAINT events_by_run UNIQUE (namespace, log_key, run_id, seq)
);
CREATE INDEX events_by_log ON events (namespace, log_key, id);

-- One row per run: its next seq (the row lock that orders concurrent appenders), the ts of its
-- latest event (freshness for claims) and the kind of its latest lifecycle event (NULL while
-- pending). Every write of the store updates it in the statement that writes the events.
CREATE TABLE runs (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    next_seq BIGINT NOT NULL,
    last_ts TIMESTAMPTZ NOT NULL,
    status TEXT,
    PRIMARY KEY (namespace, log_key, run_id)
);
-- The open runs of every log: a claim reads one range of this partial index, however long the
-- log's history.
CREATE INDEX runs_open ON runs (namespace, log_key, run_id)
    WHERE status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted');
-- list_runs: the runs of a namespace that have a lifecycle event.
CREATE INDEX runs_listed ON runs (namespace) WHERE status IS NOT NULL;

-- One row per log that was ever claimed: claim_start locks it (SELECT … FOR UPDATE), so claims
-- on one log take turns and claims on different logs never wait for each other (ADR 0223).
CREATE TABLE logs (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    PRIMARY KEY (namespace, log_key)
);

-- A timestamp as Event::to_json writes `ts`: UTC, 'Z', and the 6-digit fraction left out when it
-- is zero. The store stamps with the database clock and splices this text into `data`.
CREATE FUNCTION event_ts_text(ts TIMESTAMPTZ) RETURNS TEXT
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
        || CASE WHEN to_char(ts AT TIME ZONE 'UTC', 'US') = '000000' THEN ''
                ELSE '.' || to_char(ts AT TIME ZONE 'UTC', 'US') END
        || 'Z'
$$;

-- claim_start in one round trip (ADR 0223).
--
-- Arguments: the log (p_namespace, p_log_key), the new run (p_run_id), p_stale_after_us (the
-- staleness window in microseconds, saturated at the bigint maximum: "never stale"), p_clock (an
-- injected "now", NULL for the database clock), and the opening event's JSON around its seq and
-- ts: p_head || '0' || p_mid || event_ts_text(now) || p_tail.
--
-- Reply rows: ('exists', NULL, NULL, NULL) when the run id already has events; ('held', holder,
-- NULL, NULL) when a fresh open run holds the log (the smallest run id); otherwise one ('won',
-- NULL, ts text of the opening event, NULL) row and one ('overridden', run id, NULL, data) row
-- per stale open run with its latest event, ordered by run id.
CREATE FUNCTION claim_start(
    p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_stale_after_us BIGINT,
    p_clock TIMESTAMPTZ, p_head TEXT, p_mid TEXT, p_tail TEXT
) RETURNS TABLE (outcome TEXT, run_id TEXT, ts_text TEXT, data TEXT)
-- The schema's own tables, whatever the caller's search_path (the migration sets it).
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_now TIMESTAMPTZ;
    v_holder TEXT;
BEGIN
    INSERT INTO logs AS l (namespace, log_key) VALUES (p_namespace, p_log_key)
        ON CONFLICT DO NOTHING;
    PERFORM 1 FROM logs AS l
        WHERE l.namespace = p_namespace AND l.log_key = p_log_key FOR UPDATE;
    -- Read after the lock: the previous claim's writes are visible to this statement.
    v_now := COALESCE(p_clock, clock_timestamp());
    IF EXISTS (SELECT 1 FROM runs AS r WHERE r.namespace = p_namespace
               AND r.log_key = p_log_key AND r.run_id = p_run_id) THEN
        RETURN QUERY SELECT 'exists'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
        RETURN;
    END IF;
    -- Fresh: ts > now - stale_after, i.e. age < stale_after, in exact microseconds (no
    -- timestamp arithmetic that could leave the representable range).
    SELECT r.run_id INTO v_holder FROM runs AS r
        WHERE r.namespace = p_namespace AND r.log_key = p_log_key
          AND r.status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted')
          AND extract(epoch FROM (v_now - r.last_ts)) * 1000000 < p_stale_after_us
        ORDER BY r.run_id LIMIT 1;
    IF v_holder IS NOT NULL THEN
        RETURN QUERY SELECT 'held'::TEXT, v_holder, NULL::TEXT, NULL::TEXT;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT 'overridden'::TEXT, r.run_id, NULL::TEXT, tail.data
        FROM runs AS r
        CROSS JOIN LATERAL (
            SELECT e.data FROM events AS e
            WHERE e.namespace = r.namespace AND e.log_key = r.log_key AND e.run_id = r.run_id
            ORDER BY e.seq DESC LIMIT 1
        ) AS tail
        WHERE r.namespace = p_namespace AND r.log_key = p_log_key
          AND r.status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted')
        ORDER BY r.run_id;
    INSERT INTO runs (namespace, log_key, run_id, next_seq, last_ts, status)
        VALUES (p_namespace, p_log_key, p_run_id, 1, v_now, 'run.started');
    INSERT INTO events (namespace, log_key, run_id, seq, kind, data)
        VALUES (p_namespace, p_log_key, p_run_id, 0, 'run.started',
                p_head || '0' || p_mid || event_ts_text(v_now) || p_tail);
    RETURN QUERY SELECT 'won'::TEXT, NULL::TEXT, event_ts_text(v_now), NULL::TEXT;
END;
$$;
