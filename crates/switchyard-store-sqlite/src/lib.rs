//! # switchyard-store-sqlite
//!
//! switchyard's [`EventStore`](switchyard_core::EventStore) on one SQLite file, through sqlx.
//!
//! The file is agentdeck 3.1.0's: the same `events` table and indexes, the same JSON in `data`,
//! so a Python service of the seed and a Rust service can share it (ADR 0030). On top of the seed:
//!
//! * WAL with `synchronous=NORMAL` and a busy timeout, checked at open (the seed silently stays in
//!   rollback mode when the WAL switch fails);
//! * one writer connection and a separate read pool, so reads never queue behind writes; claims in
//!   `BEGIN IMMEDIATE`, and an append to a run the writer knows is one `INSERT` statement, redone
//!   under the lock if another process appended meanwhile (ADR 0100);
//! * the open runs of every log in `events_open_runs`, kept by a trigger (so by SQLite itself, for
//!   every writer of the file, the seed included), so `claim_start` costs O(open runs), not
//!   O(history); and a partial index over lifecycle rows (`events_life`) for `claim_resume`,
//!   `run_status` and `list_runs`, so none of them parses the JSON of a log's history (ADR 0031);
//! * the machine's clock stamps `ts` at SQLite's millisecond precision (the seed's expression reads
//!   the same clock), or an injected [`Clock`](switchyard_core::Clock) in tests;
//! * a row that does not decode is [`Error::Corrupt`](switchyard_core::Error::Corrupt) naming its
//!   row id, never a panic.
//!
//! ```no_run
//! # async fn demo() -> switchyard_core::Result<()> {
//! use switchyard_store_sqlite::SqliteEventStore;
//! let store = SqliteEventStore::open("events.db").await?;
//! # Ok(()) }
//! ```

mod sql;
mod store;

pub use store::{SqliteEventStore, SqliteOptions};
