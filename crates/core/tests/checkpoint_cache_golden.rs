//! The checkpoint cache's entries and keys against what deer-flow's own stack writes: LangGraph's
//! `JsonPlusSerializer` for entries, deer-flow's key functions for keys.
//!
//! The fixtures are written by `tests/fixtures/checkpoint_cache/make.py` (LangGraph installed in
//! a throwaway virtual environment; versions in `versions.txt`) and checked in; every comparison
//! is byte for byte.

use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use switchyard_core::cache::rmpv::Value;
use switchyard_core::cache::{
    DatabaseIdentity, EntrySerializer, HistoryEntry, JsonSerializer, MsgpackSerializer,
    TypedPayload, checkpoint_cache_key_prefix, is_thread_entry_key, make_history_key,
    thread_key_stem,
};

const ENTRIES: &str = include_str!("fixtures/checkpoint_cache/entries.json");
const KEYS: &str = include_str!("fixtures/checkpoint_cache/keys.json");

fn cases() -> Vec<Json> {
    match serde_json::from_str(ENTRIES).expect("entries.json") {
        Json::Array(cases) => cases,
        _ => panic!("entries.json is a list"),
    }
}

fn field<'a>(case: &'a Json, name: &str) -> &'a str {
    case[name]
        .as_str()
        .unwrap_or_else(|| panic!("{name} in {case}"))
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).expect("hex")
}

fn msgpack(payload: Vec<u8>) -> TypedPayload {
    TypedPayload::new("msgpack", payload).expect("tag")
}

/// The shapes too big to check in, built as `make.py` builds them.
fn big(name: &str) -> HistoryEntry {
    match name {
        "big_strings" => HistoryEntry::new(vec![
            Value::from("a".repeat(65535)),
            Value::from("a".repeat(65536)),
        ]),
        "big_list" => HistoryEntry::with_seed(
            (0..70000u64).map(Value::from).collect(),
            Value::Map(vec![(Value::from("k"), Value::from("v".repeat(70000)))]),
        ),
        other => panic!("unknown big shape {other}"),
    }
}

#[test]
fn every_langgraph_entry_decodes_and_re_encodes_byte_for_byte() {
    let mut checked = 0;
    for case in cases() {
        let name = field(&case, "name");
        assert_eq!(field(&case, "tag"), "msgpack", "{name}");
        if case.get("payload_sha256").is_some() {
            let encoded = MsgpackSerializer.dumps_typed(&big(name)).expect("encode");
            assert_eq!(
                encoded.payload().len() as u64,
                case["payload_len"].as_u64().expect("len"),
                "{name}"
            );
            assert_eq!(
                hex::encode(Sha256::digest(encoded.payload())),
                field(&case, "payload_sha256"),
                "{name}: our bytes differ from LangGraph's"
            );
            assert_eq!(
                MsgpackSerializer.loads_typed(&encoded).expect("decode"),
                big(name)
            );
            checked += 1;
            continue;
        }
        let payload = unhex(field(&case, "payload"));
        let stored = msgpack(payload.clone());
        let entry = MsgpackSerializer
            .loads_typed(&stored)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = MsgpackSerializer.dumps_typed(&entry).expect("encode");
        assert_eq!(
            hex::encode(again.payload()),
            hex::encode(&payload),
            "{name}: written back differently"
        );
        // The JSON serializer reads the same entry from the msgpack tag.
        assert_eq!(JsonSerializer.loads_typed(&stored).expect("decode"), entry);
        checked += 1;
    }
    assert!(checked >= 14, "only {checked} cases");
}

