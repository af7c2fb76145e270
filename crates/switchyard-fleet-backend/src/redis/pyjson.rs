//! JSON exactly as Python's `json.dumps` writes it with default arguments: `", "` and `": "`
//! separators and non-ASCII escaped as `\uXXXX`, so documents written here are byte-identical to
//! the seed's (the stats history ZSET uses the document as its member, so bytes matter).

use std::io::{self, Write};

use serde_json::Value;
use serde_json::ser::Formatter;

#[derive(Debug, Default)]
struct PyFormatter;

impl Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        for c in fragment.chars() {
            if (' '..='~').contains(&c) {
                w.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// `json.dumps(value)`.
pub fn dumps(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    // Serializing a `Value` into a Vec cannot fail.
    let _ = serde::Serialize::serialize(value, &mut ser);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn matches_python_dumps() {
        assert_eq!(
            super::dumps(
                &json!({"query": "caf\u{e9}", "page": 1, "l": [1, 2.5, null, true], "e": "\u{1F600}\n\u{7f}"})
            ),
            r#"{"query": "caf\u00e9", "page": 1, "l": [1, 2.5, null, true], "e": "\ud83d\ude00\n\u007f"}"#
        );
        assert_eq!(super::dumps(&json!({})), "{}");
    }
}
