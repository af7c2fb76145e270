-- Control of a task (ADR 0380, section 7): the `fleet_tasks` row already is the task (ADR 0231),
-- so it becomes the task's record. A row with a `task_id` (a body submitted through the port with
-- an id) is kept after its end, in state `completed`, `failed` or `cancelled`, until the queue's
-- retention removes it; a row without one is deleted at its end as before. The state names
-- `ready` and `reserved` stay (the port calls them `waiting` and `running`).
--
-- Each end appends one event to `fleet_task_events` under the queue's next `seq`, drawn from
-- `fleet_queue_flow.event_seq` by the ending transaction as its last write: the flow row stays
-- locked until that transaction commits, so the events of one queue commit in `seq` order and a
-- reader at cursor N never later sees an event below N appear. The same row keeps the queue's
-- retention, its end counts, how many finished records each retention bucket holds (so a trim
-- by count counts no rows) and the last event a trim removed (`trimmed_through`, for exact gap
-- detection). It is upserted: before this, a queue had a flow row only while paused or limited.

ALTER TABLE fleet_tasks
    ADD COLUMN IF NOT EXISTS task_id text,
    ADD COLUMN IF NOT EXISTS max_attempts integer,
    ADD COLUMN IF NOT EXISTS submitted_at double precision,
    ADD COLUMN IF NOT EXISTS started_at double precision,
    ADD COLUMN IF NOT EXISTS finished_at double precision,
    ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS last_error text,
    ADD COLUMN IF NOT EXISTS result bytea;

ALTER TABLE fleet_tasks DROP CONSTRAINT IF EXISTS fleet_tasks_state_check;
ALTER TABLE fleet_tasks ADD CONSTRAINT fleet_tasks_state_check
    CHECK (state IN ('ready', 'reserved', 'scheduled', 'dead', 'completed', 'failed', 'cancelled'));

-- An id is unique in its queue while its record exists (ADR 0380, section 1); a violation is the
-- port's `AlreadyExists`.
CREATE UNIQUE INDEX IF NOT EXISTS fleet_tasks_task_id ON fleet_tasks (name, task_id)
    WHERE task_id IS NOT NULL;
-- The two retention buckets, oldest end first: `completed`, and `failed` with `cancelled`.
CREATE INDEX IF NOT EXISTS fleet_tasks_done_ok ON fleet_tasks (name, finished_at, id)
    WHERE state = 'completed';
CREATE INDEX IF NOT EXISTS fleet_tasks_done_bad ON fleet_tasks (name, finished_at, id)
    WHERE state IN ('failed', 'cancelled');

CREATE TABLE IF NOT EXISTS fleet_task_events (
    name text NOT NULL,
    seq bigint NOT NULL,
    task_id text NOT NULL,
    state text NOT NULL,
    attempt integer NOT NULL,
    at double precision NOT NULL,
    error text,
    result bytea,
    result_size bigint NOT NULL,
    PRIMARY KEY (name, seq)
);

-- Retention per queue (NULL: the default of `Retention::default()`), ends counted per kind,
-- finished records kept per bucket, the last event trimmed, the last event appended.
ALTER TABLE fleet_queue_flow
    ADD COLUMN IF NOT EXISTS ok_n bigint,
    ADD COLUMN IF NOT EXISTS ok_ms bigint,
    ADD COLUMN IF NOT EXISTS bad_n bigint,
    ADD COLUMN IF NOT EXISTS bad_ms bigint,
    ADD COLUMN IF NOT EXISTS ev_n bigint,
    ADD COLUMN IF NOT EXISTS ev_ms bigint,
    ADD COLUMN IF NOT EXISTS kept_ok bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS kept_bad bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS trimmed_through bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS event_seq bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS completed bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS failed bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS dead bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS cancelled bigint NOT NULL DEFAULT 0;

