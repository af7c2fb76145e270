-- A run's next seq is one backward seek of events_by_run, whatever the run's length (ADR 0391).
--
-- agentdeck computes it as MAX(seq) + 1, and migration 1 did the same. PostgreSQL answers a MAX
-- with one index seek only when the planner expects many rows under the run's key; on a table it
-- has not analyzed yet (a new schema, a fast-growing run before autovacuum's first ANALYZE) it
-- expects one and reads every index entry of the run, with a heap fetch each: an append to a run
-- of 4,661 events read all 4,661 entries (2–17 ms). ORDER BY seq DESC LIMIT 1 is a seek in
-- every plan.
--
-- claim_start also reads the log's open runs through open_run_tails, which PostgreSQL inlines,
-- instead of open_runs, and writes the opening event itself: a function with a SET clause is
-- never inlined, so each of its three calls was planned and run as a call of its own, and the
-- won claim's append_events took the lock a second time to find seq 0, which the claim already
-- knows under the lock. And a claim that finds the log locked waits for the lock's holder to end
-- and looks before it queues for the lock, so the claims one winner defeats answer together.
-- Arguments and replies of every function are as in migrations 1 and 2.

CREATE OR REPLACE FUNCTION append_events(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_clock TIMESTAMPTZ,
    p_heads TEXT[], p_mid TEXT, p_tails TEXT[]
) RETURNS TABLE (first_seq BIGINT, ts_text TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_first BIGINT;
    v_ts TEXT;
BEGIN
    PERFORM lock_log(p_key);
    v_ts := event_ts_text(COALESCE(p_clock, clock_timestamp()));
    SELECT e.seq + 1 INTO v_first FROM events AS e
        WHERE e.namespace = p_namespace AND e.log_key = p_log_key AND e.run_id = p_run_id
        ORDER BY e.seq DESC LIMIT 1;
    v_first := COALESCE(v_first, 0);
    INSERT INTO events (namespace, log_key, run_id, seq, data)
        SELECT p_namespace, p_log_key, p_run_id, v_first + b.n - 1,
               CAST(b.head || (v_first + b.n - 1) || p_mid || v_ts || b.tail AS jsonb)
        FROM unnest(p_heads, p_tails) WITH ORDINALITY AS b(head, tail, n);
    RETURN QUERY SELECT v_first, v_ts;
END;
$$;

CREATE OR REPLACE FUNCTION append_group(
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
        SELECT e.seq + 1 INTO v_first FROM events AS e
            WHERE e.namespace = p_namespace AND e.log_key = p_log_key AND e.run_id = p_runs[i]
            ORDER BY e.seq DESC LIMIT 1;
        v_first := COALESCE(v_first, 0);
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

-- The open runs of a log with their latest event (of any kind, the run's last sign of life):
-- event_runs' partial index, then one seek of events_by_run per open run. open_runs without its
-- SET clause: PostgreSQL inlines a SQL function like this one into the statement that calls it
-- (planned with that statement, no call of its own), and one with a SET clause never. Its tables
-- are the caller's schema, which claim_start's own SET clause makes this schema.
CREATE FUNCTION open_run_tails(p_namespace TEXT, p_log_key TEXT)
RETURNS TABLE (run_id TEXT, data JSONB)
LANGUAGE sql STABLE AS $$
    SELECT r.run_id, tail.data
    FROM event_runs AS r
    CROSS JOIN LATERAL (
        SELECT e.data FROM events AS e
        WHERE e.namespace = r.namespace AND e.log_key = r.log_key AND e.run_id = r.run_id
        ORDER BY e.seq DESC LIMIT 1
    ) AS tail
    WHERE r.namespace = p_namespace AND r.log_key = p_log_key
      AND r.status IN ('run.started', 'run.paused', 'run.resumed', 'run.interrupted')
$$;

-- claim_start: one look at the log (the run id taken? a fresh open run?) under its lock when no
-- one holds the lock; otherwise the claim waits for the holder to end and looks without the
-- lock, then, only if the log is still free, under it. Only a claim that finds the log free
-- under the lock writes. A look without the lock answers only from committed rows ('exists',
-- 'held'), which is a correct answer at the moment of that look (ADRs 0348, 0391).
CREATE OR REPLACE FUNCTION claim_start(
    p_key BIGINT, p_namespace TEXT, p_log_key TEXT, p_run_id TEXT, p_stale_after_us BIGINT,
    p_clock TIMESTAMPTZ, p_head TEXT, p_mid TEXT, p_tail TEXT
) RETURNS TABLE (outcome TEXT, run_id TEXT, ts_text TEXT, data TEXT)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_now TIMESTAMPTZ;
    v_holder TEXT;
    v_ts TEXT;
    -- Which look this is: 'waited' (without the lock, after its holder ended) or 'locked'.
    v_look TEXT := 'locked';
BEGIN
    IF NOT pg_try_advisory_xact_lock(p_key) THEN
        -- Another write holds the log, most often the claim that is about to win. Wait until it
        -- has ended, then look without the lock: the claims it defeats answer together from its
        -- committed run, instead of taking the lock one after another only to find that run.
        -- The wait takes the lock shared in a subtransaction that is then rolled back, which
        -- releases it at once (no error or cancel can leave it held on a pooled connection).
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(p_key);
            RAISE EXCEPTION USING ERRCODE = 'raise_exception';
        EXCEPTION WHEN raise_exception THEN
            NULL;
        END;
        v_look := 'waited';
    END IF;
    LOOP
        IF v_look = 'locked' THEN
            -- Reentrant when the try took it; lock_log also refuses a stronger isolation.
            PERFORM lock_log(p_key);
        END IF;
        v_now := COALESCE(p_clock, clock_timestamp());
        IF EXISTS (SELECT 1 FROM events AS e WHERE e.namespace = p_namespace
                   AND e.log_key = p_log_key AND e.run_id = p_run_id) THEN
            RETURN QUERY SELECT 'exists'::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- The smallest open run whose latest event is fresh: ts > now - stale_after, i.e. age <
        -- stale_after, in exact microseconds (no timestamp arithmetic that could leave the
        -- representable range).
        SELECT o.run_id INTO v_holder FROM open_run_tails(p_namespace, p_log_key) AS o
            WHERE extract(epoch FROM (v_now - CAST(o.data->>'ts' AS timestamptz))) * 1000000
                  < p_stale_after_us
            ORDER BY o.run_id LIMIT 1;
        IF v_holder IS NOT NULL THEN
            RETURN QUERY SELECT 'held'::TEXT, v_holder, NULL::TEXT, NULL::TEXT;
            RETURN;
        END IF;
        -- Free at a look under the lock: the log is this claim's. Free after the wait: look
        -- again under the lock.
        EXIT WHEN v_look = 'locked';
        v_look := 'locked';
    END LOOP;
    RETURN QUERY
        SELECT 'overridden'::TEXT, o.run_id, NULL::TEXT, CAST(o.data AS TEXT)
        FROM open_run_tails(p_namespace, p_log_key) AS o
        ORDER BY o.run_id;
    -- Under the lock the run has no event (the look above): its opening event is seq 0.
    v_ts := event_ts_text(v_now);
    INSERT INTO events (namespace, log_key, run_id, seq, data)
        VALUES (p_namespace, p_log_key, p_run_id, 0,
                CAST(p_head || 0 || p_mid || v_ts || p_tail AS jsonb));
    RETURN QUERY SELECT 'won'::TEXT, NULL::TEXT, v_ts, NULL::TEXT;
END;
$$;
