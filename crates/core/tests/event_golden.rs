//! Golden tests: the exact bytes agentdeck-sdk 3.1.0's `model_dump_json` writes, both ways.

use switchyard_core::event::{Block, Event, Payload};

fn golden(json: &str) {
    let event = Event::from_json(json).unwrap_or_else(|e| panic!("{json}\n{e}"));
    assert_eq!(
        event.to_json(),
        json,
        "re-serialization must be byte-identical"
    );
}

#[test]
fn reference_example_run_started_with_fraction() {
    let json = r#"{"v":{"major":3,"minor":1},"kind":"run.started","seq":0,"run_id":"r1","session_id":"s1","namespace":"acme","origin":"helper","ts":"2025-01-02T03:04:05.123456Z","payload":{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[{"type":"text","text":"hi"}]}}"#;
    golden(json);
    let event = Event::from_json(json).expect("parse");
    assert_eq!(event.kind(), "run.started");
    let Payload::RunStarted(p) = &event.payload else {
        panic!("kind")
    };
    assert_eq!(p.input, vec![Block::text("hi")]);
}

#[test]
fn reference_example_nulls_and_no_fraction() {
    let sha = "a".repeat(64);
    let json = format!(
        r#"{{"v":{{"major":3,"minor":1}},"kind":"tool.call.completed","seq":3,"run_id":"r1","session_id":null,"namespace":null,"origin":"helper","ts":"2025-01-02T03:04:05Z","payload":{{"kind":"tool.call.completed","call_id":"c1","tool":"search","result_preview":"ok","result_size":2,"result_sha256":"{sha}","artifact_id":null,"error":null}}}}"#
    );
    golden(&json);
}

fn envelope(kind: &str, payload: &str) -> String {
    format!(
        r#"{{"v":{{"major":3,"minor":1}},"kind":"{kind}","seq":7,"run_id":"r","session_id":"s","namespace":null,"origin":"o","ts":"2025-06-30T23:59:59.000001Z","payload":{payload}}}"#
    )
}

