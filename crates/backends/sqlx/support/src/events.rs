//! What the SQLite and PostgreSQL event stores share about their `events` table: the log a call
//! addresses (for queries and error messages), decoding stored rows, and seq conversions between
//! the port's `u64` and SQL's signed integers.

use std::fmt;

use switchyard_core::event::Event;
use switchyard_core::{Error, Result, RunContext};

/// The log a call addresses: the `(namespace, log_key)` of its context. Its `Display` names the
/// log in errors as `events[namespace="…", log_key="…"]`.
#[derive(Debug, Clone)]
pub struct LogRef<'a> {
    /// The namespace key (`""` for none), as stored in the `namespace` column.
    pub namespace: &'a str,
    /// The session id, or the run id of a run without one, as stored in `log_key`.
    pub log_key: &'a str,
}

impl<'a> LogRef<'a> {
    /// The log of `ctx` ([`RunContext::log_key`]).
    pub fn of(ctx: &'a RunContext) -> Self {
        LogRef {
            namespace: ctx.namespace_key(),
            log_key: ctx.log_key(),
        }
    }
}

impl fmt::Display for LogRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "events[namespace={:?}, log_key={:?}]",
            self.namespace, self.log_key
        )
    }
}

/// Decodes one stored row; a row that does not decode is [`Error::Corrupt`] naming its id, so
/// the other logs stay readable (guarantee `read.corrupt_contained`).
pub fn decode(id: i64, data: &str) -> Result<Event> {
    Event::from_json(data).map_err(|e| Error::corrupt(format!("events row id={id}"), e))
}

/// Decodes `(id, data)` rows in order; the first that does not decode fails the whole read.
pub fn decode_rows(rows: Vec<(i64, String)>) -> Result<Vec<Event>> {
    rows.iter().map(|(id, data)| decode(*id, data)).collect()
}

/// A caller's `u64` (a seq, an offset, a limit) as a SQL integer: values past `i64::MAX`
/// saturate, which as a lower bound matches nothing and as a limit means "all".
pub fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A seq read back from the database, which never stores a negative one: a negative value is
/// [`Error::Corrupt`] naming the log.
pub fn seq_of(n: i64, log: &LogRef<'_>) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::corrupt(log.to_string(), format!("negative seq {n}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_is_named_by_its_namespace_and_key() {
        let ctx = RunContext::new("r")
            .with_session("s:1")
            .with_namespace("tenant")
            .expect("namespace");
        let log = LogRef::of(&ctx);
        assert_eq!(log.log_key, "s:1");
        assert_eq!(
            log.to_string(),
            format!(
                "events[namespace={:?}, log_key=\"s:1\"]",
                ctx.namespace_key()
            )
        );
        assert_eq!(LogRef::of(&RunContext::new("solo")).log_key, "solo");
    }

    #[test]
    fn conversions_saturate_and_refuse_negative_seqs() {
        assert_eq!(to_i64(5), 5);
        assert_eq!(to_i64(u64::MAX), i64::MAX);
        let ctx = RunContext::new("r");
        assert_eq!(seq_of(7, &LogRef::of(&ctx)).expect("seq"), 7);
        assert!(matches!(
            seq_of(-1, &LogRef::of(&ctx)),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn a_row_that_does_not_decode_names_its_id() {
        let err = decode_rows(vec![(41, "{not json".to_owned())]).expect_err("corrupt");
        assert!(err.to_string().contains("id=41"), "{err}");
    }
}
