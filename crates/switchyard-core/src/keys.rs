//! Key-segment escaping shared by every key-value adapter.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

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
    use super::quote;

    #[test]
    fn quote_matches_python() {
        assert_eq!(quote("a:b"), "a%3Ab");
        assert_eq!(quote("x/y z:1"), "x%2Fy%20z%3A1");
        assert_eq!(quote("é~_.-"), "%C3%A9~_.-");
        assert_eq!(quote("{t}%"), "%7Bt%7D%25");
        assert_eq!(quote(""), "");
    }
}
