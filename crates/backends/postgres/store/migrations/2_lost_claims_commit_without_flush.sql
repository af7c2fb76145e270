-- A lost claim commits without waiting for the WAL flush, and a claim that a committed open
-- run defeats takes no lock at all (ADR 0348).
--
-- claim_start locks the log's row (ADR 0223), and a row lock gives the transaction an id, so
-- every claim used to commit with a WAL flush, lost ones included; claims of one log hold the
-- lock through that flush one after another, and 64 contenders on one session waited for 64
-- flushes in a row. A claim that finds the run id taken ('exists') or the log held ('held')
-- wrote nothing but the lock (and, at worst, the log's lock row, which the next claim creates
-- again): its commit need not be durable, so it sets `synchronous_commit` off for its own
-- transaction and hands the lock on at once. Its answer rests only on rows that were durable
-- before it could see them. A won claim commits as before.
--
-- Claims that arrive together on a new log all wait for the first one's lock row, then each
-- used to take the row lock in turn only to find the first claim's run. A first look without
-- the lock answers them at once ('held' rests on a committed run, which is a correct answer at
-- the moment of that look); a claim that finds the log free looks again under the lock.
--
-- Same arguments and reply rows as in 1_events.sql.
CREATE OR REPLACE FUNCTION claim_start(
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
    -- Waits for a claim that is creating the log's lock row right now (a first claim of the log),
    -- and does nothing once it has committed.
    INSERT INTO logs AS l (namespace, log_key) VALUES (p_namespace, p_log_key)
        ON CONFLICT DO NOTHING;
    -- Two looks: without the lock, then under it. A claim that a committed open run already
    -- defeats returns from the first look, without a lock; only a claim that found the log free
    -- queues for the lock and looks again, on the writes of the claims before it.
    FOR v_locked IN 0..1 LOOP
        IF v_locked = 1 THEN
            PERFORM 1 FROM logs AS l
                WHERE l.namespace = p_namespace AND l.log_key = p_log_key FOR UPDATE;
        END IF;
        -- Each statement reads what had committed when it began: under the lock, the writes of
        -- every claim that held it before.
        v_now := COALESCE(p_clock, clock_timestamp());
        IF EXISTS (SELECT 1 FROM runs AS r WHERE r.namespace = p_namespace
                   AND r.log_key = p_log_key AND r.run_id = p_run_id) THEN
            PERFORM set_config('synchronous_commit', 'off', true);
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
            PERFORM set_config('synchronous_commit', 'off', true);
            RETURN QUERY SELECT 'held'::TEXT, v_holder, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
    END LOOP;
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