#[test]
fn every_known_kind_round_trips_byte_identical() {
    let sha = "0123456789abcdef".repeat(4);
    let cases = [
        ("run.started", r#"{"kind":"run.started","invocable":"a","kind_of_invocable":"workflow","input":[{"type":"image","media_type":"image/png","data_b64":"aGk="},{"type":"audio","media_type":"audio/wav","data_b64":""},{"type":"resource","uri":"s3://x","media_type":null},{"type":"data","data":{"k":[1,2.5,null,true]}}]}"#.to_string()),
        ("run.completed", r#"{"kind":"run.completed","output":[],"usage":{"input_tokens":1,"output_tokens":2,"usd":0.5}}"#.to_string()),
        ("run.failed", r#"{"kind":"run.failed","error_code":"cancelled_hard","message":"m","retryable":false}"#.to_string()),
        ("run.paused", r#"{"kind":"run.paused","reason":null}"#.to_string()),
        ("run.resumed", r#"{"kind":"run.resumed","reason":"ok","value":[{"type":"text","text":"yes"}]}"#.to_string()),
        ("run.cancelled", r#"{"kind":"run.cancelled","reason":"bye"}"#.to_string()),
        ("run.interrupted", r#"{"kind":"run.interrupted","interrupt_id":"i1","reason":"approval","payload":{"z":1,"a":2},"thread_id":null,"expected_resume":"text"}"#.to_string()),
        ("control.requested", r#"{"kind":"control.requested","verb":"steer","reason":null}"#.to_string()),
        ("control.observed", r#"{"kind":"control.observed","verb":"cancel","safe_point":"node_boundary"}"#.to_string()),
        ("text.delta", r#"{"kind":"text.delta","message_id":"m","text":"é日本\"\\\n\t\u0001"}"#.to_string()),
        ("thought.delta", r#"{"kind":"thought.delta","message_id":"m","text":"🦀"}"#.to_string()),
        ("message.completed", r#"{"kind":"message.completed","message_id":"m","text":""}"#.to_string()),
        ("tool.call.started", r#"{"kind":"tool.call.started","call_id":"c","tool":"t","args":{"q":"x","n":{"deep":[{}]}}}"#.to_string()),
        ("tool.call.completed", format!(r#"{{"kind":"tool.call.completed","call_id":"c","tool":"t","result_preview":"p","result_size":0,"result_sha256":"{sha}","artifact_id":"a","error":"e"}}"#)),
        ("node.updated", r#"{"kind":"node.updated","node":"n","state_patch":{}}"#.to_string()),
        ("artifact.created", r#"{"kind":"artifact.created","artifact_id":"a","media_type":"text/plain","uri":"file:///x","size":12}"#.to_string()),
        ("usage.reported", r#"{"kind":"usage.reported","model":"m","usage":{"input_tokens":0,"output_tokens":0,"usd":null}}"#.to_string()),
        ("input.appended", r#"{"kind":"input.appended","input":[{"type":"text","text":"more"}],"source":"user"}"#.to_string()),
        ("status.reported", r#"{"kind":"status.reported","message":"working"}"#.to_string()),
        ("progress.reported", r#"{"kind":"progress.reported","step":"s","current":3,"total":3}"#.to_string()),
        ("custom", r#"{"kind":"custom","name":"acme.thing","data":{"x":1.25}}"#.to_string()),
    ];
    assert_eq!(cases.len(), 21);
    for (kind, payload) in cases {
        golden(&envelope(kind, &payload));
    }
}

#[test]
fn non_utc_offset_and_zero_fraction() {
    let json = envelope("run.paused", r#"{"kind":"run.paused","reason":null}"#)
        .replace("2025-06-30T23:59:59.000001Z", "2025-06-30T23:59:59+02:00");
    golden(&json);
    let half = envelope("run.paused", r#"{"kind":"run.paused","reason":null}"#).replace(
        "2025-06-30T23:59:59.000001Z",
        "2025-06-30T23:59:59.500000-05:30",
    );
    golden(&half);
}

#[test]
fn unknown_fields_are_dropped_on_read() {
    let with_extra = r#"{"v":{"major":3,"minor":9},"kind":"run.paused","seq":1,"run_id":"r","session_id":null,"namespace":null,"origin":"o","ts":"2025-01-02T03:04:05Z","payload":{"kind":"run.paused","reason":null,"extra":1},"extra":true}"#;
    let event = Event::from_json(with_extra).expect("parse");
    assert_eq!(
        event.to_json(),
        r#"{"v":{"major":3,"minor":9},"kind":"run.paused","seq":1,"run_id":"r","session_id":null,"namespace":null,"origin":"o","ts":"2025-01-02T03:04:05Z","payload":{"kind":"run.paused","reason":null}}"#
    );
}

#[test]
fn lax_mode_coerces_numeric_strings() {
    let json = envelope("run.paused", r#"{"kind":"run.paused","reason":null}"#)
        .replace(r#""seq":7"#, r#""seq":"7""#);
    assert_eq!(Event::from_json(&json).expect("parse").seq, 7);
}

#[test]
fn unknown_kind_is_wrapped_and_reads_back_as_itself() {
    let json = envelope("acme.new.thing", r#"{"kind":"acme.new.thing","x":[1,2]}"#);
    let event = Event::from_json(&json).expect("parse");
    let wrapped = envelope(
        "acme.new.thing",
        r#"{"kind":"acme.new.thing","raw_payload":{"kind":"acme.new.thing","x":[1,2]}}"#,
    );
    assert_eq!(event.to_json(), wrapped);
    assert_eq!(Event::from_json(&wrapped).expect("re-read"), event);
    // A payload without a kind is wrapped too.
    let bare = envelope("acme.other", r#"{"x":1}"#);
    assert!(Event::from_json(&bare).is_ok());
}

#[test]
fn unknown_block_reserializes_verbatim() {
    let payload =
        r#"{"kind":"input.appended","input":[{"type":"video","z":1,"a":{"b":null}}],"source":"u"}"#;
    golden(&envelope("input.appended", payload));
}
