-- The queue's multi-step moves, as functions: one round trip, one transaction each (ADR 0231).
-- Each pins the schema's search_path (as at migration), so a caller's cannot redirect its tables.
-- Moves that make a task ready wake blocked reservers with a NOTIFY (ADR 0232), sent at commit,
-- but only when some reserver of that queue said it is waiting (ADR 0235).

-- Who waits on which queue: a lease per (queue's digest, backend), renewed while its
-- reservers wait. Unlogged: leases are worth nothing after a crash (reservers re-register).
CREATE UNLOGGED TABLE IF NOT EXISTS fleet_waiters (
    queue_key text NOT NULL,
    waiter text NOT NULL,
    until double precision NOT NULL,
    PRIMARY KEY (queue_key, waiter)
);

-- fleet_wake(channel, payload) -> true
-- NOTIFY `channel` with `payload` (`q:` or `a:` and a queue's digest: wake one or all of its
-- reservers) if a reserver of that queue holds a live lease; true either way, so statements can
-- call it in a WHERE or a count. PostgreSQL serialises the commits of notifying transactions, so
-- a busy queue, whose reservers find work without waiting, notifies nobody. (Pushes, the hot
-- path, notify from a transaction of their own instead: ADR 0235.)
CREATE OR REPLACE FUNCTION fleet_wake(channel text, payload text) RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM fleet_waiters w
               WHERE w.queue_key = substr(payload, 3) AND w.until > fleet_now()) THEN
        PERFORM pg_notify(channel, payload);
    END IF;
    RETURN true;
END $$;

-- fleet_reserve(q, receipt, visibility) -> at most one row (tier, body, attempts, due)
-- Moves the queue's due retries to the end of their tiers, in due order, then takes the head of
-- the best tier (high, normal, low; lowest `pos` first) skipping rows other reservers hold, and
-- registers it under `receipt` until now + `visibility` seconds with one more attempt.
CREATE OR REPLACE FUNCTION fleet_reserve(q text, receipt text, visibility double precision)
RETURNS TABLE (o_tier smallint, o_body bytea, o_attempts integer, o_due double precision)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
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
    END LOOP;
    RETURN QUERY
    UPDATE fleet_tasks t
    SET state = 'reserved', receipt = fleet_reserve.receipt, attempts = t.attempts + 1,
        due = fleet_now() + visibility
    WHERE t.id = (
        SELECT h.id FROM fleet_tasks h
        WHERE h.name = q AND h.state = 'ready'
        ORDER BY h.tier, h.pos
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    RETURNING t.tier, t.body, t.attempts, t.due;
END $$;

-- fleet_sweep(q, channel, payload) -> how many reservations were returned
-- Returns every lapsed reservation of the queue to the end of its tier, oldest deadline first,
-- attempts kept; rows an ack or another sweeper holds are skipped (theirs to decide). Wakes
-- reservers when it returned any.
CREATE OR REPLACE FUNCTION fleet_sweep(q text, channel text, payload text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    n bigint := 0;
BEGIN
    FOR r IN
        SELECT t.id FROM fleet_tasks t
        WHERE t.name = q AND t.state = 'reserved' AND t.due <= fleet_now()
        ORDER BY t.due, t.id
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE fleet_tasks
        SET state = 'ready', receipt = NULL, due = NULL, pos = nextval('fleet_task_pos')
        WHERE id = r.id;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN n;
END $$;

-- fleet_requeue(q, n, tier, channel, payload) -> how many dead letters moved
-- Moves up to `n` dead letters, oldest first, to the end of `tier` in the same order, with a
-- fresh attempt count. Wakes reservers when it moved any.
CREATE OR REPLACE FUNCTION fleet_requeue(q text, n bigint, to_tier smallint, channel text, payload text)
RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    moved bigint := 0;
BEGIN
    FOR r IN
        SELECT t.id FROM fleet_tasks t
        WHERE t.name = q AND t.state = 'dead'
        ORDER BY t.pos
        LIMIT n
        FOR UPDATE SKIP LOCKED
    LOOP
        UPDATE fleet_tasks
        SET state = 'ready', tier = to_tier, attempts = 0, pos = nextval('fleet_task_pos')
        WHERE id = r.id;
        moved := moved + 1;
    END LOOP;
    IF moved > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN moved;
END $$;
