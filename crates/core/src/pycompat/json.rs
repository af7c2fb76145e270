//! Python's `json.dumps`, byte for byte, as a serde_json formatter.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;
use serde_json::ser::Formatter;

use super::float::json_float;
use crate::{Error, Result};

/// The arguments of `json.dumps` the Python peers use: `ensure_ascii` and `separators`.
///
/// [`Dumps::DEFAULT`] is `json.dumps(v)`; the builder methods change one argument each:
///
/// ```
/// use switchyard_core::pycompat::Dumps;
/// // json.dumps(v, ensure_ascii=False, separators=(",", ":"))
/// let style = Dumps::DEFAULT.ensure_ascii(false).compact(true);
/// assert_eq!(style.to_string(&serde_json::json!({"é": [1, 1e-05]})), r#"{"é":[1,1e-05]}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dumps {
    ensure_ascii: bool,
    compact: bool,
}

impl Default for Dumps {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Dumps {
    /// `json.dumps(v)`: `", "` and `": "` separators, everything outside printable ASCII escaped.
    pub const DEFAULT: Dumps = Dumps {
        ensure_ascii: true,
        compact: false,
    };

    /// `ensure_ascii=`: `true` escapes every character outside `' '..='~'` as `\uXXXX` (astral
    /// characters as a surrogate pair); `false` writes them as raw UTF-8.
    pub const fn ensure_ascii(self, ensure_ascii: bool) -> Self {
        Dumps {
            ensure_ascii,
            ..self
        }
    }

    /// `separators=(",", ":")` when `true`; Python's default `(", ", ": ")` when `false`.
    pub const fn compact(self, compact: bool) -> Self {
        Dumps { compact, ..self }
    }

    /// The bytes `json.dumps` writes for `value`.
    ///
    /// Fails with [`Error::InvalidInput`] only when `value` is not JSON-shaped (a map whose keys
    /// are not strings or numbers, or a `Serialize` impl that fails); a [`Value`] never fails
    /// (see [`Dumps::to_string`]).
    pub fn to_vec<T: Serialize + ?Sized>(self, value: &T) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(64);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter(self));
        value
            .serialize(&mut ser)
            .map_err(|e| Error::invalid("value", format!("cannot be written as JSON: {e}")))?;
        Ok(out)
    }

    /// [`Dumps::to_vec`] as text.
    pub fn dumps<T: Serialize + ?Sized>(self, value: &T) -> Result<String> {
        let bytes = self.to_vec(value)?;
        // The formatter writes whole UTF-8 strings and ASCII around them.
        String::from_utf8(bytes).map_err(|e| Error::invalid("value", e))
    }

    /// `json.dumps` of a JSON value, which cannot fail: its keys are strings and its numbers
    /// finite.
    pub fn to_string(self, value: &Value) -> String {
        self.dumps(value).unwrap_or_else(|_| "null".to_owned())
    }
}

/// `json.dumps(value)` with default arguments (see [`Dumps::DEFAULT`]).
pub fn dumps<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    Dumps::DEFAULT.dumps(value)
}

/// `json.dumps(s, ensure_ascii=…)` of one string: the quoted, escaped form Python writes for it,
/// as a JSON string value or object key.
pub fn quote(s: &str, ensure_ascii: bool) -> String {
    Dumps::DEFAULT
        .ensure_ascii(ensure_ascii)
        .to_string(&Value::from(s))
}

/// serde_json's compact formatter with Python's separators, float spellings and (optionally)
/// ASCII escaping. serde_json already escapes exactly Python's set otherwise: `"`, `\`, the
/// control characters below U+0020 (as `\n`, `\r`, `\t`, `\b`, `\f` or lowercase `\u00XX`),
/// and leaves `/` and U+007F alone.
struct PyFormatter(Dumps);

impl PyFormatter {
    fn item_separator(&self) -> &'static [u8] {
        if self.0.compact { b"," } else { b", " }
    }
}

impl Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_separator())
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(self.item_separator())
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(if self.0.compact { b":" } else { b": " })
    }

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        // Python has no single-precision float: it would print the widened double.
        w.write_all(json_float(f64::from(value)).as_bytes())
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(json_float(value).as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.0.ensure_ascii {
            return w.write_all(fragment.as_bytes());
        }
        // Fragments hold no character serde_json escapes itself; escape the rest of what lies
        // outside printable ASCII (DEL included), as `\uXXXX` code units of UTF-16.
        let mut units = [0u16; 2];
        let mut plain = 0;
        for (at, c) in fragment.char_indices() {
            if (' '..='~').contains(&c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[plain..at])?;
            for unit in c.encode_utf16(&mut units) {
                write!(w, "\\u{unit:04x}")?;
            }
            plain = at + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[plain..])
    }
}