#[test]
fn plain_data_built_in_rust_encodes_as_langgraph_does_and_as_python_json_does() {
    let mut checked = 0;
    for case in cases() {
        let Some(text) = case.get("json").and_then(Json::as_str) else {
            continue;
        };
        let name = field(&case, "name");
        // The entry as a Rust caller would build it from JSON values.
        let from_json = JsonSerializer
            .loads_typed(&TypedPayload::new("json", text.as_bytes().to_vec()).expect("tag"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let encoded = MsgpackSerializer.dumps_typed(&from_json).expect("encode");
        assert_eq!(
            hex::encode(encoded.payload()),
            field(&case, "payload"),
            "{name}: msgpack differs from LangGraph's"
        );
        let json = JsonSerializer.dumps_typed(&from_json).expect("encode");
        assert_eq!(
            std::str::from_utf8(json.payload()).expect("utf-8"),
            text,
            "{name}: JSON differs from Python's json.dumps"
        );
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} JSON-able cases");
}

fn decoded(name: &str) -> HistoryEntry {
    let case = cases()
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    MsgpackSerializer
        .loads_typed(&msgpack(unhex(field(&case, "payload"))))
        .expect("decode")
}

/// The fields of a LangGraph extension value: `(code, [module, name, args…])`.
fn ext(v: &Value) -> (i8, Vec<Value>) {
    let Value::Ext(code, data) = v else {
        panic!("not an extension value: {v:?}")
    };
    let mut rest = &data[..];
    match switchyard_core::cache::rmpv::decode::read_value(&mut rest).expect("ext data") {
        Value::Array(items) => (*code, items),
        other => panic!("ext data is not a list: {other:?}"),
    }
}

#[test]
fn values_json_cannot_hold_keep_their_type() {
    let e = decoded("bytes_and_keys");
    assert_eq!(e.writes[0], Value::Binary(vec![]));
    assert_eq!(e.writes[1], Value::Binary(vec![0, 0xff]));
    let Value::Map(pairs) = &e.writes[3] else {
        panic!("map")
    };
    assert_eq!(pairs[0].0, Value::from(1));
    assert_eq!(pairs[1].0, Value::Nil);
    assert_eq!(pairs[2].0, Value::F64(2.5));
    assert!(
        JsonSerializer.dumps_typed(&e).is_err(),
        "JSON cannot hold bytes"
    );

    // Datetimes: EXT_METHOD_SINGLE_ARG with the ISO text and the method that reads it.
    let e = decoded("datetime");
    let (code, fields) = ext(&e.writes[0]);
    assert_eq!(code, 3);
    assert_eq!(
        fields,
        [
            "datetime",
            "datetime",
            "2026-12-01T15:04:05.123456+00:00",
            "fromisoformat"
        ]
        .map(Value::from)
    );
    assert_eq!(e.seed.as_ref(), Some(&e.writes[0]));

    // LangChain messages and pydantic models: EXT_PYDANTIC_V2 with module, class and fields.
    let e = decoded("langchain_messages");
    let (code, fields) = ext(&e.writes[1]);
    assert_eq!(code, 5);
    assert_eq!(fields[0], Value::from("langchain_core.messages.ai"));
    assert_eq!(fields[1], Value::from("AIMessage"));
    let (_, fields) = ext(&decoded("pydantic_model").writes[0]);
    assert_eq!(fields[1], Value::from("Note"));
}

#[test]
fn keys_and_stems_are_deer_flows_for_hostile_thread_ids() {
    let fixture: Json = serde_json::from_str(KEYS).expect("keys.json");
    let threads = fixture["threads"].as_array().expect("threads");
    assert!(threads.len() >= 27 * 3);
    for case in threads {
        let (prefix, thread) = (field(case, "prefix"), field(case, "thread"));
        let stem = thread_key_stem(prefix, thread);
        assert_eq!(stem, field(case, "stem"), "{thread:?}");
        for k in case["keys"].as_array().expect("keys") {
            let parts: Vec<&str> = (0..4).map(|i| k[i].as_str().expect("key part")).collect();
            let key = make_history_key(prefix, thread, parts[0], parts[1], parts[2]);
            assert_eq!(key, parts[3], "{thread:?}");
            // A purge of this thread takes the key; a purge of any other thread does not, even
            // when that thread's stem starts this key (`t1` and `t1:x`).
            for other in threads.iter().filter(|o| o["prefix"] == case["prefix"]) {
                let other_stem = field(other, "stem");
                assert_eq!(
                    is_thread_entry_key(&key, other_stem),
                    other_stem == stem,
                    "key of {thread:?} against the stem of {:?}",
                    other["thread"]
                );
            }
        }
    }
}

#[test]
fn default_prefixes_hash_the_database_identity_as_deer_flow_does() {
    let fixture: Json = serde_json::from_str(KEYS).expect("keys.json");
    let cases = [
        (
            "postgres",
            DatabaseIdentity::Postgres {
                url: "postgresql+asyncpg://u:pw@db:5432/app".into(),
                schema: "public".into(),
            },
        ),
        (
            "postgres_default",
            DatabaseIdentity::Postgres {
                url: "postgresql://".into(),
                schema: "public".into(),
            },
        ),
        (
            "sqlite",
            DatabaseIdentity::Sqlite {
                path: "/data/db.sqlite".into(),
            },
        ),
        ("memory", DatabaseIdentity::Memory),
    ];
    for (name, db) in cases {
        let want = &fixture["prefixes"][name];
        assert_eq!(db.identity(), want[0].as_str().expect("identity"), "{name}");
        assert_eq!(
            checkpoint_cache_key_prefix("", &db),
            want[1].as_str().expect("prefix"),
            "{name}"
        );
    }
}
