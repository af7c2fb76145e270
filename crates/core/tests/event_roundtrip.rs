//! Property: parse(serialize(e)) == e for generated events of every kind.

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use switchyard_core::event::*;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9 ]{0,12}",
        "\\PC{0,12}",
        Just("é日本🦀\"\\\n\t\u{1}\u{7f}".to_string()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,4}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(("[a-z]{1,5}", json_value()), 0..4)
        .prop_map(|kv| kv.into_iter().collect())
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text().prop_map(|t| Block::Text { text: t }),
        Just(Block::Image {
            media_type: "image/png".into(),
            data_b64: "aGVsbG8=".into()
        }),
        Just(Block::Audio {
            media_type: "audio/wav".into(),
            data_b64: String::new()
        }),
        (text(), prop::option::of(text()))
            .prop_map(|(uri, media_type)| Block::Resource { uri, media_type }),
        json_value().prop_map(|data| Block::Data { data }),
        object().prop_map(|mut o| {
            o.insert("type".into(), Value::String("video".into()));
            Block::Unknown(o)
        }),
    ]
}

fn input() -> impl Strategy<Value = Input> {
    prop::collection::vec(block(), 0..3)
}

fn usage() -> impl Strategy<Value = Usage> {
    (any::<u32>(), any::<u32>(), prop::option::of(0.0f64..1e6)).prop_map(|(i, o, usd)| Usage {
        input_tokens: i.into(),
        output_tokens: o.into(),
        usd,
    })
}

fn payload() -> impl Strategy<Value = Payload> {
    let sha = "[0-9a-f]{64}";
    prop_oneof![
        (text(), prop::sample::select(InvocableKind::ALL), input()).prop_map(
            |(invocable, kind_of_invocable, input)| Payload::RunStarted(RunStarted {
                invocable,
                kind_of_invocable,
                input
            })
        ),
        (input(), usage())
            .prop_map(|(output, usage)| Payload::RunCompleted(RunCompleted { output, usage })),
        (prop::sample::select(ErrorCode::ALL), text(), any::<bool>()).prop_map(
            |(error_code, message, retryable)| Payload::RunFailed(RunFailed {
                error_code,
                message,
                retryable
            })
        ),
        prop::option::of(text()).prop_map(|reason| Payload::RunPaused(RunPaused { reason })),
        (prop::option::of(text()), prop::option::of(input()))
            .prop_map(|(reason, value)| Payload::RunResumed(RunResumed { reason, value })),
        prop::option::of(text()).prop_map(|reason| Payload::RunCancelled(RunCancelled { reason })),
        (
            text(),
            prop::sample::select(InterruptReason::ALL),
            object(),
            prop::option::of(text()),
            prop::option::of(text())
        )
            .prop_map(
                |(interrupt_id, reason, payload, thread_id, expected_resume)| {
                    Payload::RunInterrupted(RunInterrupted {
                        interrupt_id,
                        reason,
                        payload,
                        thread_id,
                        expected_resume,
                    })
                }
            ),
        (
            prop::sample::select(ControlVerb::ALL),
            prop::option::of(text())
        )
            .prop_map(
                |(verb, reason)| Payload::ControlRequested(ControlRequested { verb, reason })
            ),
        (
            prop::sample::select(ControlVerb::ALL),
            prop::sample::select(SafePoint::ALL)
        )
            .prop_map(
                |(verb, safe_point)| Payload::ControlObserved(ControlObserved { verb, safe_point })
            ),
        (text(), text())
            .prop_map(|(message_id, text)| Payload::TextDelta(MessageText { message_id, text })),
        (text(), text())
            .prop_map(|(message_id, text)| Payload::ThoughtDelta(MessageText { message_id, text })),
        (text(), text()).prop_map(|(message_id, text)| Payload::MessageCompleted(MessageText {
            message_id,
            text
        })),
        (text(), text(), object()).prop_map(|(call_id, tool, args)| Payload::ToolCallStarted(
            ToolCallStarted {
                call_id,
                tool,
                args
            }
        )),
        (
            text(),
            text(),
            text(),
            any::<u64>(),
            sha,
            prop::option::of(text()),
            prop::option::of(text())
        )
            .prop_map(
                |(
                    call_id,
                    tool,
                    result_preview,
                    result_size,
                    result_sha256,
                    artifact_id,
                    error,
                )| Payload::ToolCallCompleted(ToolCallCompleted {
                    call_id,
                    tool,
                    result_preview,
                    result_size,
                    result_sha256,
                    artifact_id,
                    error
                })
            ),
        (text(), object()).prop_map(|(node, state_patch)| Payload::NodeUpdated(NodeUpdated {
            node,
            state_patch
        })),
        (text(), text(), text(), any::<u64>()).prop_map(|(artifact_id, media_type, uri, size)| {
            Payload::ArtifactCreated(ArtifactCreated {
                artifact_id,
                media_type,
                uri,
                size,
            })
        }),
        (text(), usage())
            .prop_map(|(model, usage)| Payload::UsageReported(UsageReported { model, usage })),
        (input(), text())
            .prop_map(|(input, source)| Payload::InputAppended(InputAppended { input, source })),
        "[a-z]{1,8}".prop_map(|message| Payload::StatusReported(StatusReported { message })),
        ("[a-z]{1,8}", 0u64..10, prop::option::of(10u64..20)).prop_map(|(step, c, total)| {
            Payload::ProgressReported(ProgressReported {
                step,
                current: total.map(|_| c),
                total,
            })
        }),
        ("[a-z]{1,4}\\.[a-z.]{1,6}", object())
            .prop_map(|(name, data)| Payload::Custom(Custom { name, data })),
        ("acme\\.[a-z]{1,6}", object())
            .prop_map(|(kind, raw_payload)| Payload::Unknown(UnknownPayload { kind, raw_payload })),
    ]
}

fn timestamp() -> impl Strategy<Value = DateTime<FixedOffset>> {
    (
        0i64..4_000_000_000,
        prop_oneof![Just(0u32), 0u32..1_000_000],
        prop_oneof![Just(0i32), -720i32..840],
    )
        .prop_map(|(secs, micros, offset_min)| {
            let utc = Utc
                .timestamp_opt(secs, micros * 1000)
                .single()
                .expect("valid");
            let offset = FixedOffset::east_opt(offset_min * 60).expect("offset");
            utc.with_timezone(&offset)
        })
}

fn event() -> impl Strategy<Value = Event> {
    (
        any::<u64>(),
        text(),
        prop::option::of(text()),
        prop::option::of(text()),
        text(),
        timestamp(),
        payload(),
    )
        .prop_map(
            |(seq, run_id, session_id, namespace, origin, ts, payload)| Event {
                v: SchemaVersion::CURRENT,
                seq,
                run_id,
                session_id,
                namespace,
                origin,
                ts,
                payload,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn parse_of_serialize_is_identity(e in event()) {
        prop_assert!(e.payload.validate().is_ok());
        let json = e.to_json();
        let back = Event::from_json(&json).map_err(|err| TestCaseError::fail(format!("{err}: {json}")))?;
        prop_assert_eq!(&back, &e);
        prop_assert_eq!(back.to_json(), json);
    }
}
