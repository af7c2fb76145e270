//! A delivery's task id, read from its body without building the JSON document (ADR 0335).
//!
//! [`task_id_of`](switchyard_core::fleet::task_id_of) parses the whole body into a
//! `serde_json::Value` (a map, a string per key and value) to read one field; a reserve of 100
//! tasks did that 100 times. [`task_id`] answers the same for every input: it walks the same
//! parser over the body, checking every part exactly as the document parse does (so a body that
//! would not parse still has no id), but keeps only the value of the last `"id"` key of a
//! top-level object, as the document's map would.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The envelope's `"id"`: a non-empty string or an integer, as `task_id_of` reads it.
pub(crate) fn task_id(body: &[u8]) -> Option<String> {
    let IdOf(id) = serde_json::from_slice(body).ok()?;
    match id? {
        Value::String(s) if !s.is_empty() => Some(s),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// The value of a top-level object's last `"id"` key. Anything but an object fails to
/// deserialize, which the caller reads as "no id", like the document's `get("id")`.
struct IdOf(Option<Value>);

impl<'de> Deserialize<'de> for IdOf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IdOfVisitor)
    }
}

struct IdOfVisitor;

impl<'de> Visitor<'de> for IdOfVisitor {
    type Value = IdOf;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdOf, A::Error> {
        let mut id = None;
        while let Some(is_id) = map.next_key_seed(IsId)? {
            if is_id {
                id = Some(map.next_value::<Value>()?);
            } else {
                map.next_value::<Checked>()?;
            }
        }
        Ok(IdOf(id))
    }
}

/// Whether a key is `id` (after unescaping).
struct IsId;

impl<'de> DeserializeSeed<'de> for IsId {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for IsId {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == "id")
    }
}

/// Any JSON value, parsed as the document parse would (strings unescaped and checked, numbers
/// read, nesting bounded) and then dropped. `IgnoredAny` would skip strings without those checks.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::fleet::task_id_of;

    use super::task_id;

    #[test]
    fn answers_what_the_document_parse_answers() {
        let deep_ok = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let deep_bad = format!(
            "{{\"id\": 1, \"x\": {}1{}}}",
            "[".repeat(200),
            "]".repeat(200)
        );
        let cases: Vec<Vec<u8>> = [
            r#"{"id": "t-1", "payload": {"a": [1, 2.5, null, true]}}"#,
            r#"{"id": 7}"#,
            r#"{"id": -7}"#,
            r#"{"id": 18446744073709551615}"#,
            r#"{"id": 1.0}"#,
            r#"{"id": 1e3}"#,
            r#"{"id": ""}"#,
            r#"{"id": null}"#,
            r#"{"id": ["x"]}"#,
            r#"{"id": {"x": 1}}"#,
            r#"{"id": "a", "id": "b"}"#,
            r#"{"id": "a", "id": ""}"#,
            r#"{"\u0069d": "escaped key"}"#,
            r#"{"id": "caf\u00e9 \"q\""}"#,
            r#"{"ID": "case"}"#,
            r#"{"x": {"id": "nested"}}"#,
            r#"{"worker": 0, "i": 1, "k": 2}"#,
            r#"["id", "x"]"#,
            r#""id""#,
            "7",
            "null",
            "",
            "not json",
            r#"{"id": "a"} trailing"#,
            r#"{"id": "a",}"#,
            r#"{"id": "a", "x": "\ud800"}"#,
            r#"{"id": "a", "x": "\q"}"#,
            r#"{"id": "a", "x": 1e400}"#,
            r#"{"id": "a", "x": 01}"#,
            "  {\"id\": \"spaced\"}\n",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .chain([
            b"{\"id\": \"a\", \"x\": \"\xff\"}".to_vec(),
            b"{\"id\": \"\xc3\xa9\"}".to_vec(),
            deep_ok.into_bytes(),
            deep_bad.into_bytes(),
        ])
        .collect();
        for body in &cases {
            assert_eq!(
                task_id(body),
                task_id_of(body),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(task_id(br#"{"id": "a", "id": "b"}"#).as_deref(), Some("b"));
        assert_eq!(task_id(br#"{"id": 7}"#).as_deref(), Some("7"));
    }
}