-- fleet_events_key(q) -> the key under which readers of queue q's end events lease a wake-up in
-- `fleet_waiters`, and the tail of their notification payload `t:<key>`: `ev` and the queue's
-- digest (as the adapter computes it), so it never equals a queue's own key.
CREATE OR REPLACE FUNCTION fleet_events_key(q text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'ev' || encode(substring(sha256(convert_to(q, 'UTF8')) FROM 1 FOR 16), 'hex')
$$;

-- fleet_trim_bucket(q, ok, lim, excess) -> how many finished records it removed
-- Removes up to `lim` of the oldest finished records of queue q in one retention bucket
-- (`completed` when `ok`, else `failed` and `cancelled`): the `excess` oldest (past the bucket's
-- count) and those ended before the bucket's age. Candidates are chosen without locks and then
-- locked, skipping rows another transaction holds (a cancel reading them): the next trim takes
-- them. The caller keeps the bucket's kept count.
CREATE OR REPLACE FUNCTION fleet_trim_bucket(q text, ok boolean, lim bigint, excess bigint, age_ms bigint)
RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    d bigint;
    cutoff double precision := fleet_now() - age_ms / 1000.0;
BEGIN
    IF lim <= 0 THEN
        RETURN 0;
    END IF;
    IF ok THEN
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state = 'completed'
                    ORDER BY t.finished_at, t.id LIMIT lim
                ) c
                WHERE c.k <= excess OR c.finished_at <= cutoff)
              AND x.state = 'completed'
            FOR UPDATE SKIP LOCKED);
    ELSE
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state IN ('failed', 'cancelled')
                    ORDER BY t.finished_at, t.id LIMIT lim
                ) c
                WHERE c.k <= excess OR c.finished_at <= cutoff)
              AND x.state IN ('failed', 'cancelled')
            FOR UPDATE SKIP LOCKED);
    END IF;
    GET DIAGNOSTICS d = ROW_COUNT;
    RETURN d;
END $$;

-- fleet_record_ends(q, ids, channel)
-- The rows `ids` of queue q were just set to an end (`completed`, `failed`, `dead` or
-- `cancelled`, `finished_at` set) in this transaction: `fleet_note_ends` of what they hold, in
-- the order of `ids`.
CREATE OR REPLACE FUNCTION fleet_record_ends(q text, ids bigint[], channel text) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    e record;
BEGIN
    SELECT array_agg(t.task_id ORDER BY x.o) AS tids,
           array_agg(t.state ORDER BY x.o) AS states,
           array_agg(t.attempts ORDER BY x.o) AS attempts,
           array_agg(t.finished_at ORDER BY x.o) AS ats,
           array_agg(t.last_error ORDER BY x.o) AS errors,
           array_agg(t.result ORDER BY x.o) AS results
    INTO e
    FROM unnest(ids) WITH ORDINALITY AS x(id, o)
    JOIN fleet_tasks t ON t.id = x.id
    WHERE t.state IN ('completed', 'failed', 'dead', 'cancelled');
    IF e.tids IS NOT NULL THEN
        PERFORM fleet_note_ends(q, e.tids, e.states, e.attempts, e.ats, e.errors, e.results,
                                channel);
    END IF;
END $$;

-- fleet_note_ends(q, task_ids, states, attempts, ats, errors, results, channel)
-- Tasks of queue q just ended in this transaction, as given (one entry each, in order): trims
-- each bucket that grew (at most 10 records beyond the ones that just ended, so an end stays
-- O(1) amortized and a count of 0 keeps nothing), wakes the readers of the queue's events, and
-- then, as the transaction's last write, counts the ends and appends one event each under the
-- queue's next `seq` (errors cut, results inline only up to 1 KiB). The flow row is locked by
-- that last statement and held to commit (see the top of this file), so the ends of one queue
-- serialize only on it. The trims read the kept counts without the lock: a concurrent end may
-- trim a record more or less, which the next end corrects.
CREATE OR REPLACE FUNCTION fleet_note_ends(
    q text, tids text[], states text[], attempts integer[], ats double precision[],
    errors text[], results bytea[], channel text
) RETURNS void
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := cardinality(tids);
    n_ok bigint := 0;
    n_failed bigint := 0;
    n_dead bigint := 0;
    n_cancelled bigint := 0;
    n_bad bigint;
    d_ok bigint := 0;
    d_bad bigint := 0;
    ev_key text := fleet_events_key(q);
    notified bigint;
