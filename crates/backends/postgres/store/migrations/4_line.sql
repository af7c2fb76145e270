-- A session's line of waiting runs (ADR 0394, guarantee `line.order`): runs whose claim asked to
-- wait for the session, in the order they joined. Beside the log, never in it: no reader of
-- `events` sees a waiting run, which has no event and holds nothing.
--
-- `entry` is QueuedRun::to_json's text (the run, its origin, the claim's stale_after and its
-- opening payload). `pos` only orders the line: it grows by one per push and leaves gaps where
-- runs went out, so a run's place is counted, not read. The primary key serves the line's reads
-- in order and the push's look at its end; the unique run id serves the push's "already
-- waiting?" and line_remove.
CREATE TABLE switchyard_line (
    namespace TEXT NOT NULL,
    log_key TEXT NOT NULL,
    pos BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (namespace, log_key, pos),
    UNIQUE (namespace, log_key, run_id)
);

-- Puts a run at the end of its log's line in one call, so concurrent pushes each get a distinct
-- place in the order they ran, and none is refused for having raced another.
--
-- The pushes of one log take turns on a transaction-scoped advisory lock (p_key, computed by the
-- caller from the log), held until the call commits: the log's claims and appends, which lock
-- rows of `logs` and `runs`, never wait for it. Under READ COMMITTED each statement after the
-- lock reads what the previous holder committed, so the look at the line and the insert see
-- every earlier push. Under a stronger isolation they would read a snapshot taken before the
-- lock and two pushes could take one place, so any other level is refused with what to set.
-- Removals need no lock: taking a run out never moves another, and a push's new entry lands
-- after whatever is left.
--
-- Arguments: the lock key, the log (p_namespace, p_log_key), the run (p_run_id), its entry, and
-- the most runs a line holds (p_max, MAX_LINE: the bound stays in the Rust code).
-- Reply: one row, ('exists', NULL) when the run already waits, ('full', NULL) when the line holds
-- p_max runs (nothing written either way), else ('pushed', its place, 1 for the first).
CREATE FUNCTION line_push(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_entry TEXT, p_max BIGINT
) RETURNS TABLE (outcome TEXT, place BIGINT)
-- The schema's own table, whatever the caller's search_path (the migration sets it).
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_count BIGINT;
    v_last BIGINT;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'the event store needs READ COMMITTED transactions, and this one is %',
            current_setting('transaction_isolation')
            USING HINT = 'set default_transaction_isolation to ''read committed'' for the '
                         'store''s user (ALTER ROLE … SET default_transaction_isolation)';
    END IF;
    PERFORM pg_advisory_xact_lock(p_key);
    IF EXISTS (SELECT 1 FROM switchyard_line AS l WHERE l.namespace = p_namespace
               AND l.log_key = p_log_key AND l.run_id = p_run_id) THEN
        -- Nothing written but the lock: the answer needs no durable commit (ADR 0348).
        PERFORM set_config('synchronous_commit', 'off', true);
        RETURN QUERY SELECT 'exists'::TEXT, NULL::BIGINT;
        RETURN;
    END IF;
    SELECT count(*) INTO v_count FROM switchyard_line AS l
        WHERE l.namespace = p_namespace AND l.log_key = p_log_key;
    IF v_count >= p_max THEN
        PERFORM set_config('synchronous_commit', 'off', true);
        RETURN QUERY SELECT 'full'::TEXT, NULL::BIGINT;
        RETURN;
    END IF;
    -- One backward seek of the primary key, whatever the planner's statistics.
    SELECT l.pos INTO v_last FROM switchyard_line AS l
        WHERE l.namespace = p_namespace AND l.log_key = p_log_key
        ORDER BY l.pos DESC LIMIT 1;
    INSERT INTO switchyard_line (namespace, log_key, pos, run_id, entry)
        VALUES (p_namespace, p_log_key, COALESCE(v_last, 0) + 1, p_run_id, p_entry);
    RETURN QUERY SELECT 'pushed'::TEXT, v_count + 1;
END;
$$;
