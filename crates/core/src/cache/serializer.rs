//! The two entry serializers: `msgpack` (LangGraph's `JsonPlusSerializer`, the default) and
//! `json`. Both read both tags, like `JsonPlusSerializer.loads_typed`; they differ only in what
//! they write (ADR 0211).

use rmpv::Value;

use super::entry::{EntrySerializer, HistoryEntry, TypedPayload, value_from_json, value_to_json};
use crate::pycompat::Dumps;
use crate::{Error, Result};

/// The tag of msgpack entries.
pub const MSGPACK_TAG: &str = "msgpack";
/// The tag of JSON entries.
pub const JSON_TAG: &str = "json";

/// Deepest nesting a stored payload may have; deeper payloads are misses, so decoding a hostile
/// value can never exhaust the stack (serde_json stops at 128 on its own).
const MAX_DEPTH: usize = 512;

/// The default serializer: what LangGraph's `JsonPlusSerializer` writes for deer-flow's entries,
/// byte for byte. Tag `msgpack`; payload a msgpack map `{"writes": […]}` or
/// `{"writes": […], "seed": …}` in that order, every value in its shortest msgpack form (as
/// ormsgpack writes them: integers by value, floats as 64-bit, `str8` for strings of 32 to 255
/// bytes), extension values written back exactly as read.
///
/// Reads `msgpack` and `json` entries.
#[derive(Clone, Copy, Debug, Default)]
pub struct MsgpackSerializer;

/// Tag `json`, payload the entry as compact UTF-8 JSON (`{"writes":[…],"seed":…}`, `seed` omitted
/// when absent), written as Python's `json.dumps(entry, ensure_ascii=False, separators=(",",
/// ":"))` would (ADR 0177). It cannot hold bytes, extension values or non-string map keys (such
/// entries are not cached). deer-flow reads `json` entries through LangChain's reviver, so a
/// value shaped like a LangChain serialization envelope (`{"lc": 1, …}`) can make its read fail:
/// use it only where no deer-flow worker reads the same keys.
///
/// Reads `json` and `msgpack` entries.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonSerializer;

impl EntrySerializer for MsgpackSerializer {
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload> {
        let mut out = Vec::with_capacity(64);
        let map_len = if entry.seed.is_some() { 2 } else { 1 };
        // Writing into a Vec cannot fail but for lengths beyond msgpack's 32-bit counts.
        let too_big = |e: &dyn std::fmt::Display| Error::invalid("entry", e);
        rmp::encode::write_map_len(&mut out, map_len).map_err(|e| too_big(&e))?;
        rmp::encode::write_str(&mut out, "writes").map_err(|e| too_big(&e))?;
        let n = u32::try_from(entry.writes.len())
            .map_err(|_| Error::invalid("entry", "more than 2^32 - 1 writes"))?;
        rmp::encode::write_array_len(&mut out, n).map_err(|e| too_big(&e))?;
        for w in &entry.writes {
            rmpv::encode::write_value(&mut out, w).map_err(|e| too_big(&e))?;
        }
        if let Some(seed) = &entry.seed {
            rmp::encode::write_str(&mut out, "seed").map_err(|e| too_big(&e))?;
            rmpv::encode::write_value(&mut out, seed).map_err(|e| too_big(&e))?;
        }
        TypedPayload::new(MSGPACK_TAG, out)
    }

    fn loads_typed(&self, entry: &TypedPayload) -> Result<HistoryEntry> {
        decode(entry)
    }
}

impl EntrySerializer for JsonSerializer {
    fn dumps_typed(&self, entry: &HistoryEntry) -> Result<TypedPayload> {
        let mut map = serde_json::Map::with_capacity(2);
        map.insert(
            "writes".into(),
            serde_json::Value::Array(
                entry
                    .writes
                    .iter()
                    .map(value_to_json)
                    .collect::<Result<_>>()?,
            ),
        );
        if let Some(seed) = &entry.seed {
            map.insert("seed".into(), value_to_json(seed)?);
        }
        let payload = Dumps::DEFAULT
            .ensure_ascii(false)
            .compact(true)
            .to_vec(&serde_json::Value::Object(map))
            .map_err(|e| Error::invalid("entry", e))?;
        TypedPayload::new(JSON_TAG, payload)
    }

    fn loads_typed(&self, entry: &TypedPayload) -> Result<HistoryEntry> {
        decode(entry)
    }
}

/// Decodes an entry of either tag. Keys other than `writes` and `seed` are ignored, as deer-flow
/// ignores them.
fn decode(entry: &TypedPayload) -> Result<HistoryEntry> {
    match entry.tag() {
        MSGPACK_TAG => decode_msgpack(entry.payload()),
        JSON_TAG => decode_json(entry.payload()),
        other => Err(Error::corrupt(
            "entry",
            format!("type tag `{other}` is neither `msgpack` nor `json`"),
        )),
    }
}