BEGIN
    IF coalesce(n, 0) = 0 THEN
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        CASE states[i]
            WHEN 'completed' THEN n_ok := n_ok + 1;
            WHEN 'failed' THEN n_failed := n_failed + 1;
            WHEN 'dead' THEN n_dead := n_dead + 1;
            ELSE n_cancelled := n_cancelled + 1;
        END CASE;
    END LOOP;
    n_bad := n_failed + n_cancelled;
    -- The trims read the flow row without its lock (see above).
    IF n_ok > 0 THEN
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state = 'completed'
                    ORDER BY t.finished_at, t.id LIMIT n_ok + 10
                ) c
                LEFT JOIN fleet_queue_flow fl ON fl.name = q
                WHERE c.k <= coalesce(fl.kept_ok, 0) + n_ok - coalesce(fl.ok_n, 1000)
                   OR c.finished_at <= fleet_now() - coalesce(fl.ok_ms, 86400000) / 1000.0)
              AND x.state = 'completed'
            FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS d_ok = ROW_COUNT;
    END IF;
    IF n_bad > 0 THEN
        DELETE FROM fleet_tasks WHERE id IN (
            SELECT x.id FROM fleet_tasks x
            WHERE x.id IN (
                SELECT c.id FROM (
                    SELECT t.id, t.finished_at,
                           row_number() OVER (ORDER BY t.finished_at, t.id) AS k
                    FROM fleet_tasks t
                    WHERE t.name = q AND t.state IN ('failed', 'cancelled')
                    ORDER BY t.finished_at, t.id LIMIT n_bad + 10
                ) c
                LEFT JOIN fleet_queue_flow fl ON fl.name = q
                WHERE c.k <= coalesce(fl.kept_bad, 0) + n_bad - coalesce(fl.bad_n, 1000)
                   OR c.finished_at <= fleet_now() - coalesce(fl.bad_ms, 86400000) / 1000.0)
              AND x.state IN ('failed', 'cancelled')
            FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS d_bad = ROW_COUNT;
    END IF;
    -- The last write: the flow row's lock is taken here and held to commit. The readers of the
    -- queue's events are notified (at commit) when one holds a lease.
    WITH fl AS (
        INSERT INTO fleet_queue_flow AS f
            (name, event_seq, completed, failed, dead, cancelled, kept_ok, kept_bad)
        VALUES (q, n, n_ok, n_failed, n_dead, n_cancelled,
                greatest(n_ok - d_ok, 0), greatest(n_bad - d_bad, 0))
        ON CONFLICT (name) DO UPDATE SET
            event_seq = f.event_seq + excluded.event_seq,
            completed = f.completed + excluded.completed,
            failed = f.failed + excluded.failed,
            dead = f.dead + excluded.dead,
            cancelled = f.cancelled + excluded.cancelled,
            kept_ok = greatest(f.kept_ok + n_ok - d_ok, 0),
            kept_bad = greatest(f.kept_bad + n_bad - d_bad, 0)
        RETURNING f.event_seq
    ), ev AS (
        INSERT INTO fleet_task_events
            (name, seq, task_id, state, attempt, at, error, result, result_size)
        SELECT q, fl.event_seq - n + x.o, x.tid, x.st, x.att, x.at, left(x.err, 1024),
               CASE WHEN octet_length(x.res) <= 1024 THEN x.res END,
               coalesce(octet_length(x.res), 0)
        FROM fl, unnest(tids, states, attempts, ats, errors, results)
            WITH ORDINALITY AS x(tid, st, att, at, err, res, o)
    )
    SELECT count(*) INTO notified FROM (
        SELECT pg_notify(channel, 't:' || ev_key) FROM fleet_waiters w
        WHERE w.queue_key = ev_key AND w.until > fleet_now() LIMIT 1
    ) w;
END $$;

-- fleet_ack_tasks(qs, receipts, results, channel) -> (receipt, state, task_id) per delivery it
-- ended
-- The acks of deliveries the adapter believes are of recorded tasks (their body has an id): each
-- current delivery of a recorded task ends `completed` with its result, or `cancelled` without
-- one when a cancel was requested while it ran; a delivery of a task without a record is
-- deleted as a plain ack does (state `completed`, task id NULL). A receipt given twice is ended
-- once, with the result of its first place. Rows are locked in receipt order (so two of these
-- never deadlock), then each queue's flow row in name order, last.
CREATE OR REPLACE FUNCTION fleet_ack_tasks(qs text[], receipts text[], results bytea[], channel text)
RETURNS TABLE (o_receipt text, o_state text, o_task_id text)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    g record;
    ids bigint[];
    names text[];
    rs text[];
    states text[];
    tids text[];
    atts integer[];
    ats double precision[];
    errs text[];
    ress bytea[];
BEGIN
    WITH given AS (
        -- Each receipt's row found by the receipt's unique index alone (receipts are unique
        -- across queues; the queue is checked below), not by a walk of the queue's
        -- reservations per receipt.
        SELECT DISTINCT ON (a.r) a.n, a.r, a.res, a.o,
               (SELECT c.id FROM fleet_tasks c WHERE c.receipt = a.r AND c.state = 'reserved')
                   AS id
        FROM unnest(qs, receipts, results) WITH ORDINALITY AS a(n, r, res, o)
        ORDER BY a.r, a.o
    ), ended AS (
        UPDATE fleet_tasks t
        SET state = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'completed' END,
            result = CASE WHEN t.cancel_requested THEN NULL ELSE given.res END,
            body = '', receipt = NULL, due = NULL, finished_at = fleet_now()
        FROM given
        WHERE t.id = given.id AND t.receipt = given.r AND t.state = 'reserved'
          AND t.name = given.n AND t.task_id IS NOT NULL
        RETURNING t.id, t.name, given.r, t.state, t.task_id, given.o, t.attempts,
                  t.finished_at, t.last_error, t.result
    )
    SELECT array_agg(e.id ORDER BY e.o), array_agg(e.name ORDER BY e.o),
           array_agg(e.r ORDER BY e.o), array_agg(e.state ORDER BY e.o),
           array_agg(e.task_id ORDER BY e.o), array_agg(e.attempts ORDER BY e.o),
           array_agg(e.finished_at ORDER BY e.o), array_agg(e.last_error ORDER BY e.o),
           array_agg(e.result ORDER BY e.o)
    INTO ids, names, rs, states, tids, atts, ats, errs, ress
    FROM ended e;
    IF coalesce(cardinality(ids), 0) < cardinality(receipts) THEN
        -- Some receipt is not a current delivery of a recorded task: maybe one without.
        RETURN QUERY
        DELETE FROM fleet_tasks t USING unnest(qs, receipts) AS a(n, r)
        WHERE t.receipt = a.r AND t.state = 'reserved' AND t.name = a.n AND t.task_id IS NULL
        RETURNING t.receipt, 'completed'::text, NULL::text;
    END IF;
    IF ids IS NULL THEN
        RETURN;
    END IF;
    -- The ends of each queue, in the given order; queues in name order.
    FOR g IN
        SELECT x.n, array_agg(x.tid ORDER BY x.o) AS tids, array_agg(x.st ORDER BY x.o) AS sts,
               array_agg(x.att ORDER BY x.o) AS atts, array_agg(x.at ORDER BY x.o) AS ats,
               array_agg(x.err ORDER BY x.o) AS errs, array_agg(x.res ORDER BY x.o) AS ress
        FROM unnest(names, tids, states, atts, ats, errs, ress)
            WITH ORDINALITY AS x(n, tid, st, att, at, err, res, o)
        GROUP BY x.n ORDER BY x.n COLLATE "C"
    LOOP
        PERFORM fleet_note_ends(g.n, g.tids, g.sts, g.atts, g.ats, g.errs, g.ress, channel);
    END LOOP;
    RETURN QUERY SELECT x.r, x.s, x.t FROM unnest(rs, states, tids) AS x(r, s, t);
END $$;

-- fleet_end_delivery(q, receipt, to_state, body, max_attempts, last_error, channel)
--   -> (state, task_id) of the recorded task it ended, or nothing
-- Ends the current delivery of a recorded task: a cancel-requested one always ends `cancelled`
-- (no dead letter, no requeue); otherwise `to_state` 'dead' makes it the dead-letter queue's
-- newest entry with `body` (a fail), and NULL leaves it alone (a nack or release, whose requeue
-- is the adapter's own statement).
CREATE OR REPLACE FUNCTION fleet_end_delivery(
    q text, rcpt text, to_state text, new_body bytea, new_max integer, new_error text,
    channel text
) RETURNS TABLE (o_state text, o_task_id text)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
BEGIN
    SELECT t.id, t.task_id, t.cancel_requested INTO r FROM fleet_tasks t
    WHERE t.receipt = rcpt AND t.state = 'reserved' AND t.name = q AND t.task_id IS NOT NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF r.cancel_requested THEN
        UPDATE fleet_tasks
        SET state = 'cancelled', body = '', receipt = NULL, due = NULL, finished_at = fleet_now(),
            max_attempts = coalesce(new_max, max_attempts),
            last_error = coalesce(new_error, last_error)
        WHERE id = r.id;
    ELSIF to_state = 'dead' THEN
        UPDATE fleet_tasks
        SET state = 'dead', body = new_body, receipt = NULL, due = NULL,
            finished_at = fleet_now(), pos = nextval('fleet_task_pos'),
            max_attempts = coalesce(new_max, max_attempts),
            last_error = coalesce(new_error, last_error)
        WHERE id = r.id;
    ELSE
        RETURN;
    END IF;
    PERFORM fleet_record_ends(q, ARRAY[r.id], channel);
    o_state := CASE WHEN r.cancel_requested THEN 'cancelled' ELSE to_state END;
    o_task_id := r.task_id;
    RETURN NEXT;
END $$;

-- fleet_dead_task(q, body, task_id, max_attempts, last_error, channel) -> whether it recorded
-- A dead letter appended with no reservation (`queue_dead`) whose body has an id no record
-- holds: the letter is the record, ended `dead` with its event. With the id taken it answers
-- false and writes nothing (the adapter then appends the letter without a record).
CREATE OR REPLACE FUNCTION fleet_dead_task(
    q text, new_body bytea, tid text, new_max integer, new_error text, channel text
) RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    new_id bigint;
BEGIN
    INSERT INTO fleet_tasks
        (name, state, tier, body, task_id, max_attempts, last_error, submitted_at, finished_at)
    VALUES (q, 'dead', 1, new_body, tid, new_max, new_error, fleet_now(), fleet_now())
    ON CONFLICT (name, task_id) WHERE task_id IS NOT NULL DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RETURN false;
    END IF;
    PERFORM fleet_record_ends(q, ARRAY[new_id], channel);
    RETURN true;
END $$;

-- fleet_sweep as in 20800003; a lapsed delivery of a recorded task whose cancel was requested
-- ends `cancelled` instead of going back to its tier (ADR 0380, section 4).
CREATE OR REPLACE FUNCTION fleet_sweep(q text, channel text, payload text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    n bigint := 0;
    back bigint := 0;
    ended bigint[] := '{}';
BEGIN
    FOR r IN
        SELECT t.id, t.cancel_requested AND t.task_id IS NOT NULL AS cancel FROM fleet_tasks t
        WHERE t.name = q AND t.state = 'reserved' AND t.due <= fleet_now()
        ORDER BY t.due, t.id
        FOR UPDATE SKIP LOCKED
    LOOP
        IF r.cancel THEN
            UPDATE fleet_tasks
            SET state = 'cancelled', body = '', receipt = NULL, due = NULL,
                finished_at = fleet_now()
            WHERE id = r.id;
            ended := ended || r.id;
        ELSE
            UPDATE fleet_tasks
            SET state = 'ready', receipt = NULL, due = NULL, progress = NULL,
                pos = nextval('fleet_task_pos')
            WHERE id = r.id;
            back := back + 1;
        END IF;
        n := n + 1;
    END LOOP;
    IF cardinality(ended) > 0 THEN
        PERFORM fleet_record_ends(q, ended, channel);
    END IF;
    IF back > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN n;
END $$;

-- fleet_reserve_many as in 20800004; a delivery also notes when it started (the record's
-- `started_at`; harmless on a row without an id).
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

-- fleet_requeue as in 20800002; a recorded dead task comes back to life (`waiting`, no end).
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
        SET state = 'ready', tier = to_tier, attempts = 0, pos = nextval('fleet_task_pos'),
            finished_at = NULL, started_at = NULL, cancel_requested = false
        WHERE id = r.id;
        moved := moved + 1;
    END LOOP;
    IF moved > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN moved;
END $$;

-- fleet_requeue_chosen as in 20800003; a recorded dead task comes back to life.
CREATE OR REPLACE FUNCTION fleet_requeue_chosen(
    q text, bodies bytea[], to_tier smallint, channel text, payload text
) RETURNS SETOF bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    moved bigint := 0;
BEGIN
    PERFORM 1 FROM fleet_tasks t
    WHERE t.name = q AND t.state = 'dead' AND t.body = ANY(bodies)
    ORDER BY t.id
    FOR UPDATE;
    FOR r IN
        WITH wanted AS (
            SELECT w.b, w.o, row_number() OVER (PARTITION BY w.b ORDER BY w.o) AS k
            FROM unnest(bodies) WITH ORDINALITY AS w(b, o)
        ), letters AS (
            SELECT d.id, d.body, row_number() OVER (PARTITION BY d.body ORDER BY d.pos) AS k
            FROM fleet_tasks d
            WHERE d.name = q AND d.state = 'dead' AND d.body = ANY(bodies)
        )
        SELECT letters.id, wanted.o FROM wanted
        JOIN letters ON letters.body = wanted.b AND letters.k = wanted.k
        ORDER BY wanted.o
    LOOP
        UPDATE fleet_tasks
        SET state = 'ready', tier = to_tier, attempts = 0, progress = NULL,
            pos = nextval('fleet_task_pos'), finished_at = NULL, started_at = NULL,
            cancel_requested = false
        WHERE id = r.id AND state = 'dead';
        IF FOUND THEN
            moved := moved + 1;
            RETURN NEXT r.o;
        END IF;
    END LOOP;
    IF moved > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
END $$;

-- fleet_dlq_pop(q, n, channel) -> (pos, body) of up to n dead letters, oldest first
-- Letters without a record are deleted as before; a recorded one ends `failed` (ADR 0380,
-- section 2: no dead letter holds it any more), with its event. Rows a concurrent pop holds are
-- skipped: no letter is popped twice.
CREATE OR REPLACE FUNCTION fleet_dlq_pop(q text, n bigint, channel text)
RETURNS TABLE (o_pos bigint, o_body bytea)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    ended bigint[] := '{}';
BEGIN
    FOR r IN
        SELECT t.id, t.pos, t.body, t.task_id FROM fleet_tasks t
        WHERE t.name = q AND t.state = 'dead'
        ORDER BY t.pos
        LIMIT n
        FOR UPDATE SKIP LOCKED
    LOOP
        IF r.task_id IS NULL THEN
            DELETE FROM fleet_tasks WHERE id = r.id;
        ELSE
            UPDATE fleet_tasks SET state = 'failed', body = '', finished_at = fleet_now()
            WHERE id = r.id;
            ended := ended || r.id;
        END IF;
        o_pos := r.pos;
        o_body := r.body;
        RETURN NEXT;
    END LOOP;
    IF cardinality(ended) > 0 THEN
        PERFORM fleet_record_ends(q, ended, channel);
    END IF;
END $$;

-- fleet_dlq_clear(q, channel) -> how many dead letters it removed
-- As `fleet_dlq_pop` of every letter.
CREATE OR REPLACE FUNCTION fleet_dlq_clear(q text, channel text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    gone bigint;
    ended bigint[];
BEGIN
    DELETE FROM fleet_tasks WHERE name = q AND state = 'dead' AND task_id IS NULL;
    GET DIAGNOSTICS gone = ROW_COUNT;
    WITH f AS (
        UPDATE fleet_tasks SET state = 'failed', body = '', finished_at = fleet_now()
        WHERE name = q AND state = 'dead' AND task_id IS NOT NULL
        RETURNING id, pos
    )
    SELECT coalesce(array_agg(f.id ORDER BY f.pos), '{}') INTO ended FROM f;
    IF cardinality(ended) > 0 THEN
        PERFORM fleet_record_ends(q, ended, channel);
    END IF;
    RETURN gone + cardinality(ended);
END $$;

-- fleet_cancel(q, ids, channel) -> one outcome per id, in order: 'unknown', 'cancelled',
-- 'cancel_requested' or 'finished:<state>'
-- Locks the records `FOR UPDATE` in id order (a reserve's SKIP LOCKED passes them by, so it
-- either took a task before, and the cancel marks its delivery, or never sees it). A scheduled
-- or waiting task ends `cancelled` at once; a running one is marked; an ended one is left as it
-- is. A record a seed consumer could have moved does not exist on PostgreSQL (ADR 0380, 7).
CREATE OR REPLACE FUNCTION fleet_cancel(q text, ids text[], channel text) RETURNS text[]
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    outcomes text[] := '{}';
    ended bigint[] := '{}';
    st text;
BEGIN
    PERFORM 1 FROM fleet_tasks t
    WHERE t.name = q AND t.task_id = ANY(ids)
    ORDER BY t.id
    FOR UPDATE;
    FOR r IN
        SELECT x.tid, t.id, t.state FROM unnest(ids) WITH ORDINALITY AS x(tid, o)
        LEFT JOIN fleet_tasks t ON t.name = q AND t.task_id = x.tid
        ORDER BY x.o
    LOOP
        st := r.state;
        IF st IS NULL THEN
            outcomes := outcomes || 'unknown'::text;
        ELSIF st IN ('ready', 'scheduled') THEN
            UPDATE fleet_tasks
            SET state = 'cancelled', body = '', due = NULL, finished_at = fleet_now()
            WHERE id = r.id;
            ended := ended || r.id;
            outcomes := outcomes || 'cancelled'::text;
        ELSIF st = 'reserved' THEN
            UPDATE fleet_tasks SET cancel_requested = true WHERE id = r.id;
            outcomes := outcomes || 'cancel_requested'::text;
        ELSE
            outcomes := outcomes || ('finished:' || st);
        END IF;
    END LOOP;
    IF cardinality(ended) > 0 THEN
        PERFORM fleet_record_ends(q, ended, channel);
    END IF;
    RETURN outcomes;
END $$;

-- fleet_purge(q, n, channel) -> how many scheduled or waiting tasks it removed
-- Up to n of them, skipping rows others hold: bodies without an id are deleted, recorded tasks
-- end `cancelled` with their events.
CREATE OR REPLACE FUNCTION fleet_purge(q text, n bigint, channel text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    plain bigint[];
    recorded bigint[];
BEGIN
    WITH picked AS (
        SELECT t.id, t.task_id IS NOT NULL AS rec, t.tier, t.pos FROM fleet_tasks t
        WHERE t.name = q AND t.state IN ('ready', 'scheduled')
        ORDER BY t.tier, t.pos
        LIMIT n
        FOR UPDATE SKIP LOCKED
    )
    SELECT coalesce(array_agg(p.id) FILTER (WHERE NOT p.rec), '{}'),
           coalesce(array_agg(p.id ORDER BY p.tier, p.pos) FILTER (WHERE p.rec), '{}')
    INTO plain, recorded
    FROM picked p;
    DELETE FROM fleet_tasks WHERE id = ANY(plain);
    IF cardinality(recorded) > 0 THEN
        UPDATE fleet_tasks
        SET state = 'cancelled', body = '', due = NULL, finished_at = fleet_now()
        WHERE id = ANY(recorded);
        PERFORM fleet_record_ends(q, recorded, channel);
    END IF;
    RETURN cardinality(plain) + cardinality(recorded);
END $$;

-- fleet_task_maintain(q, n) -> how many finished records it removed
-- Removes up to n records of each bucket past the queue's retention and every event past the
-- log's count or age, raising `trimmed_through` to the last event removed; under the flow row's
-- lock, so the kept counts it lowers are exact.
CREATE OR REPLACE FUNCTION fleet_task_maintain(q text, n bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    f record;
    d_ok bigint;
    d_bad bigint;
    cut bigint;
    aged bigint;
BEGIN
    SELECT * INTO f FROM fleet_queue_flow WHERE name = q FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    d_ok := fleet_trim_bucket(q, true, n, f.kept_ok - coalesce(f.ok_n, 1000),
                              coalesce(f.ok_ms, 86400000));
    d_bad := fleet_trim_bucket(q, false, n, f.kept_bad - coalesce(f.bad_n, 1000),
                               coalesce(f.bad_ms, 86400000));
    cut := f.event_seq - coalesce(f.ev_n, 10000);
    SELECT max(e.seq) INTO aged FROM fleet_task_events e
    WHERE e.name = q AND e.seq > f.trimmed_through
      AND e.at <= fleet_now() - coalesce(f.ev_ms, 86400000) / 1000.0;
    cut := greatest(cut, coalesce(aged, 0));
    IF cut > f.trimmed_through THEN
        DELETE FROM fleet_task_events e WHERE e.name = q AND e.seq <= cut;
    END IF;
    UPDATE fleet_queue_flow
    SET kept_ok = greatest(kept_ok - d_ok, 0), kept_bad = greatest(kept_bad - d_bad, 0),
        trimmed_through = greatest(trimmed_through, cut)
    WHERE name = q;
    RETURN d_ok + d_bad;
END $$;
