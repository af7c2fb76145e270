-- switchyard's stream bridge on PostgreSQL (ADR 0224). Every object lives in the adapter's schema
-- (the connection's search_path); the migration runner records this file in bridge_migrations.

-- One row per run stream: the last id given out (ids are `<ms>-<seq>` as Redis Streams makes
-- them), how many entries were ever added (a cursor-less subscriber's check that nothing it was
-- owed was trimmed) and when it was last published to (the retention sweep).
CREATE TABLE bridge_streams (
    stream_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    last_ms BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    added BIGINT NOT NULL,
    touched_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX bridge_streams_touched ON bridge_streams (touched_at);

-- The retained entries of each stream, newest `queue_maxsize` (+1 for the end mark). `data` is
-- the event's JSON as the Redis bridge stores it; the end mark is an entry with `is_end`.
CREATE TABLE bridge_entries (
    stream_id BIGINT NOT NULL REFERENCES bridge_streams ON DELETE CASCADE,
    ms BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    is_end BOOLEAN NOT NULL,
    event TEXT,
    data TEXT,
    PRIMARY KEY (stream_id, ms, seq)
);

-- bridge_publish: one entry, as Redis's `XADD key MAXLEN n *` makes it, then a NOTIFY that wakes
-- the subscribers of every gateway (sent when the transaction commits, so never before the entry
-- is visible).
--
-- Arguments: p_name (the stream), p_is_end, p_event and p_data (NULL for the end mark), p_maxlen
-- (entries kept, the new one included), p_channel (the bridge's NOTIFY channel).
-- Reply: the new entry's id, `<ms>-<seq>`: the database clock's milliseconds, or the last id's
-- when the clock is behind it, with a seq that grows within one millisecond.
CREATE FUNCTION bridge_publish(
    p_name TEXT, p_is_end BOOLEAN, p_event TEXT, p_data TEXT, p_maxlen BIGINT, p_channel TEXT
) RETURNS TEXT
-- The schema's own tables, whatever the caller's search_path (the migration sets it).
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    v_now_ms BIGINT := floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
    v_stream BIGINT;
    v_ms BIGINT;
    v_seq BIGINT;
BEGIN
    INSERT INTO bridge_streams AS s (name, last_ms, last_seq, added, touched_at)
        VALUES (p_name, v_now_ms, 0, 1, clock_timestamp())
    ON CONFLICT (name) DO UPDATE SET
        last_seq = CASE WHEN v_now_ms > s.last_ms THEN 0 ELSE s.last_seq + 1 END,
        last_ms = GREATEST(s.last_ms, v_now_ms),
        added = s.added + 1,
        touched_at = clock_timestamp()
    RETURNING s.stream_id, s.last_ms, s.last_seq INTO v_stream, v_ms, v_seq;
    INSERT INTO bridge_entries (stream_id, ms, seq, is_end, event, data)
        VALUES (v_stream, v_ms, v_seq, p_is_end, p_event, p_data);
    DELETE FROM bridge_entries AS e
        WHERE e.stream_id = v_stream AND (e.ms, e.seq) < (
            SELECT k.ms, k.seq FROM bridge_entries AS k WHERE k.stream_id = v_stream
            ORDER BY k.ms DESC, k.seq DESC OFFSET p_maxlen - 1 LIMIT 1);
    -- A NOTIFY payload holds at most 8000 bytes: a longer name wakes every subscriber instead.
    PERFORM pg_notify(p_channel, CASE WHEN octet_length(p_name) <= 1000 THEN p_name ELSE '*' END);
    RETURN v_ms || '-' || v_seq;
END;
$$;
