//! What the port stores (a type tag plus payload bytes) and what the typed layer above it decodes
//! them into (ADR 0210).

use std::fmt;

use bytes::Bytes;
use rmpv::Value;

use crate::{Error, Result};

/// One stored cache entry as the port sees it: the serializer's type tag and its payload bytes,
/// in the shape of LangGraph's `dumps_typed` (`(tag, bytes)`).
///
/// The port never looks inside: an entry written by a Python worker and read back by switchyard
/// is the same tag and the same bytes, so writing it back is byte-identical (ADR 0210).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TypedPayload {
    tag: String,
    payload: Bytes,
}

impl TypedPayload {
    /// An entry of `tag` and `payload`. The tag names the encoding (`msgpack`, `json`, …) and may
    /// not contain a NUL character, because shared stores keep `tag NUL payload` in one value;
    /// the payload may hold any bytes.
    pub fn new(tag: impl Into<String>, payload: impl Into<Bytes>) -> Result<Self> {
        let tag = tag.into();
        if tag.contains('\0') {
            return Err(Error::invalid(
                "tag",
                "contains a NUL character; use a tag without one (the tag is followed by NUL in stored values)",
            ));
        }
        Ok(TypedPayload {
            tag,
            payload: payload.into(),
        })
    }

    /// The type tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The payload bytes.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The tag and the payload.
    pub fn into_parts(self) -> (String, Bytes) {
        (self.tag, self.payload)
    }
}

impl fmt::Debug for TypedPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A payload can be a megabyte: show its size and the start only.
        const SHOWN: usize = 32;
        let head = &self.payload[..self.payload.len().min(SHOWN)];
        f.debug_struct("TypedPayload")
            .field("tag", &self.tag)
            .field("len", &self.payload.len())
            .field("head", &Bytes::copy_from_slice(head))
            .finish()
    }
}

/// A channel's history at one checkpoint: the writes since the last snapshot and, when the history
/// starts from a snapshot, its seed value.
///
/// Values are msgpack values ([`rmpv::Value`], re-exported as [`crate::cache::rmpv`]), the data
/// model of LangGraph's `JsonPlusSerializer`: maps (with any keys, in order), lists, strings,
/// integers, floats, bytes, `None`, booleans, and extension values (datetimes, pydantic models,
/// LangChain messages) kept as their extension code and bytes, so they survive a round trip
/// unchanged. [`value_from_json`] builds values from `serde_json` ones.
///
/// `seed: None` means "no seed" (the key is absent) and is distinct from
/// `seed: Some(Value::Nil)` (a seed whose value is `None`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryEntry {
    /// The channel writes, oldest first.
    pub writes: Vec<Value>,
    /// The snapshot value the writes apply to, when there is one.
    pub seed: Option<Value>,
}

impl HistoryEntry {
    /// An entry with `writes` and no seed.
    pub fn new(writes: Vec<Value>) -> Self {
        HistoryEntry { writes, seed: None }
    }

    /// An entry with `writes` applied to `seed`.
    pub fn with_seed(writes: Vec<Value>, seed: Value) -> Self {
        HistoryEntry {
            writes,
            seed: Some(seed),
        }
    }

    /// An entry of JSON values (see [`value_from_json`]).
    pub fn from_json(writes: Vec<serde_json::Value>, seed: Option<serde_json::Value>) -> Self {
        HistoryEntry {
            writes: writes.iter().map(value_from_json).collect(),
            seed: seed.as_ref().map(value_from_json),
        }
    }
}

/// Encodes entries into a [`TypedPayload`] and decodes them back, like LangGraph's
/// `dumps_typed`/`loads_typed`.
pub trait EntrySerializer: Send + Sync + fmt::Debug {
    /// Encodes `entry`. An error means this entry is not cached (the cache logs and skips it).
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload>;

    /// Decodes a stored entry. An error (unknown tag, bad payload) is a cache miss.
    fn loads_typed(&self, entry: &TypedPayload) -> Result<HistoryEntry>;
}

/// The msgpack value of a JSON value: `null` → nil, numbers → integers when they are integers
/// (`u64`/`i64`) else 64-bit floats, objects → maps with string keys in their order.
pub fn value_from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                Value::F64(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => {
            Value::Array(items.iter().map(value_from_json).collect())
        }
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (Value::from(k.as_str()), value_from_json(v)))
                .collect(),
        ),
    }
}

/// The JSON value of a msgpack value, when JSON can hold it: bytes, extension values, map keys
/// that are not strings, strings that are not UTF-8 and non-finite floats cannot
/// ([`Error::InvalidInput`], naming what to use instead).
pub fn value_to_json(v: &Value) -> Result<serde_json::Value> {
    let refuse = |what: &str| {
        Error::invalid(
            "entry",
            format!("JSON cannot hold {what}; use the msgpack serializer for such values"),
        )
    };
    Ok(match v {
        Value::Nil => serde_json::Value::Null,
        Value::Boolean(b) => serde_json::Value::Bool(*b),
        Value::Integer(i) => {
            if let Some(u) = i.as_u64() {
                serde_json::Value::from(u)
            } else if let Some(n) = i.as_i64() {
                serde_json::Value::from(n)
            } else {
                return Err(refuse("this integer"));
            }
        }
        Value::F32(x) => float_to_json(f64::from(*x)).ok_or_else(|| refuse("NaN or infinity"))?,
        Value::F64(x) => float_to_json(*x).ok_or_else(|| refuse("NaN or infinity"))?,
        Value::String(s) => match s.as_str() {
            Some(s) => serde_json::Value::from(s),
            None => return Err(refuse("a string that is not UTF-8")),
        },
        Value::Binary(_) => return Err(refuse("bytes")),
        Value::Ext(..) => return Err(refuse("an extension value (datetime, model, message)")),
        Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(value_to_json).collect::<Result<_>>()?)
        }
        Value::Map(pairs) => {
            let mut map = serde_json::Map::with_capacity(pairs.len());
            for (k, v) in pairs {
                let Some(k) = k.as_str() else {
                    return Err(refuse("a map key that is not a string"));
                };
                map.insert(k.to_string(), value_to_json(v)?);
            }
            serde_json::Value::Object(map)
        }
    })
}

fn float_to_json(x: f64) -> Option<serde_json::Value> {
    serde_json::Number::from_f64(x).map(serde_json::Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tag_with_nul_is_refused() {
        assert!(matches!(
            TypedPayload::new("a\0b", Bytes::new()),
            Err(Error::InvalidInput { .. })
        ));
        let p = TypedPayload::new("msgpack", vec![0u8, 1, 0]).expect("valid");
        assert_eq!(p.tag(), "msgpack");
        assert_eq!(&p.payload()[..], &[0, 1, 0]);
        assert!(format!("{p:?}").contains("len: 3"));
    }

    #[test]
    fn json_values_convert_both_ways() {
        let v = json!({"z": 1, "a": [-1, 1.5, u64::MAX, null, true, "é"]});
        let m = value_from_json(&v);
        assert_eq!(value_to_json(&m).expect("json"), v);
        // Order is kept.
        let Value::Map(pairs) = &m else { panic!("map") };
        assert_eq!(pairs[0].0, Value::from("z"));
        for bad in [
            Value::Binary(vec![1]),
            Value::Ext(3, vec![]),
            Value::F64(f64::NAN),
            Value::Map(vec![(Value::from(1), Value::Nil)]),
        ] {
            assert!(value_to_json(&bad).is_err(), "{bad:?}");
        }
    }
}