fn decode_msgpack(payload: &[u8]) -> Result<HistoryEntry> {
    check_structure(payload)?;
    let mut rest = payload;
    let value = rmpv::decode::read_value(&mut rest).map_err(|e| Error::corrupt("entry", e))?;
    if !rest.is_empty() {
        return Err(Error::corrupt("entry", "bytes after the msgpack value"));
    }
    let Value::Map(pairs) = value else {
        return Err(Error::corrupt("entry", "not a msgpack map"));
    };
    let mut writes = None;
    let mut seed = None;
    for (k, v) in pairs {
        match k.as_str() {
            Some("writes") => match v {
                Value::Array(items) => writes = Some(items),
                _ => return Err(Error::corrupt("entry", "`writes` is not a list")),
            },
            Some("seed") => seed = Some(v),
            _ => {}
        }
    }
    let writes = writes.ok_or_else(|| Error::corrupt("entry", "no `writes`"))?;
    Ok(HistoryEntry { writes, seed })
}

fn decode_json(payload: &[u8]) -> Result<HistoryEntry> {
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| Error::corrupt("entry", e))?;
    let serde_json::Value::Object(map) = value else {
        return Err(Error::corrupt("entry", "not a JSON object"));
    };
    let writes = match map.get("writes") {
        Some(serde_json::Value::Array(items)) => items.iter().map(value_from_json).collect(),
        Some(_) => return Err(Error::corrupt("entry", "`writes` is not a list")),
        None => return Err(Error::corrupt("entry", "no `writes`")),
    };
    Ok(HistoryEntry {
        writes,
        seed: map.get("seed").map(value_from_json),
    })
}

