-- append_if_open in one round trip (ADR 0365): the run's status is checked and the batch written
-- in one call, under the run's row lock, so no event is ever stored after a terminal event by it.
--
-- Arguments as the APPEND statement's (src/sql.rs): the run (p_namespace, p_log_key, p_run_id),
-- the batch's size (p_n), an injected "now" (p_clock, NULL for the database clock), the batch's
-- last lifecycle kind (p_life, NULL for none), and each event's JSON around its seq and ts:
-- p_heads[i] || seq || p_mid || event_ts_text(ts) || p_tails[i], of kind p_kinds[i].
--
-- Reply: one row, (first seq, ts text, the run's latest lifecycle kind before the call): the
-- first two are NULL when the run is not open and nothing was written. The kind is '' for a run
-- with no lifecycle event (no `runs` row, or a row whose status is NULL).
CREATE FUNCTION append_if_open(
    p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_n BIGINT, p_clock TIMESTAMPTZ,
    p_life TEXT, p_heads TEXT[], p_mid TEXT, p_tails TEXT[], p_kinds TEXT[]
) RETURNS TABLE (first_seq BIGINT, ts_text TEXT, status_before TEXT)
-- The schema's own tables, whatever the caller's search_path (the migration sets it).
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_status TEXT;
    v_first BIGINT;
    v_now TIMESTAMPTZ;
BEGIN
    -- The row lock every write of the run takes (append's upsert, resume's update, a claim's
    -- insert): this waits for a write in flight, then reads the row as that write committed it.
    SELECT r.status INTO v_status FROM runs AS r
        WHERE r.namespace = p_namespace AND r.log_key = p_log_key AND r.run_id = p_run_id
        FOR UPDATE;
    IF v_status IS NULL
       OR v_status NOT IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted') THEN
        -- Nothing written but the lock: the answer needs no durable commit (as a lost claim's,
        -- ADR 0348).
        PERFORM set_config('synchronous_commit', 'off', true);
        RETURN QUERY SELECT NULL::BIGINT, NULL::TEXT, COALESCE(v_status, '');
        RETURN;
    END IF;
    -- Read after the lock, so ts never goes back within a run.
    v_now := COALESCE(p_clock, clock_timestamp());
    UPDATE runs AS r
        SET next_seq = r.next_seq + p_n,
            last_ts = v_now,
            status = COALESCE(p_life, r.status)
        WHERE r.namespace = p_namespace AND r.log_key = p_log_key AND r.run_id = p_run_id
        RETURNING r.next_seq - p_n INTO v_first;
    INSERT INTO events (namespace, log_key, run_id, seq, kind, data)
        SELECT p_namespace, p_log_key, p_run_id, v_first + b.n - 1, b.kind,
               b.head || (v_first + b.n - 1) || p_mid || event_ts_text(v_now) || b.tail
        FROM unnest(p_heads, p_tails, p_kinds) WITH ORDINALITY AS b(head, tail, kind, n);
    RETURN QUERY SELECT v_first, event_ts_text(v_now), v_status;
END;
$$;
