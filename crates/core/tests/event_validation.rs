//! Every rule of the event model refuses bad input with a typed error naming the field.

use switchyard_core::Error;
use switchyard_core::event::{Block, Event, MAX_INLINE_BYTES, Payload, ProgressReported};

fn envelope(kind: &str, payload: &str) -> String {
    format!(
        r#"{{"v":{{"major":3,"minor":1}},"kind":"{kind}","seq":0,"run_id":"r","session_id":null,"namespace":null,"origin":"o","ts":"2025-01-02T03:04:05Z","payload":{payload}}}"#
    )
}

fn refused_field(json: &str) -> String {
    match Event::from_json(json) {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("expected InvalidInput for {json}, got {other:?}"),
    }
}

#[test]
fn kind_must_match_the_pattern() {
    for bad in ["Run.started", "run..x", "1run", "run.", "", "run-x"] {
        let json = envelope(bad, r#"{"x":1}"#);
        assert_eq!(refused_field(&json), "kind", "{bad:?}");
    }
}

#[test]
fn envelope_and_payload_kinds_must_agree() {
    let json = envelope("run.paused", r#"{"kind":"run.cancelled","reason":null}"#);
    assert_eq!(refused_field(&json), "payload.kind");
    let unknown = envelope("acme.x", r#"{"kind":"acme.y"}"#);
    assert_eq!(refused_field(&unknown), "payload.kind");
}

#[test]
fn schema_major_must_be_3_and_bare_integers_are_pre_3() {
    let json = envelope("run.paused", r#"{"kind":"run.paused","reason":null}"#);
    let major4 = json.replace(r#""major":3"#, r#""major":4"#);
    assert_eq!(refused_field(&major4), "v.major");
    let bare = json.replace(r#"{"major":3,"minor":1}"#, "3");
    match Event::from_json(&bare) {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "v");
            assert!(reason.contains("pre-3.0"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let minor = json.replace(r#""minor":1"#, r#""minor":42"#);
    assert_eq!(Event::from_json(&minor).expect("any minor").v.minor, 42);
}

#[test]
fn naive_timestamps_are_refused() {
    let json = envelope("run.paused", r#"{"kind":"run.paused","reason":null}"#)
        .replace("2025-01-02T03:04:05Z", "2025-01-02T03:04:05");
    match Event::from_json(&json) {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "ts");
            assert!(reason.contains("timezone"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn nan_and_infinity_are_refused() {
    let usage = |usd: &str| {
        envelope(
            "usage.reported",
            &format!(
                r#"{{"kind":"usage.reported","model":"m","usage":{{"input_tokens":1,"output_tokens":1,"usd":{usd}}}}}"#
            ),
        )
    };
    assert_eq!(refused_field(&usage(r#""NaN""#)), "payload.usage.usd");
    assert_eq!(refused_field(&usage(r#""inf""#)), "payload.usage.usd");
    assert_eq!(refused_field(&usage("-1.0")), "payload.usage.usd");
    // JSON itself has no NaN token: a document carrying one is not JSON at all.
    assert!(matches!(
        Event::from_json(&usage("NaN")),
        Err(Error::InvalidInput { .. })
    ));
    // Built in Rust, a non-finite float is refused by validation.
    let p = Payload::UsageReported(switchyard_core::event::UsageReported {
        model: "m".into(),
        usage: switchyard_core::event::Usage {
            input_tokens: 0,
            output_tokens: 0,
            usd: Some(f64::INFINITY),
        },
    });
    assert!(
        matches!(p.validate(), Err(Error::InvalidInput { field, .. }) if field == "payload.usage.usd")
    );
}

#[test]
fn inline_media_is_capped_at_one_mebibyte_decoded() {
    use base64::Engine as _;
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
    let block = |data: String| {
        Payload::InputAppended(switchyard_core::event::InputAppended {
            input: vec![
                Block::text("x"),
                Block::Image {
                    media_type: "image/png".into(),
                    data_b64: data,
                },
            ],
            source: "u".into(),
        })
    };
    assert!(block(b64(MAX_INLINE_BYTES)).validate().is_ok());
    match block(b64(MAX_INLINE_BYTES + 1)).validate() {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "payload.input[1].data_b64"),
        other => panic!("{other:?}"),
    }
    match block("not base64!".into()).validate() {
        Err(Error::InvalidInput { field, .. }) => assert_eq!(field, "payload.input[1].data_b64"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn progress_current_may_not_exceed_total() {
    let p = |current, total| {
        Payload::ProgressReported(ProgressReported {
            step: "s".into(),
            current,
            total,
        })
        .validate()
    };
    assert!(p(Some(3), Some(3)).is_ok());
    assert!(p(Some(3), None).is_ok());
    assert!(
        matches!(p(Some(4), Some(3)), Err(Error::InvalidInput { field, .. }) if field == "payload.current")
    );
    assert!(
        matches!(p(None, Some(0)), Err(Error::InvalidInput { field, .. }) if field == "payload.total")
    );
    let empty_step = envelope(
        "progress.reported",
        r#"{"kind":"progress.reported","step":"","current":null,"total":null}"#,
    );
    assert_eq!(refused_field(&empty_step), "payload.step");
    let negative = envelope(
        "progress.reported",
        r#"{"kind":"progress.reported","step":"s","current":-1,"total":null}"#,
    );
    assert_eq!(refused_field(&negative), "payload.current");
}

#[test]
fn sha256_must_be_64_lowercase_hex() {
    let with = |sha: &str| {
        envelope(
            "tool.call.completed",
            &format!(
                r#"{{"kind":"tool.call.completed","call_id":"c","tool":"t","result_preview":"p","result_size":1,"result_sha256":"{sha}","artifact_id":null,"error":null}}"#
            ),
        )
    };
    assert!(Event::from_json(&with(&"ab".repeat(32))).is_ok());
    for bad in ["AB".repeat(32), "ab".repeat(31), "zz".repeat(32)] {
        assert_eq!(refused_field(&with(&bad)), "payload.result_sha256");
    }
    let long_preview = envelope(
        "tool.call.completed",
        &format!(
            r#"{{"kind":"tool.call.completed","call_id":"c","tool":"t","result_preview":"{}","result_size":1,"result_sha256":"{}","artifact_id":null,"error":null}}"#,
            "é".repeat(4097),
            "ab".repeat(32)
        ),
    );
    assert_eq!(refused_field(&long_preview), "payload.result_preview");
}

#[test]
fn custom_name_needs_a_dot_with_text_on_both_sides() {
    let with = |name: &str| {
        envelope(
            "custom",
            &format!(r#"{{"kind":"custom","name":"{name}","data":{{}}}}"#),
        )
    };
    assert!(Event::from_json(&with("acme.x")).is_ok());
    assert!(Event::from_json(&with("acme.x.y")).is_ok());
    for bad in ["acme", ".x", "acme.", ""] {
        assert_eq!(refused_field(&with(bad)), "payload.name", "{bad:?}");
    }
}

#[test]
fn literals_and_types_are_checked() {
    let failed = envelope(
        "run.failed",
        r#"{"kind":"run.failed","error_code":"oops","message":"m","retryable":false}"#,
    );
    assert_eq!(refused_field(&failed), "payload.error_code");
    let missing = envelope("text.delta", r#"{"kind":"text.delta","message_id":"m"}"#);
    assert_eq!(refused_field(&missing), "payload.text");
    let number_as_text = envelope(
        "text.delta",
        r#"{"kind":"text.delta","message_id":"m","text":5}"#,
    );
    assert_eq!(refused_field(&number_as_text), "payload.text");
    let not_object = envelope(
        "node.updated",
        r#"{"kind":"node.updated","node":"n","state_patch":[]}"#,
    );
    assert_eq!(refused_field(&not_object), "payload.state_patch");
    let block_without_type = envelope(
        "input.appended",
        r#"{"kind":"input.appended","input":[{"text":"x"}],"source":"u"}"#,
    );
    assert_eq!(refused_field(&block_without_type), "payload.input[0].type");
    assert!(matches!(
        Event::from_json("{not json"),
        Err(Error::InvalidInput { .. })
    ));
    assert!(matches!(
        Event::from_json("[]"),
        Err(Error::InvalidInput { .. })
    ));
}

#[test]
fn an_unknown_payload_may_not_borrow_a_known_kind() {
    let p = Payload::Unknown(switchyard_core::event::UnknownPayload {
        kind: "run.started".into(),
        raw_payload: Default::default(),
    });
    assert!(matches!(p.validate(), Err(Error::InvalidInput { .. })));
}

#[test]
fn a_bare_payload_reads_by_its_kind() {
    let value = serde_json::json!({"kind": "text.delta", "message_id": "m", "text": "hi"});
    let payload = Payload::from_value(&value).expect("payload");
    assert_eq!(payload.kind(), "text.delta");
    assert_eq!(serde_json::to_value(&payload).expect("json"), value);
    assert!(matches!(
        Payload::from_value(&serde_json::json!({"text": "no kind"})),
        Err(Error::InvalidInput { field, .. }) if field == "payload.kind"
    ));
    assert!(matches!(
        Payload::from_value(&serde_json::json!({"kind": "Bad Kind"})),
        Err(Error::InvalidInput { field, .. }) if field == "payload.kind"
    ));
}

#[test]
fn refusing_unknown_kinds_names_the_kind_and_lists_the_known_ones() {
    use switchyard_core::event::{KNOWN_KINDS, UnknownKinds};
    let typo = serde_json::json!({"kind": "tool.call", "call_id": "c"});
    match Payload::from_value_with(&typo, UnknownKinds::Refuse) {
        Err(Error::InvalidInput { field, reason }) => {
            assert_eq!(field, "payload.kind");
            assert!(reason.contains("\"tool.call\""), "{reason}");
            for kind in KNOWN_KINDS {
                assert!(reason.contains(kind), "{kind} missing: {reason}");
            }
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    // Kept, it is the seed's raw_payload, as `from_value` reads it.
    let kept = Payload::from_value_with(&typo, UnknownKinds::Keep).expect("kept");
    assert!(matches!(&kept, Payload::Unknown(u) if u.kind == "tool.call"));
    assert_eq!(Payload::from_value(&typo).expect("lenient"), kept);
    // Known kinds and malformed kinds read the same under both choices.
    let known = serde_json::json!({"kind": "status.reported", "message": "ok"});
    let bad = serde_json::json!({"kind": "Tool"});
    for unknown in [UnknownKinds::Keep, UnknownKinds::Refuse] {
        assert_eq!(
            Payload::from_value_with(&known, unknown).expect("known"),
            Payload::from_value(&known).expect("known")
        );
        match Payload::from_value_with(&bad, unknown) {
            Err(Error::InvalidInput { field, reason }) => {
                assert_eq!(field, "payload.kind");
                assert!(reason.contains("not a valid kind"), "{reason}");
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
}
