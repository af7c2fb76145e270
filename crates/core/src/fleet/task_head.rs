//! What the port reads of an envelope: its id, `max_attempts` and `last_error`, in one pass over
//! the body without building the JSON document (ADR 0335, moved to core by ADR 0380).
//!
//! [`task_id_of`](super::task_id_of) parses the whole body into a `serde_json::Value` (a map, a
//! string per key and value) to read one field; a reserve of 100 tasks did that 100 times.
//! [`task_head`] answers the same for every input: it walks the same parser over the body,
//! checking every part exactly as the document parse does (so a body that would not parse still
//! has no id), but keeps only the values of the last `"id"`, `"max_attempts"` and `"last_error"`
//! keys of a top-level object, as the document's map would.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The longest `last_error` a task record keeps, in bytes (cut on a character boundary).
pub const MAX_LAST_ERROR_BYTES: usize = 4096;

/// What the port reads of a task's body (see the module docs). A body that is not a JSON object
/// has the default: no id, no maximum, no error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskHead {
    /// The envelope's `"id"`: a non-empty string, or an integer written in decimal. Only a body
    /// with an id has a task record (ADR 0380).
    pub id: Option<String>,
    /// The envelope's `"max_attempts"`, when it is an integer that fits a `u32`.
    pub max_attempts: Option<u32>,
    /// `last_error.message` (or `last_error` itself when it is a string), cut to
    /// [`MAX_LAST_ERROR_BYTES`].
    pub last_error: Option<String>,
}

impl TaskHead {
    /// The head of a task with this id and nothing else (tests, callers that know the id).
    pub fn with_id(id: impl Into<String>) -> Self {
        TaskHead {
            id: Some(id.into()),
            ..TaskHead::default()
        }
    }
}

/// The head of `body` (see [`TaskHead`]).
pub fn task_head(body: &[u8]) -> TaskHead {
    let Ok(Fields { id, max, error }) = serde_json::from_slice::<Fields>(body) else {
        return TaskHead::default();
    };
    let id = match id {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    };
    let max_attempts = max
        .as_ref()
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    let last_error = match error {
        Some(Value::String(s)) => Some(s),
        Some(Value::Object(mut m)) => match m.remove("message") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
    .map(|s| cut_to_bytes(s, MAX_LAST_ERROR_BYTES));
    TaskHead {
        id,
        max_attempts,
        last_error,
    }
}

/// The envelope's id alone (see [`task_head`]).
pub fn task_id(body: &[u8]) -> Option<String> {
    task_head(body).id
}

/// `s` cut to at most `max` bytes on a character boundary.
pub fn cut_to_bytes(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The values of a top-level object's last `"id"`, `"max_attempts"` and `"last_error"` keys.
/// Anything but an object fails to deserialize, which the caller reads as "no head", like the
/// document's `get`.
struct Fields {
    id: Option<Value>,
    max: Option<Value>,
    error: Option<Value>,
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldsVisitor)
    }
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut fields = Fields {
            id: None,
            max: None,
            error: None,
        };
        while let Some(key) = map.next_key_seed(Known)? {
            match key {
                Key::Id => fields.id = Some(map.next_value::<Value>()?),
                Key::Max => fields.max = Some(map.next_value::<Value>()?),
                Key::Error => fields.error = Some(map.next_value::<Value>()?),
                Key::Other => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(fields)
    }
}

enum Key {
    Id,
    Max,
    Error,
    Other,
}

/// Which key (after unescaping) this is.
struct Known;

impl<'de> DeserializeSeed<'de> for Known {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Known {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, v: &str) -> Result<Key, E> {
        Ok(match v {
            "id" => Key::Id,
            "max_attempts" => Key::Max,
            "last_error" => Key::Error,
            _ => Key::Other,
        })
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
    use super::{task_head, task_id};
    use crate::fleet::task_id_of;

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

    #[test]
    fn reads_max_attempts_and_the_last_error() {
        let head = task_head(
            br#"{"id": "t", "max_attempts": 3, "last_error": {"message": "boom", "attempt": 2}}"#,
        );
        assert_eq!(head.id.as_deref(), Some("t"));
        assert_eq!(head.max_attempts, Some(3));
        assert_eq!(head.last_error.as_deref(), Some("boom"));
        let head = task_head(br#"{"id": "t", "max_attempts": -1, "last_error": "plain"}"#);
        assert_eq!(head.max_attempts, None);
        assert_eq!(head.last_error.as_deref(), Some("plain"));
        let long = format!(r#"{{"id": 1, "last_error": "{}"}}"#, "é".repeat(3000));
        let kept = task_head(long.as_bytes()).last_error.expect("an error");
        assert!(kept.len() <= super::MAX_LAST_ERROR_BYTES && kept.len() > 4000);
        assert_eq!(task_head(b"not json"), super::TaskHead::default());
    }
}
