-- Appends of several runs of one log in one call under the log's lock (ADR 0386): concurrent
-- appends to one log (the runs of one session, the appenders of one run) take agentdeck's lock
-- once and commit once, instead of taking turns through a lock and a commit each.
--
-- Each op is what its own append_events (unconditional) or append_if_open (conditional) call
-- would do, in the order given: an op sees the ops before it (the seqs they took, the lifecycle
-- kinds event_runs' trigger recorded). Every op of a call is stamped with one reading of the
-- clock, taken after the lock.
--
-- Arguments: the lock key, the log (p_namespace, p_log_key), an injected "now" (p_clock, NULL for
-- the database clock); per op, in order: its run (p_runs), whether it is conditional
-- (p_guarded), its middle JSON part (p_mids), and where its events are in the event arrays
-- (p_starts, 1-based, and p_counts); per event: its JSON around seq and ts (p_heads, p_tails),
-- stored as p_heads[i] || seq || mid || event_ts_text(ts) || p_tails[i].
-- Reply: one row per op, in order: (op, first seq, ts text, status before). A written op has its
-- first seq and ts; status before is the run's latest lifecycle kind for a conditional op (as
-- append_if_open replies) and NULL for an unconditional one. A conditional op whose run is not
-- open writes nothing and replies (op, NULL, NULL, latest lifecycle kind or '').
CREATE FUNCTION append_group(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_clock TIMESTAMPTZ,
    p_runs TEXT[], p_guarded BOOLEAN[], p_mids TEXT[], p_starts INTEGER[], p_counts INTEGER[],
    p_heads TEXT[], p_tails TEXT[]
) RETURNS TABLE (op INTEGER, first_seq BIGINT, ts_text TEXT, status_before TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_ts TEXT;
    v_first BIGINT;
    v_status TEXT;
    v_from INTEGER;
    v_to INTEGER;
BEGIN
    PERFORM lock_log(p_key);
    v_ts := event_ts_text(COALESCE(p_clock, clock_timestamp()));
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        v_status := NULL;
        IF p_guarded[i] THEN
            SELECT r.status INTO v_status FROM event_runs AS r
                WHERE r.namespace = p_namespace AND r.log_key = p_log_key
                  AND r.run_id = p_runs[i];
            IF v_status IS NULL
               OR v_status NOT IN ('run.started', 'run.paused', 'run.resumed',
                                   'run.interrupted') THEN
                op := i;
                first_seq := NULL;
                ts_text := NULL;
                status_before := COALESCE(v_status, '');
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        SELECT COALESCE(max(e.seq) + 1, 0) INTO v_first FROM events AS e
            WHERE e.namespace = p_namespace AND e.log_key = p_log_key AND e.run_id = p_runs[i];
        v_from := p_starts[i];
        v_to := p_starts[i] + p_counts[i] - 1;
        INSERT INTO events (namespace, log_key, run_id, seq, data)
            SELECT p_namespace, p_log_key, p_runs[i], v_first + b.n - 1,
                   CAST(b.head || (v_first + b.n - 1) || p_mids[i] || v_ts || b.tail AS jsonb)
            FROM unnest(p_heads[v_from:v_to], p_tails[v_from:v_to]) WITH ORDINALITY
                AS b(head, tail, n);
        op := i;
        first_seq := v_first;
        ts_text := v_ts;
        status_before := v_status;
        RETURN NEXT;
    END LOOP;
END;
$$;
