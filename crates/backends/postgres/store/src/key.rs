//! agentdeck's advisory-lock keys (ADR 0377): the numbers its Python `PostgresEventStore` takes
//! `pg_advisory_xact_lock` and `pg_advisory_lock` on, so both stores queue on one lock.

use blake2::Blake2b;
use blake2::digest::Digest;
use blake2::digest::consts::U8;

/// agentdeck's `_advisory_key(name)`: BLAKE2b of the name's UTF-8 with an 8-byte digest (the
/// digest size is part of BLAKE2b's parameters, so this is not a cut of a longer digest), read as
/// a big-endian signed 64-bit integer.
pub(crate) fn advisory_key(name: &str) -> i64 {
    let digest: [u8; 8] = Blake2b::<U8>::digest(name.as_bytes()).into();
    i64::from_be_bytes(digest)
}

/// The lock of one log, taken by every write of it: the key of `namespace + "\0" + log_key`.
pub(crate) fn log_lock_key(namespace: &str, log_key: &str) -> i64 {
    advisory_key(&format!("{namespace}\0{log_key}"))
}

/// The lock the pushes to one log's line take turns on (ADR 0394): a key of our own, not the
/// log's, so pushes never queue behind the log's appends and claims (agentdeck's included). The
/// name is no log's: read as one, its log key would hold a NUL, which PostgreSQL cannot store. A
/// clash of two keys would only make two unrelated calls take turns, never let two pushes overlap.
pub(crate) fn line_lock_key(namespace: &str, log_key: &str) -> i64 {
    advisory_key(&format!("switchyard:line\0{namespace}\0{log_key}"))
}

/// The session lock agentdeck holds while it creates its schema's objects, named after the schema.
pub(crate) fn setup_lock_key(schema: &str) -> i64 {
    advisory_key(&format!("agentdeck:events:setup:{schema}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values Python 3.12 prints for `int.from_bytes(hashlib.blake2b(name.encode(),
    /// digest_size=8).digest(), "big", signed=True)`.
    #[test]
    fn keys_are_agentdecks() {
        assert_eq!(log_lock_key("acme", "s1"), 2_691_614_030_021_222_132);
        assert_eq!(log_lock_key("", "solo"), 8_938_158_609_647_843_924);
        assert_eq!(log_lock_key("ns/ü", "s \"q\" ✓"), 1_354_996_975_966_537_914);
        assert_ne!(line_lock_key("acme", "s1"), log_lock_key("acme", "s1"));
        assert_eq!(
            setup_lock_key("agentdeck_events"),
            -3_577_424_964_766_591_962
        );
    }
}
