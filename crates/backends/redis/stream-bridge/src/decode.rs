//! Reading replies. Entries written by other processes are data to judge: a wrong shape is a typed
//! error or the seed's documented fallback, never a panic.

use fred::types::Value;
use switchyard_core::{Error, Result, StreamEvent};

pub(crate) const KIND_EVENT: &str = "event";
pub(crate) const KIND_END: &str = "end";

/// One stream entry, decoded per the seed: `kind=end` is the end mark (its id is not exposed);
/// missing `kind` is an event, missing `event` is `message`, missing `data` is null, non-JSON
/// `data` is passed on as a JSON string.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    Event(StreamEvent),
    End,
}

pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.to_string()),
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

fn array(v: Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a),
        Value::Null => Some(Vec::new()),
        _ => None,
    }
}

/// Field/value pairs (RESP2 flat array, or a RESP3 map).
pub(crate) fn fields(v: Value) -> Vec<(String, String)> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .filter_map(|c| match c {
                [k, v] => Some((text(k)?, text(v)?)),
                _ => None,
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), text(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

pub(crate) fn is_end(fields: &[(String, String)]) -> bool {
    fields.iter().any(|(k, v)| k == "kind" && v == KIND_END)
}

pub(crate) fn entry(id: String, fields: Vec<(String, String)>, key: &str) -> Entry {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if get("kind") == Some(KIND_END) {
        return Entry::End;
    }
    let data = match get("data") {
        None => serde_json::Value::Null,
        Some(raw) => serde_json::from_str(raw).unwrap_or_else(|_| {
            tracing::warn!(
                key,
                id,
                "stream bridge entry has non-JSON data; passing it on as a string"
            );
            serde_json::Value::String(raw.to_owned())
        }),
    };
    Entry::Event(StreamEvent {
        id,
        event: get("event").unwrap_or("message").to_owned(),
        data,
    })
}

/// `[[id, [f, v, …]], …]` → entries.
pub(crate) fn entries(v: Value, key: &str) -> Result<Vec<(String, Entry)>> {
    let bad = || Error::corrupt(key, "stream reply is not a list of [id, fields] entries");
    let mut out = Vec::new();
    for item in array(v).ok_or_else(bad)? {
        let mut parts = array(item).ok_or_else(bad)?.into_iter();
        let id = parts.next().as_ref().and_then(text).ok_or_else(bad)?;
        let f = fields(parts.next().unwrap_or(Value::Null));
        out.push((id.clone(), entry(id, f, key)));
    }
    Ok(out)
}

/// `(key, id of the last entry read)` for every stream of an `XREAD` reply; nil → none.
pub(crate) fn xread_tails(v: Value) -> Vec<(String, String)> {
    let last_id = |entries: Value| -> Option<String> {
        let last = array(entries)?.pop()?;
        text(array(last)?.first()?)
    };
    match v {
        Value::Array(streams) => streams
            .into_iter()
            .filter_map(|s| {
                let mut kv = array(s)?.into_iter();
                let key = text(&kv.next()?)?;
                Some((key, last_id(kv.next()?)?))
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), last_id(v.clone())?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The snapshot script's reply.
#[derive(Debug)]
pub(crate) enum Snapshot {
    /// No entries (key missing or empty); `entries-added` of the key (0 when missing, -1 unknown).
    Empty { added: i64 },
    Present {
        first: String,
        last: String,
        last_is_end: bool,
        added: i64,
        len: i64,
        entries: Vec<(String, Entry)>,
    },
}

pub(crate) fn snapshot(v: Value, key: &str) -> Result<Snapshot> {
    let bad = |what: &str| Error::corrupt(key, format!("unexpected snapshot reply: {what}"));
    let mut parts = array(v).ok_or_else(|| bad("not a list"))?.into_iter();
    let flag = parts
        .next()
        .and_then(|v| v.as_i64())
        .ok_or_else(|| bad("flag"))?;
    if flag == 0 {
        let added = parts.next().and_then(|v| v.as_i64()).unwrap_or(-1);
        return Ok(Snapshot::Empty { added });
    }
    let first = parts
        .next()
        .as_ref()
        .and_then(text)
        .ok_or_else(|| bad("first id"))?;
    let last = parts
        .next()
        .as_ref()
        .and_then(text)
        .ok_or_else(|| bad("last id"))?;
    let last_is_end = is_end(&fields(parts.next().unwrap_or(Value::Null)));
    let added = parts.next().and_then(|v| v.as_i64()).unwrap_or(-1);
    let len = parts.next().and_then(|v| v.as_i64()).unwrap_or(-1);
    let entries = entries(parts.next().unwrap_or(Value::Null), key)?;
    Ok(Snapshot::Present {
        first,
        last,
        last_is_end,
        added,
        len,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::String(x.into())
    }

    #[test]
    fn entry_fallbacks() {
        let e = entry("1-0".into(), vec![], "k");
        assert_eq!(
            e,
            Entry::Event(StreamEvent {
                id: "1-0".into(),
                event: "message".into(),
                data: serde_json::Value::Null
            })
        );
        let e = entry("1-0".into(), vec![("data".into(), "{not json".into())], "k");
        let Entry::Event(e) = e else { panic!() };
        assert_eq!(e.data, serde_json::json!("{not json"));
        assert_eq!(
            entry("2-0".into(), vec![("kind".into(), "end".into())], "k"),
            Entry::End
        );
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        assert!(snapshot(Value::Integer(3), "k").is_err());
        assert!(snapshot(Value::Array(vec![Value::Integer(1)]), "k").is_err());
        assert!(entries(Value::Array(vec![Value::Integer(1)]), "k").is_err());
        assert!(xread_tails(Value::Array(vec![s("k"), Value::Integer(2)])).is_empty());
        let v = Value::Array(vec![Value::Array(vec![
            s("k"),
            Value::Array(vec![Value::Array(vec![s("5-1"), Value::Array(vec![])])]),
        ])]);
        assert_eq!(xread_tails(v), vec![("k".to_owned(), "5-1".to_owned())]);
    }
}
