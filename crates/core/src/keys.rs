//! Key-segment escaping shared by every key-value adapter, and the rule for the names clients
//! address things by.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::{Error, Result};

/// The longest name a client may address a run, session, namespace, queue or task by, in bytes.
pub const MAX_ID_BYTES: usize = 512;

/// Checks a name a client addresses something by (a run, session, namespace, queue, task):
/// 1..=[`MAX_ID_BYTES`] bytes without control characters. `:`, `{`, `}`, `%`, `/`, spaces and
/// unicode are fine, since every adapter escapes its key segments; control characters are not,
/// because such a name cannot be typed in a URL, a header or a log line and be read back as the
/// same name. The gateway checks every id with this, and a schedule's target queue is checked
/// with it too, so a schedule can never fill a queue that no queue route could reach.
pub fn check_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Error::invalid(
            field,
            format_args!(
                "is {} bytes, longer than the {MAX_ID_BYTES} a name may have; use a shorter one",
                id.len()
            ),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid(
            field,
            "must not contain control characters (NUL, newlines, tabs, DEL, …); use printable \
             characters only",
        ));
    }
    Ok(())
}

/// Python's `urllib.parse.quote(s, safe="")`: leaves `A–Z a–z 0–9 _ . - ~` and percent-encodes every
/// other UTF-8 byte with uppercase hex. The seeds escape every key segment this way, so a segment can
/// never contain the `:` separator (or `{`, `}`), whatever the id.
const QUOTE_SAFE_NONE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// Escapes one key segment exactly like Python's `quote(s, safe="")`.
pub fn quote(segment: &str) -> String {
    utf8_percent_encode(segment, QUOTE_SAFE_NONE).to_string()
}

#[cfg(test)]
mod tests {
    use super::{MAX_ID_BYTES, check_id, quote};

    #[test]
    fn ids_are_printable_and_bounded() {
        for good in ["run-1", "a:b{c}%2F/ é✓", "x", &"x".repeat(MAX_ID_BYTES)] {
            assert!(check_id("queue", good).is_ok(), "{good:?}");
        }
        let long = "x".repeat(MAX_ID_BYTES + 1);
        for bad in [
            "",
            "a\nb",
            "a\0b",
            "a\rb",
            "a\u{7f}b",
            "\u{85}",
            long.as_str(),
        ] {
            let err = check_id("queue", bad).expect_err(bad);
            assert!(
                matches!(&err, crate::Error::InvalidInput { field, .. } if field == "queue"),
                "{err:?}"
            );
        }
    }

    #[test]
    fn quote_matches_python() {
        assert_eq!(quote("a:b"), "a%3Ab");
        assert_eq!(quote("x/y z:1"), "x%2Fy%20z%3A1");
        assert_eq!(quote("é~_.-"), "%C3%A9~_.-");
        assert_eq!(quote("{t}%"), "%7Bt%7D%25");
        assert_eq!(quote(""), "");
    }
}
