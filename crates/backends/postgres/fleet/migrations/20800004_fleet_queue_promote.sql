-- Promoting due scheduled tasks without reserving anything (ADR 0353): the reserve's move of due
-- retries and delayed tasks becomes a function of its own, `fleet_move_due`, which
-- `fleet_reserve_many` (redefined here, otherwise as in 20800003) and `fleet_promote_due` both
-- call, so the move is written once.

-- fleet_move_due(q) -> how many moved
-- Moves the queue's due scheduled tasks (retries and delayed submits) to the end of their tiers,
-- in due order, attempts kept. Rows another transaction holds are skipped: a concurrent reserve
-- or promoter moving them, whose move counts for it.
CREATE OR REPLACE FUNCTION fleet_move_due(q text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    n bigint := 0;
BEGIN
    FOR r IN
        SELECT t.id FROM fleet_tasks t
        WHERE t.name = q AND t.state = 'scheduled' AND t.due <= fleet_now()
        ORDER BY t.due, t.id
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE fleet_tasks
        SET state = 'ready', due = NULL, pos = nextval('fleet_task_pos')
        WHERE id = r.id;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- fleet_promote_due(q, channel, payload) -> how many moved
-- `fleet_move_due` without reserving, unless the queue is paused (its due tasks then stay
-- scheduled until the resume, as a paused reserve leaves them). Wakes reservers when it moved
-- any.
CREATE OR REPLACE FUNCTION fleet_promote_due(q text, channel text, payload text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM fleet_queue_flow f WHERE f.name = q AND f.paused) THEN
        RETURN 0;
    END IF;
    n := fleet_move_due(q);
    IF n > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN n;
END $$;

-- fleet_reserve_many as in 20800003, its move of due tasks now `fleet_move_due`.
CREATE OR REPLACE FUNCTION fleet_reserve_many(q text, receipts text[], visibility double precision)
RETURNS TABLE (o_receipt text, o_tier smallint, o_body bytea, o_attempts integer, o_due double precision)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    f record;
    n integer := coalesce(cardinality(receipts), 0);
    limited boolean := false;
    avail double precision;
    got integer;
BEGIN
    SELECT * INTO f FROM fleet_queue_flow WHERE name = q;
    IF FOUND THEN
        IF f.paused THEN
            RETURN;
        END IF;
        IF f.rate_max IS NOT NULL THEN
            -- Read again under the row lock: the bucket another reserve just spent from.
            SELECT * INTO f FROM fleet_queue_flow WHERE name = q FOR UPDATE;
            IF FOUND AND f.paused THEN
                RETURN;
            END IF;
            IF FOUND AND f.rate_max IS NOT NULL THEN
                limited := true;
                avail := fleet_tokens(f.tokens, f.refilled_at, f.rate_max, f.rate_per_ms, fleet_now());
                -- A hair of slack: a refill of exactly one token may come out a rounding short.
                n := least(n::double precision, floor(avail + 1e-9))::integer;
            END IF;
        END IF;
    END IF;
    IF n <= 0 THEN
        RETURN;
    END IF;
    PERFORM fleet_move_due(q);
    RETURN QUERY
    WITH heads AS (
        SELECT h.id, row_number() OVER (ORDER BY h.tier, h.pos) AS k
        FROM (
            SELECT x.id, x.tier, x.pos FROM fleet_tasks x
            WHERE x.name = q AND x.state = 'ready'
            ORDER BY x.tier, x.pos
            LIMIT n
            FOR UPDATE SKIP LOCKED
        ) h
    ), taken AS (
        UPDATE fleet_tasks t
        SET state = 'reserved', receipt = receipts[heads.k::integer], attempts = t.attempts + 1,
            due = fleet_now() + visibility, progress = NULL
        FROM heads WHERE t.id = heads.id
        RETURNING heads.k, t.receipt, t.tier, t.body, t.attempts, t.due
    )
    SELECT taken.receipt, taken.tier, taken.body, taken.attempts, taken.due
    FROM taken ORDER BY taken.k;
    IF limited THEN
        GET DIAGNOSTICS got = ROW_COUNT;
        UPDATE fleet_queue_flow
        SET tokens = avail - got, refilled_at = greatest(refilled_at, fleet_now())
        WHERE name = q;
    END IF;
END $$;
