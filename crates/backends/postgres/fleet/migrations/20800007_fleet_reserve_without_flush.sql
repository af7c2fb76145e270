-- A reservation commits without waiting for the WAL flush (ADR 0393).
--
-- A consumer that prefetches has one `fleet_reserve_many` in flight at a time, and every call
-- waited for its commit's flush before the tasks reached the consumer: sampled during a drain on
-- a durable server, the reserving backend spent most of its time in `WALWrite` and `WALSync`
-- waits, so the drain ran at the disk's flush latency rather than at the server's speed.
--
-- A reservation's commit need not be durable for the queue's guarantees. WAL is flushed in
-- order, so the first durable commit after it (an ack, a nack, a push, an extend of any task)
-- makes it durable too, and the server's WAL writer flushes it within a few hundred
-- milliseconds anyway. What a server crash in that window can lose is only reservations that
-- nothing durable was built on yet: their tasks are waiting again, their attempt not counted,
-- and the worker that holds one is answered `false` (receipt not current) when it acks or
-- extends it, as when its reservation lapsed. The task runs again: at-least-once delivery
-- holds. Due retries the reserve moved to their tiers are moved again by the next reserve, and
-- a rate limit's tokens spent in that window come back. A crash of a worker (not of the
-- server) changes nothing: the reservation is in the server's memory and is flushed with the
-- next WAL write.
--
-- `set_config(..., true)` lasts until the end of the calling transaction (the function's own
-- `SET search_path` does not scope it: it names another setting), and a reserve is a
-- transaction of its own (the adapter sends it as one statement). The only other caller is the
-- one-task `fleet_reserve` of 20800003, which a backend of an older release sends as a
-- statement of its own too.

-- fleet_reserve_many as in 20800005, committing without waiting for the flush.
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
    -- See the top of this file: the reservation's commit need not wait for the flush.
    PERFORM set_config('synchronous_commit', 'off', true);
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
            due = fleet_now() + visibility, progress = NULL, started_at = fleet_now()
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

