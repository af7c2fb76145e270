//! Every statement the store runs. Runtime queries, so building needs no database; the
//! adapter's tests run each one and check the plans of the claim and status reads.
//!
//! Table names are unqualified: every connection's `search_path` is the store's schema.
//!
//! Two sets: the switchyard layout's (ADR 0222, the statements at the top level of this module)
//! and agentdeck's layout's ([`agentdeck`], ADR 0377); and the line's ([`line`], ADR 0394),
//! which both layouts share.

/// Appends a batch in one statement (ADR 0222). The upsert of the run's row takes its row lock,
/// so concurrent appenders to one run take turns and each gets the next range of seqs; the
/// database clock is read after the lock (`clock_timestamp()` in the `SET`), so ts never goes
/// back within a run. The events are put together from their JSON parts around seq and ts.
///
/// `$1` namespace, `$2` log key, `$3` run id, `$4` the batch's size, `$5` an injected "now" as
/// RFC 3339 text (NULL: the database clock), `$6` the batch's last lifecycle kind (NULL: none),
/// `$7` heads, `$8` the shared middle part, `$9` tails, `$10` kinds. Replies `(first seq, ts
/// text)`.
pub(crate) const APPEND: &str = "\
WITH head AS (
    INSERT INTO runs AS r (namespace, log_key, run_id, next_seq, last_ts, status)
    VALUES ($1, $2, $3, $4, COALESCE(CAST($5::text AS timestamptz), clock_timestamp()), $6)
    ON CONFLICT (namespace, log_key, run_id) DO UPDATE
        SET next_seq = r.next_seq + EXCLUDED.next_seq,
            last_ts = COALESCE(CAST($5::text AS timestamptz), clock_timestamp()),
            status = COALESCE(EXCLUDED.status, r.status)
    RETURNING r.next_seq - $4 AS first, r.last_ts AS ts
), written AS (
    INSERT INTO events (namespace, log_key, run_id, seq, kind, data)
    SELECT $1, $2, $3, head.first + b.n - 1, b.kind,
           b.head || (head.first + b.n - 1) || $8 || event_ts_text(head.ts) || b.tail
    FROM head, unnest($7::text[], $9::text[], $10::text[]) WITH ORDINALITY AS b(head, tail, kind, n)
)
SELECT first, event_ts_text(ts) FROM head";

/// `append_if_open` of migration 3: the run's row lock, its status and, while it is open, the
/// write of the batch, in one round trip (ADR 0365). Arguments as [`APPEND`]'s. Replies one row
/// `(first seq, ts text, NULL)` when written, `(NULL, NULL, latest lifecycle kind or '')` when
/// refused.
pub(crate) const APPEND_IF_OPEN: &str = "SELECT first_seq, ts_text, status_before \
     FROM append_if_open($1, $2, $3, $4, CAST($5::text AS timestamptz), $6, $7, $8, $9, $10)";

/// Resumes a waiting or paused run in one statement: the `UPDATE` matches only while the run's
/// latest lifecycle kind is `run.paused` or `run.interrupted`, under the run's row lock, so of
/// concurrent resumes exactly one matches (the others re-check the committed row and find it
/// `run.resumed`). No row back: not resumable.
///
/// `$1`–`$3` the run, `$4` an injected "now" (RFC 3339 text, or NULL), `$5` head, `$6` middle,
/// `$7` tail of the `run.resumed` event. Replies `(seq, ts text)`.
pub(crate) const RESUME: &str = "\
WITH head AS (
    UPDATE runs AS r
        SET next_seq = r.next_seq + 1,
            last_ts = COALESCE(CAST($4::text AS timestamptz), clock_timestamp()),
            status = 'run.resumed'
    WHERE r.namespace = $1 AND r.log_key = $2 AND r.run_id = $3
      AND r.status IN ('run.paused', 'run.interrupted')
    RETURNING r.next_seq - 1 AS seq, r.last_ts AS ts
), written AS (
    INSERT INTO events (namespace, log_key, run_id, seq, kind, data)
    SELECT $1, $2, $3, head.seq, 'run.resumed',
           $5 || head.seq || $6 || event_ts_text(head.ts) || $7
    FROM head
)
SELECT seq, event_ts_text(ts) FROM head";

/// `claim_start` of the migration: one round trip under the log's row lock (ADR 0223).
pub(crate) const CLAIM_START: &str = "SELECT outcome, run_id, ts_text, data \
     FROM claim_start($1, $2, $3, $4, CAST($5::text AS timestamptz), $6, $7, $8)";

/// A log's events in append order, paged (`$3` NULL: no limit).
pub(crate) const READ: &str = "SELECT id, data FROM events WHERE namespace = $1 AND log_key = $2 \
     ORDER BY id LIMIT $3 OFFSET $4";

/// One run's events from a seq, from `events_by_run`.
pub(crate) const READ_RUN: &str = "SELECT id, data FROM events \
     WHERE namespace = $1 AND log_key = $2 AND run_id = $3 AND seq >= $4 ORDER BY seq";

/// A run's latest lifecycle kind: one primary-key lookup in `runs`.
pub(crate) const STATUS: &str =
    "SELECT status FROM runs WHERE namespace = $1 AND log_key = $2 AND run_id = $3";

/// Every run of a namespace that has a lifecycle event, with its latest lifecycle kind.
pub(crate) const LIST_RUNS: &str =
    "SELECT log_key, run_id, status FROM runs WHERE namespace = $1 AND status IS NOT NULL";

