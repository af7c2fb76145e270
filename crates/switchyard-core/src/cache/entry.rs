//! Typed cache entries and the serializers that turn them into a type tag plus bytes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::pycompat::Dumps;
use crate::{Error, Result};

/// A channel's history at one checkpoint: the writes since the last snapshot and, when the history
/// starts from a snapshot, its seed value.
///
/// `seed: None` means "no seed" (the key is absent in JSON) and is distinct from
/// `seed: Some(Value::Null)` (a seed whose value is `null`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The channel writes, oldest first.
    pub writes: Vec<Value>,
    /// The snapshot value the writes apply to, when there is one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub seed: Option<Value>,
}

// `Option<Value>` would read `"seed": null` as `None`; a present key is always `Some`.
fn present<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
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
}

/// An encoded entry: the serializer's type tag and its payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypedPayload {
    /// Names the encoding, e.g. `json`. Never contains a NUL byte (adapters use NUL as separator).
    pub tag: String,
    /// The encoded entry; may contain any bytes, NUL included.
    pub payload: Vec<u8>,
}

/// Encodes entries for adapters that store bytes, in the shape of LangGraph's
/// `dumps_typed`/`loads_typed`: a type tag plus a payload, decoded by the tag.
pub trait EntrySerializer: Send + Sync + fmt::Debug {
    /// Encodes `entry`. An error means this entry is not cached (the cache logs and skips it).
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload>;

    /// Decodes a payload stored under `tag`. An error (unknown tag, bad payload) is a cache miss.
    fn loads_typed(&self, tag: &str, payload: &[u8]) -> Result<HistoryEntry>;
}

/// The default serializer: tag `json`, payload the entry as compact UTF-8 JSON
/// (`{"writes":[…],"seed":…}`, `seed` omitted when absent), written as Python's
/// `json.dumps(entry, ensure_ascii=False, separators=(",", ":"))` would (ADR 0177). LangGraph's
/// `JsonPlusSerializer` reads the `json` tag with `json.loads`, so Python workers can read these
/// entries.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonSerializer;

impl JsonSerializer {
    /// The tag this serializer writes and reads.
    pub const TAG: &'static str = "json";
}

impl EntrySerializer for JsonSerializer {
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload> {
        let payload = Dumps::DEFAULT
            .ensure_ascii(false)
            .compact(true)
            .to_vec(entry)
            .map_err(|e| Error::invalid("entry", e))?;
        Ok(TypedPayload {
            tag: Self::TAG.to_string(),
            payload,
        })
    }

    fn loads_typed(&self, tag: &str, payload: &[u8]) -> Result<HistoryEntry> {
        if tag != Self::TAG {
            return Err(Error::corrupt(
                "entry",
                format!("type tag `{tag}` is not `{}`", Self::TAG),
            ));
        }
        serde_json::from_slice(payload).map_err(|e| Error::corrupt("entry", e))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_omits_an_absent_seed_and_keeps_a_null_one() {
        let s = JsonSerializer;
        let none = s
            .dumps_typed(&HistoryEntry::new(vec![json!(1)]))
            .expect("encode");
        assert_eq!(none.tag, "json");
        assert_eq!(none.payload, br#"{"writes":[1]}"#);
        let null = HistoryEntry::with_seed(vec![], Value::Null);
        let encoded = s.dumps_typed(&null).expect("encode");
        assert_eq!(encoded.payload, br#"{"writes":[],"seed":null}"#);
        // Floats as Python writes them; non-ASCII raw.
        let floats = HistoryEntry::new(vec![json!([1e-5, 1e16, 0.5, "é"])]);
        assert_eq!(
            s.dumps_typed(&floats).expect("encode").payload,
            "{\"writes\":[[1e-05,1e+16,0.5,\"é\"]]}".as_bytes()
        );
        assert_eq!(
            s.loads_typed("json", &encoded.payload).expect("decode"),
            null
        );
        assert_eq!(
            s.loads_typed("json", br#"{"writes":[1]}"#)
                .expect("decode")
                .seed,
            None
        );
    }

    #[test]
    fn json_refuses_other_tags_and_bad_payloads() {
        let s = JsonSerializer;
        assert!(matches!(
            s.loads_typed("msgpack", b"{}"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            s.loads_typed("json", b"{\"writes\": 3}"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            s.loads_typed("json", b"\xff"),
            Err(Error::Corrupt { .. })
        ));
    }
}