/// Walks the msgpack structure without building it: every declared length must fit in the bytes
/// that remain (each element takes at least one byte) and nesting must stay within
/// [`MAX_DEPTH`], so a hostile header can neither reserve gigabytes nor recurse without bound.
fn check_structure(payload: &[u8]) -> Result<()> {
    use rmp::Marker;
    let bad = |why: &str| Error::corrupt("entry", why.to_string());
    let mut pos = 0usize;
    // Elements still to read at each open level.
    let mut pending: Vec<u64> = vec![1];
    let take = |pos: &mut usize, n: usize| -> Result<usize> {
        let start = *pos;
        let end = start
            .checked_add(n)
            .filter(|e| *e <= payload.len())
            .ok_or_else(|| bad("truncated msgpack"))?;
        *pos = end;
        Ok(start)
    };
    let be = |bytes: &[u8]| bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    while let Some(top) = pending.last_mut() {
        if *top == 0 {
            pending.pop();
            continue;
        }
        *top -= 1;
        let at = take(&mut pos, 1)?;
        let marker = Marker::from_u8(payload[at]);
        let (skip, children): (u64, u64) = match marker {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
                (0, 0)
            }
            Marker::U8 | Marker::I8 => (1, 0),
            Marker::U16 | Marker::I16 => (2, 0),
            Marker::U32 | Marker::I32 | Marker::F32 => (4, 0),
            Marker::U64 | Marker::I64 | Marker::F64 => (8, 0),
            Marker::FixStr(n) => (u64::from(n), 0),
            Marker::Str8 | Marker::Bin8 => (be(&payload[take(&mut pos, 1)?..pos]), 0),
            Marker::Str16 | Marker::Bin16 => (be(&payload[take(&mut pos, 2)?..pos]), 0),
            Marker::Str32 | Marker::Bin32 => (be(&payload[take(&mut pos, 4)?..pos]), 0),
            Marker::FixExt1 => (2, 0),
            Marker::FixExt2 => (3, 0),
            Marker::FixExt4 => (5, 0),
            Marker::FixExt8 => (9, 0),
            Marker::FixExt16 => (17, 0),
            Marker::Ext8 => (be(&payload[take(&mut pos, 1)?..pos]) + 1, 0),
            Marker::Ext16 => (be(&payload[take(&mut pos, 2)?..pos]) + 1, 0),
            Marker::Ext32 => (be(&payload[take(&mut pos, 4)?..pos]) + 1, 0),
            Marker::FixArray(n) => (0, u64::from(n)),
            Marker::Array16 => (0, be(&payload[take(&mut pos, 2)?..pos])),
            Marker::Array32 => (0, be(&payload[take(&mut pos, 4)?..pos])),
            Marker::FixMap(n) => (0, 2 * u64::from(n)),
            Marker::Map16 => (0, 2 * be(&payload[take(&mut pos, 2)?..pos])),
            Marker::Map32 => (0, 2 * be(&payload[take(&mut pos, 4)?..pos])),
            Marker::Reserved => return Err(bad("reserved msgpack marker")),
        };
        let skip = usize::try_from(skip).map_err(|_| bad("truncated msgpack"))?;
        take(&mut pos, skip)?;
        if children > 0 {
            let left = (payload.len() - pos) as u64;
            if children > left {
                return Err(bad("a msgpack length exceeds the payload"));
            }
            if pending.len() > MAX_DEPTH {
                return Err(bad("msgpack nested too deeply"));
            }
            pending.push(children);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn typed(tag: &str, payload: &[u8]) -> TypedPayload {
        TypedPayload::new(tag, payload.to_vec()).expect("tag")
    }

    #[test]
    fn msgpack_writes_what_langgraph_writes() {
        let s = MsgpackSerializer;
        let e = HistoryEntry::new(vec![Value::from(1)]);
        let t = s.dumps_typed(&e).expect("encode");
        assert_eq!(t.tag(), "msgpack");
        assert_eq!(&t.payload()[..], b"\x81\xa6writes\x91\x01");
        assert_eq!(s.loads_typed(&t).expect("decode"), e);
        let null_seed = HistoryEntry::with_seed(vec![], Value::Nil);
        let t = s.dumps_typed(&null_seed).expect("encode");
        assert_eq!(&t.payload()[..], b"\x82\xa6writes\x90\xa4seed\xc0");
        assert_eq!(s.loads_typed(&t).expect("decode"), null_seed);
    }

    #[test]
    fn json_omits_an_absent_seed_and_keeps_a_null_one() {
        let s = JsonSerializer;
        let none = s
            .dumps_typed(&HistoryEntry::from_json(vec![json!(1)], None))
            .expect("encode");
        assert_eq!(none.tag(), "json");
        assert_eq!(&none.payload()[..], br#"{"writes":[1]}"#);
        let null = HistoryEntry::with_seed(vec![], Value::Nil);
        let encoded = s.dumps_typed(&null).expect("encode");
        assert_eq!(&encoded.payload()[..], br#"{"writes":[],"seed":null}"#);
        let floats = HistoryEntry::from_json(vec![json!([1e-5, 1e16, 0.5, "é"])], None);
        assert_eq!(
            &s.dumps_typed(&floats).expect("encode").payload()[..],
            "{\"writes\":[[1e-05,1e+16,0.5,\"é\"]]}".as_bytes()
        );
        assert_eq!(s.loads_typed(&encoded).expect("decode"), null);
        assert!(
            s.dumps_typed(&HistoryEntry::new(vec![Value::Binary(vec![1])]))
                .is_err()
        );
    }

    #[test]
    fn both_read_both_tags() {
        for s in [&MsgpackSerializer as &dyn EntrySerializer, &JsonSerializer] {
            let from_json = s
                .loads_typed(&typed("json", br#"{"writes": [1], "seed": {"x": 1}}"#))
                .expect("json");
            let from_msgpack = s
                .loads_typed(&typed(
                    "msgpack",
                    b"\x82\xa6writes\x91\x01\xa4seed\x81\xa1x\x01",
                ))
                .expect("msgpack");
            assert_eq!(from_json, from_msgpack);
        }
    }

    #[test]
    fn bad_payloads_and_tags_are_corrupt() {
        let s = MsgpackSerializer;
        let mut deep = vec![0x91u8; 100_000];
        deep.push(0xc0);
        for (tag, payload) in [
            ("pickle", &b"x"[..]),
            ("null", b""),
            ("msgpack", b""),
            ("msgpack", b"\x81"),
            ("msgpack", b"\x91\x01"),
            ("msgpack", b"\x81\xa6writes\x01"),
            ("msgpack", b"\x81\xa6writes\x90\x00"),
            ("msgpack", b"\x80"),
            ("msgpack", b"\xdd\xff\xff\xff\xff"),
            ("msgpack", b"\xdf\xff\xff\xff\xff"),
            ("msgpack", b"\xc6\xff\xff\xff\xff"),
            ("msgpack", b"\xc9\xff\xff\xff\xff\x01"),
            ("msgpack", b"\xc1"),
            ("msgpack", &deep),
            ("json", b"{\"writes\": 3}"),
            ("json", b"\xff"),
            ("json", b"[]"),
        ] {
            assert!(
                matches!(
                    s.loads_typed(&typed(tag, payload)),
                    Err(Error::Corrupt { .. })
                ),
                "{tag} {payload:?}"
            );
        }
    }
}
