//! Every statement the bridge runs (table names unqualified: the pool's `search_path` is the
//! bridge's schema).

/// Publishes one entry (`bridge_publish` of the migration). `$1` name, `$2` is end, `$3` event,
/// `$4` data, `$5` MAXLEN, `$6` channel. Replies the id.
pub(crate) const PUBLISH: &str = "SELECT bridge_publish($1, $2, $3, $4, $5, $6)";

/// A subscriber's snapshot of one stream, in one statement (so one consistent view): a head row
/// (`added` not NULL) with the stream's first and last ids, whether the last is the end mark, its
/// entries-added count and (when `$5`) its length; then up to `$4` entries after `($2, $3)`, in
/// id order. No row: the stream does not exist.
pub(crate) const SNAPSHOT: &str = "\
SELECT s.added, CASE WHEN $5 THEN (SELECT count(*) FROM bridge_entries AS c
                                   WHERE c.stream_id = s.stream_id) ELSE -1 END AS len,
       f.ms AS first_ms, f.seq AS first_seq, l.ms AS last_ms, l.seq AS last_seq,
       l.is_end AS last_is_end,
       NULL::BIGINT AS ms, NULL::BIGINT AS seq, NULL::BOOLEAN AS is_end,
       NULL::TEXT AS event, NULL::TEXT AS data
FROM bridge_streams AS s
LEFT JOIN LATERAL (SELECT b.ms, b.seq FROM bridge_entries AS b WHERE b.stream_id = s.stream_id
                   ORDER BY b.ms, b.seq LIMIT 1) AS f ON true
LEFT JOIN LATERAL (SELECT b.ms, b.seq, b.is_end FROM bridge_entries AS b
                   WHERE b.stream_id = s.stream_id
                   ORDER BY b.ms DESC, b.seq DESC LIMIT 1) AS l ON true
WHERE s.name = $1
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, b.ms, b.seq, b.is_end, b.event, b.data
FROM bridge_streams AS s
CROSS JOIN LATERAL (SELECT * FROM bridge_entries AS b
                    WHERE b.stream_id = s.stream_id AND (b.ms, b.seq) > ($2, $3)
                    ORDER BY b.ms, b.seq LIMIT $4) AS b
WHERE s.name = $1";

/// The newest entry's id and whether it is the end mark (where a malformed cursor starts).
pub(crate) const NEWEST: &str = "\
SELECT b.ms, b.seq, b.is_end FROM bridge_streams AS s
JOIN bridge_entries AS b ON b.stream_id = s.stream_id
WHERE s.name = $1 ORDER BY b.ms DESC, b.seq DESC LIMIT 1";

/// Removes a stream and wakes its subscribers. `$1` name, `$2` channel.
pub(crate) const CLEANUP: &str = "\
WITH gone AS (DELETE FROM bridge_streams WHERE name = $1 RETURNING name)
SELECT pg_notify($2, CASE WHEN octet_length(name) <= 1000 THEN name ELSE '*' END) FROM gone";

/// Whether a stream has retained entries.
pub(crate) const EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM bridge_streams WHERE name = $1)";

/// The retention sweep: streams not published to for `$1` seconds go, and their subscribers
/// are woken to find them gone. `$2` channel. Replies one row per removed stream.
pub(crate) const SWEEP: &str = "\
WITH gone AS (DELETE FROM bridge_streams
              WHERE touched_at < clock_timestamp() - make_interval(secs => $1) RETURNING name)
SELECT pg_notify($2, CASE WHEN octet_length(name) <= 1000 THEN name ELSE '*' END) FROM gone";
