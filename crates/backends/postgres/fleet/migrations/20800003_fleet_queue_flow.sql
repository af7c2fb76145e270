-- The queue features of ADR 0280 on PostgreSQL (ADR 0295): pause and rate limits kept per queue,
-- progress on a reservation's row, recurring schedules' documents, batch reserves and requeues
-- of chosen dead letters as functions (one round trip, one transaction each).

-- Pause and rate limit of a queue; a queue that has neither has no row, so the reserve of a
-- plain queue reads one missing index entry and takes no lock. `tokens` is the bucket's content
-- at `refilled_at` (unix seconds); it refills continuously at `rate_max` per `rate_per_ms`
-- milliseconds (the limit's `per` as `RateLimit::per_ms` gives it).
CREATE TABLE IF NOT EXISTS fleet_queue_flow (
    name text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    rate_max bigint CHECK (rate_max >= 1),
    rate_per_ms bigint CHECK (rate_per_ms >= 1),
    tokens double precision,
    refilled_at double precision
);

-- The last progress document of the current delivery; cleared whenever a delivery starts or ends.
ALTER TABLE fleet_tasks ADD COLUMN IF NOT EXISTS progress bytea;

CREATE TABLE IF NOT EXISTS fleet_schedules (
    name text PRIMARY KEY,
    doc bytea NOT NULL
);

-- fleet_tokens(tokens, refilled_at, rate_max, rate_per_ms, at_now) -> the bucket's content at
-- `at_now` (never more than `rate_max`; time running backwards adds nothing)
CREATE OR REPLACE FUNCTION fleet_tokens(
    tokens double precision, refilled_at double precision, rate_max bigint,
    rate_per_ms bigint, at_now double precision
) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT least(rate_max::double precision,
                 tokens + greatest(at_now - refilled_at, 0) * 1000.0 * rate_max / rate_per_ms)
$$;

-- fleet_reserve_many(q, receipts, visibility)
--   -> up to cardinality(receipts) rows (receipt, tier, body, attempts, due), in serve order
-- Nothing while the queue is paused. Otherwise moves the queue's due retries and delayed tasks
-- to the end of their tiers, in due order, then takes the heads of the tiers (high, normal, low;
-- lowest `pos` first) skipping rows other reservers hold, and registers the k-th under the k-th
-- receipt until now + `visibility` seconds with one more attempt. With a rate limit, the queue's
-- flow row is locked for the whole transaction, so concurrent reserves of every process spend
-- each token once, and no more tasks are taken than whole tokens are in the bucket.
CREATE OR REPLACE FUNCTION fleet_reserve_many(q text, receipts text[], visibility double precision)
RETURNS TABLE (o_receipt text, o_tier smallint, o_body bytea, o_attempts integer, o_due double precision)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    f record;
    r record;
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

-- The one-task reserve of ADR 0231 keeps its signature (a backend of an older release calls it)
-- and now honours pause and rate limits through fleet_reserve_many.
CREATE OR REPLACE FUNCTION fleet_reserve(q text, receipt text, visibility double precision)
RETURNS TABLE (o_tier smallint, o_body bytea, o_attempts integer, o_due double precision)
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT m.o_tier, m.o_body, m.o_attempts, m.o_due
    FROM fleet_reserve_many(q, ARRAY[receipt], visibility) m
$$;

-- fleet_sweep as in ADR 0231, clearing the progress of the deliveries it ends.
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
        SET state = 'ready', receipt = NULL, due = NULL, progress = NULL,
            pos = nextval('fleet_task_pos')
        WHERE id = r.id;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM fleet_wake(channel, payload);
    END IF;
    RETURN n;
END $$;

-- fleet_requeue_chosen(q, bodies, tier, channel, payload) -> the ordinals (1-based) of `bodies`
-- whose dead letter moved
-- For each body given, in order, moves the oldest dead letter of the queue with exactly those
-- bytes not yet chosen to the end of `tier` with a fresh attempt count. The candidate rows are
-- locked first (in id order, so two of these never deadlock), then chosen on a fresh snapshot,
-- so a concurrent pop or requeue of the same letters is seen, not raced. Wakes reservers when
-- it moved any.
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
            pos = nextval('fleet_task_pos')
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
