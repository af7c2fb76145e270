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

-- 20800005's fleet_reserve_many keeps its body under a name of its own, and fleet_reserve_many
-- becomes the call that turns the flush wait off for the calling transaction and runs it: same
-- arguments and rows, and the body is not restated here. Callers that name fleet_reserve_many
-- (the adapter, fleet_reserve of 20800003) reach the new function; PostgreSQL drops their
-- cached plans when the old one is renamed.
ALTER FUNCTION fleet_reserve_many(text, text[], double precision)
    RENAME TO fleet_reserve_many_inner;

CREATE FUNCTION fleet_reserve_many(q text, receipts text[], visibility double precision)
RETURNS TABLE (o_receipt text, o_tier smallint, o_body bytea, o_attempts integer, o_due double precision)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- See the top of this file: the reservation's commit need not wait for the flush.
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY SELECT * FROM fleet_reserve_many_inner(q, receipts, visibility);
END $$;