/// The statements of agentdeck 3.1.0's layout (ADR 0377): one `events` table with `data JSONB`,
/// every write a call of a function of `migrations/agentdeck/1_agentdeck_events.sql` that takes
/// the log's advisory lock first. `$1` of every write is the lock key
/// ([`crate::key::log_lock_key`]).
pub(crate) mod agentdeck {
    /// Appends a batch: `$1` lock key, `$2`–`$4` the run, `$5` an injected "now" (RFC 3339 text,
    /// or NULL), `$6` heads, `$7` the shared middle part, `$8` tails. Replies `(first seq, ts
    /// text)`.
    pub(crate) const APPEND: &str = "SELECT first_seq, ts_text \
         FROM append_events($1, $2, $3, $4, CAST($5::text AS timestamptz), $6, $7, $8)";

    /// `append_if_open`: arguments as [`APPEND`]'s; replies as the switchyard layout's.
    pub(crate) const APPEND_IF_OPEN: &str = "SELECT first_seq, ts_text, status_before \
         FROM append_if_open($1, $2, $3, $4, CAST($5::text AS timestamptz), $6, $7, $8)";

    /// Appends of several runs of one log in one call (ADR 0386): `$1` lock key, `$2`–`$3` the
    /// log; per op `$4` runs, `$5` whether conditional, `$6` middle parts, `$7` where its events
    /// start (1-based), `$8` how many; per event `$9` heads, `$10` tails. The database clock
    /// stamps them (a store with an injected clock sends its appends alone). Replies one row per
    /// op, in order: (op, first seq, ts text, status before).
    pub(crate) const APPEND_GROUP: &str = "SELECT op, first_seq, ts_text, status_before \
         FROM append_group($1, $2, $3, NULL, $4, $5, $6, $7, $8, $9, $10)";

    /// Resumes a waiting or paused run: `$1` lock key, `$2`–`$4` the run, `$5` "now", `$6`–`$8`
    /// the event's parts. Replies `(seq, ts text)`, or no row: not resumable.
    pub(crate) const RESUME: &str = "SELECT seq, ts_text \
         FROM claim_resume($1, $2, $3, $4, CAST($5::text AS timestamptz), $6, $7, $8)";

    /// `claim_start`: `$1` lock key, then the switchyard layout's arguments.
    pub(crate) const CLAIM_START: &str = "SELECT outcome, run_id, ts_text, data \
         FROM claim_start($1, $2, $3, $4, $5, CAST($6::text AS timestamptz), $7, $8, $9)";

    /// A log's events in append order, paged (`$3` NULL: no limit). JSONB comes back as its own
    /// text (keys reordered, a space after each `:` and `,`), which the event reader takes as any
    /// JSON.
    pub(crate) const READ: &str = "SELECT id, CAST(data AS TEXT) FROM events \
         WHERE namespace = $1 AND log_key = $2 ORDER BY id LIMIT $3 OFFSET $4";

    /// One run's events from a seq, in append order (by id, as agentdeck reads them).
    pub(crate) const READ_RUN: &str = "SELECT id, CAST(data AS TEXT) FROM events \
         WHERE namespace = $1 AND log_key = $2 AND run_id = $3 AND seq >= $4 ORDER BY id";

    /// A run's latest lifecycle kind: one primary-key lookup in the trigger-kept `event_runs`.
    pub(crate) const STATUS: &str =
        "SELECT status FROM event_runs WHERE namespace = $1 AND log_key = $2 AND run_id = $3";

    /// Every run of a namespace that has a lifecycle event, with its latest lifecycle kind.
    pub(crate) const LIST_RUNS: &str =
        "SELECT log_key, run_id, status FROM event_runs WHERE namespace = $1";

    /// The type of the `data` column of a schema's `events` table (`$1` the schema): `jsonb` in
    /// agentdeck's layout, `text` in the switchyard layout, no row when there is no table yet.
    pub(crate) const DATA_TYPE: &str = "SELECT data_type FROM information_schema.columns \
         WHERE table_schema = $1 AND table_name = 'events' AND column_name = 'data'";
}

/// The statements of a session's line (ADR 0394), the same in both layouts: each layout's
/// migration 4 creates the table `switchyard_line` and the function `line_push`.
pub(crate) mod line {
    /// Puts a run at the end of its log's line under the line's own advisory lock: `$1` lock key
    /// ([`crate::key::line_lock_key`]), `$2`–`$3` the log, `$4` the run, `$5` its entry
    /// (`QueuedRun::to_json`), `$6` the most runs a line holds. Replies one row `(outcome,
    /// place)`: `exists`, `full` (nothing written) or `pushed` with the run's place.
    pub(crate) const PUSH: &str = "SELECT outcome, place FROM line_push($1, $2, $3, $4, $5, $6)";

    /// The first `$3` runs of the line of the log `$1`, `$2`, oldest first: `(pos, entry)`.
    pub(crate) const READ: &str = "SELECT pos, entry FROM switchyard_line \
         WHERE namespace = $1 AND log_key = $2 ORDER BY pos LIMIT $3";

    /// Takes the run `$3` out of the line of the log `$1`, `$2`: a row back when it was there.
    pub(crate) const REMOVE: &str = "DELETE FROM switchyard_line \
         WHERE namespace = $1 AND log_key = $2 AND run_id = $3 RETURNING pos";
}
