//! The schemas against the model: one per known kind, and real payloads, blocks and events
//! validate against them while a typo'd kind or a broken rule does not.

use serde_json::{Value, json};

use super::*;
use crate::RunContext;
use crate::event::stamp;

/// The schemas `T` registers, as the `components` of a document whose root is `T`'s schema.
fn validator<T: ToSchema>() -> jsonschema::Validator {
    let mut schemas = vec![(T::name().to_string(), T::schema())];
    T::schemas(&mut schemas);
    let components: serde_json::Map<String, Value> = schemas
        .into_iter()
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/components/schemas/{}", T::name()),
        "components": {"schemas": components},
    });
    match jsonschema::draft202012::new(&root) {
        Ok(v) => v,
        Err(e) => panic!("{} does not compile: {e}\n{root}", T::name()),
    }
}

fn errors(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// One payload of every known kind as a client sends it (`null`s left out where optional).
fn bodies() -> Vec<Value> {
    let sha = "0123456789abcdef".repeat(4);
    vec![
        json!({"kind": "run.started", "invocable": "a", "kind_of_invocable": "workflow", "input": [
            {"type": "text", "text": "hi"},
            {"type": "image", "media_type": "image/png", "data_b64": "aGk="},
            {"type": "audio", "media_type": "audio/wav", "data_b64": ""},
            {"type": "resource", "uri": "s3://x"},
            {"type": "data", "data": [1, null]},
            {"type": "video", "uri": "later"}]}),
        json!({"kind": "run.completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 2, "usd": 0.5}}),
        json!({"kind": "run.failed", "error_code": "tool_error", "message": "m", "retryable": true}),
        json!({"kind": "run.paused"}),
        json!({"kind": "run.resumed", "reason": "ok", "value": [{"type": "text", "text": "yes"}]}),
        json!({"kind": "run.cancelled", "reason": null}),
        json!({"kind": "run.interrupted", "interrupt_id": "i", "reason": "approval", "payload": {"a": 1}}),
        json!({"kind": "control.requested", "verb": "steer"}),
        json!({"kind": "control.observed", "verb": "cancel", "safe_point": "node_boundary"}),
        json!({"kind": "text.delta", "message_id": "m", "text": "é"}),
        json!({"kind": "thought.delta", "message_id": "m", "text": ""}),
        json!({"kind": "message.completed", "message_id": "m", "text": "done"}),
        json!({"kind": "tool.call.started", "call_id": "c", "tool": "t", "args": {}}),
        json!({"kind": "tool.call.completed", "call_id": "c", "tool": "t", "result_preview": "p",
               "result_size": 1, "result_sha256": sha}),
        json!({"kind": "node.updated", "node": "n", "state_patch": {"x": [1]}}),
        json!({"kind": "artifact.created", "artifact_id": "a", "media_type": "text/plain", "uri": "file:///x", "size": 3}),
        json!({"kind": "usage.reported", "model": "m", "usage": {"input_tokens": 0, "output_tokens": 0}}),
        json!({"kind": "input.appended", "input": [], "source": "user"}),
        json!({"kind": "status.reported", "message": "working"}),
        json!({"kind": "progress.reported", "step": "s", "current": 1, "total": 2}),
        json!({"kind": "custom", "name": "acme.thing", "data": {}}),
    ]
}

#[test]
fn every_known_kind_has_exactly_one_schema() {
    let kinds: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
    assert_eq!(kinds, KNOWN_KINDS, "KINDS follows KNOWN_KINDS");
    let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), KNOWN_KINDS.len(), "one schema name per kind");

    let payload = serde_json::to_value(Payload::schema()).unwrap_or_default();
    let items = payload["oneOf"].as_array().map(Vec::len);
    assert_eq!(items, Some(KNOWN_KINDS.len()), "{payload}");
    let mapping = payload["discriminator"]["mapping"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert_eq!(payload["discriminator"]["propertyName"], "kind");
    let mut mapped: Vec<&str> = mapping.keys().map(String::as_str).collect();
    let mut known = KNOWN_KINDS.to_vec();
    mapped.sort_unstable();
    known.sort_unstable();
    assert_eq!(mapped, known);

    let mut schemas = Vec::new();
    Payload::schemas(&mut schemas);
    for k in &KINDS {
        let (_, schema) = schemas
            .iter()
            .find(|(name, _)| name == k.name)
            .unwrap_or_else(|| panic!("{} is not registered", k.name));
        let schema = serde_json::to_value(schema).unwrap_or_default();
        assert_eq!(schema["properties"]["kind"]["enum"], json!([k.kind]));
        assert_eq!(schema["required"][0], "kind", "{schema}");
        assert_eq!(
            mapping[k.kind],
            format!("#/components/schemas/{}", k.name),
            "the discriminator maps {} to its schema",
            k.kind
        );
    }
}

#[test]
fn every_kind_validates_as_sent_and_as_stored() {
    let payloads = validator::<Payload>();
    let events = validator::<Event>();
    let bodies = bodies();
    let mut seen: Vec<String> = Vec::new();
    let ctx = RunContext::new("r").with_session("s");
    for body in &bodies {
        assert_eq!(errors(&payloads, body), Vec::<String>::new(), "{body}");
        // The model reads it, and what it stores (nulls written out) validates too.
        let payload = match Payload::from_value(body) {
            Ok(p) => p,
            Err(e) => panic!("the model refuses {body}: {e}"),
        };
        seen.push(payload.kind().to_string());
        let stored = serde_json::to_value(&payload).unwrap_or_default();
        assert_eq!(errors(&payloads, &stored), Vec::<String>::new(), "{stored}");
        let event = Event::stamp_batch(&ctx, "o", 0, stamp(chrono::Utc::now()), [payload]);
        let event = serde_json::to_value(&event[0]).unwrap_or_default();
        assert_eq!(errors(&events, &event), Vec::<String>::new(), "{event}");
    }
    assert_eq!(seen, KNOWN_KINDS, "a body of every kind, in order");
}

#[test]
fn typos_and_broken_rules_do_not_validate() {
    let payloads = validator::<Payload>();
    let sha = "0123456789abcdef".repeat(4);
    for bad in [
        json!({"kind": "tool.call", "call_id": "c", "tool": "t", "args": {}}),
        json!({"kind": "text.delta", "message_id": "m"}),
        json!({"message_id": "m", "text": "no kind"}),
        json!({"kind": "run.failed", "error_code": "oops", "message": "m", "retryable": true}),
        json!({"kind": "tool.call.completed", "call_id": "c", "tool": "t", "result_preview": "p",
               "result_size": 1, "result_sha256": sha.to_uppercase()}),
        json!({"kind": "progress.reported", "step": "s", "total": 0}),
        json!({"kind": "status.reported", "message": ""}),
        json!({"kind": "custom", "name": "nodot", "data": {}}),
        json!({"kind": "usage.reported", "model": "m", "usage": {"input_tokens": -1, "output_tokens": 0}}),
    ] {
        assert!(!errors(&payloads, &bad).is_empty(), "{bad} validated");
        assert!(Payload::from_value(&bad).map_or(true, |p| matches!(p, Payload::Unknown(_))));
    }
}

#[test]
fn a_stored_unknown_kind_validates_as_an_event() {
    let events = validator::<Event>();
    let payload = Payload::from_value(&json!({"kind": "acme.later", "x": 1}));
    let Ok(payload @ Payload::Unknown(_)) = payload else {
        panic!("kept as raw_payload: {payload:?}");
    };
    let ctx = RunContext::new("r");
    let event = Event::stamp_batch(&ctx, "o", 0, stamp(chrono::Utc::now()), [payload]);
    let event = serde_json::to_value(&event[0]).unwrap_or_default();
    assert_eq!(errors(&events, &event), Vec::<String>::new(), "{event}");
}

#[test]
fn every_block_type_has_a_branch() {
    let blocks = validator::<Block>();
    let schema = serde_json::to_value(Block::schema()).unwrap_or_default();
    let tags: Vec<&Value> = schema["anyOf"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| &i["properties"]["type"]["enum"][0])
                .collect()
        })
        .unwrap_or_default();
    for known in KNOWN_BLOCK_TYPES {
        assert!(tags.contains(&&json!(known)), "{known}: {schema}");
    }
    // Every variant, as the model writes it (the match fails to compile when one is added).
    let samples = [
        Block::text("t"),
        Block::Image {
            media_type: "image/png".into(),
            data_b64: "aGk=".into(),
        },
        Block::Audio {
            media_type: "audio/wav".into(),
            data_b64: String::new(),
        },
        Block::Resource {
            uri: "s3://x".into(),
            media_type: None,
        },
        Block::Data { data: json!(null) },
        Block::Unknown(serde_json::Map::from_iter([(
            "type".into(),
            json!("video"),
        )])),
    ];
    for block in &samples {
        match block {
            Block::Text { .. }
            | Block::Image { .. }
            | Block::Audio { .. }
            | Block::Resource { .. }
            | Block::Data { .. }
            | Block::Unknown(_) => {}
        }
        let value = serde_json::to_value(block).unwrap_or_default();
        assert_eq!(errors(&blocks, &value), Vec::<String>::new(), "{value}");
    }
    assert!(!errors(&blocks, &json!({"text": "no type"})).is_empty());
}

/// The closed string enums list exactly their wire names.
#[test]
fn literal_enums_list_their_wire_names() {
    use crate::event::{ControlVerb, ErrorCode, InterruptReason, InvocableKind, SafePoint};
    fn listed<T: ToSchema>() -> Value {
        serde_json::to_value(T::schema()).unwrap_or_default()["enum"].clone()
    }
    fn wire(names: impl IntoIterator<Item = &'static str>) -> Value {
        Value::from(names.into_iter().collect::<Vec<_>>())
    }
    assert_eq!(
        listed::<InvocableKind>(),
        wire(InvocableKind::ALL.iter().map(|v| v.as_str()))
    );
    assert_eq!(
        listed::<ErrorCode>(),
        wire(ErrorCode::ALL.iter().map(|v| v.as_str()))
    );
    assert_eq!(
        listed::<InterruptReason>(),
        wire(InterruptReason::ALL.iter().map(|v| v.as_str()))
    );
    assert_eq!(
        listed::<ControlVerb>(),
        wire(ControlVerb::ALL.iter().map(|v| v.as_str()))
    );
    assert_eq!(
        listed::<SafePoint>(),
        wire(SafePoint::ALL.iter().map(|v| v.as_str()))
    );
}
