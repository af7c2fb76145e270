//! JSON exactly as Python's `json.dumps` writes it with default arguments: `", "` and `": "`
//! separators, non-ASCII (and DEL) escaped as `\uXXXX` (surrogate pairs beyond the BMP), and
//! floats in `repr` form (`1.0`, `1e-05`, `1.5e+16`). The seed's producers build task envelopes
//! this way, and a Python service sharing the store compares bytes (ADR 0073).

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

#[derive(Debug, Default, Clone, Copy)]
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

    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        w.write_all(float_repr(f64::from(value)).as_bytes())
    }

    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(float_repr(value).as_bytes())
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

/// Python's `repr(float)` as `json.dumps` writes it (`NaN` and `Infinity` included).
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // `{:e}` gives the shortest round-trip digits, like Python's repr; only the layout differs.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let body = if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = usize::try_from(exp).unwrap_or(0) + 1;
            if digits.len() <= int_len {
                format!("{digits}{}.0", "0".repeat(int_len - digits.len()))
            } else {
                format!("{}.{}", &digits[..int_len], &digits[int_len..])
            }
        } else {
            let zeros = usize::try_from(-exp - 1).unwrap_or(0);
            format!("0.{}{digits}", "0".repeat(zeros))
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{frac}e{esign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

/// `json.dumps(value)` of anything serde can serialize.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    value.serialize(&mut ser)?;
    Ok(out)
}

/// [`to_vec`] as a `String` (the output is ASCII).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let bytes = to_vec(value)?;
    // The formatter escapes everything outside printable ASCII.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn matches_python_dumps() {
        let v = json!({"query": "caf\u{e9}", "page": 1, "l": [1, 2.5, null, true],
                       "e": "\u{1F600}\n\u{7f}\"\\/"});
        assert_eq!(
            to_string(&v).expect("dumps"),
            r#"{"query": "caf\u00e9", "page": 1, "l": [1, 2.5, null, true], "e": "\ud83d\ude00\n\u007f\"\\/"}"#
        );
        assert_eq!(to_string(&json!({})).expect("dumps"), "{}");
        assert_eq!(to_string(&json!([])).expect("dumps"), "[]");
    }

    #[test]
    fn floats_like_python_repr() {
        for (x, want) in [
            (1.0, "1.0"),
            (1795999426.797343, "1795999426.797343"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (-2.5, "-2.5"),
            (123456.0, "123456.0"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "Infinity"),
        ] {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }
}
