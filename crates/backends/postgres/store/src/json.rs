//! An event's stored JSON around the two values only the database knows: its seq and its ts.
//!
//! The store stamps a batch in the statement that writes it (the run's row lock gives the seq,
//! the database clock the ts), so the bytes are put together in SQL: `head || seq || mid ||
//! ts || tail`, with `ts` written by the `event_ts_text` function of the migration. The parts
//! come from [`Event::to_json`] itself, so the stored bytes are that method's, as on every other
//! adapter (a test compares them).

use switchyard_core::event::{Event, format_ts};
use switchyard_core::{Error, Result};

/// The JSON of one event, cut around its seq and ts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parts {
    /// Up to and including `"seq":`.
    pub head: String,
    /// From the end of the seq to the opening quote of the ts, included. The same for every
    /// event of a batch (run, session, namespace and origin).
    pub mid: String,
    /// From the closing quote of the ts to the end.
    pub tail: String,
}

/// Cuts `event`'s JSON. The envelope's fields come in a fixed order (`v`, `kind`, `seq`,
/// `run_id`, `session_id`, `namespace`, `origin`, `ts`, `payload`), and a key can only follow an
/// unescaped quote, so the first `,"seq":` and the first `,"ts":"` after it are the envelope's.
pub(crate) fn split(event: &Event) -> Result<Parts> {
    let json = event.to_json();
    let unexpected = || {
        Error::invalid(
            "event",
            format!("its JSON does not have the envelope's layout: {json}"),
        )
    };
    const SEQ: &str = ",\"seq\":";
    const TS: &str = ",\"ts\":\"";
    let seq_at = json.find(SEQ).ok_or_else(unexpected)? + SEQ.len();
    let seq = event.seq.to_string();
    let seq_end = seq_at + seq.len();
    if json.get(seq_at..seq_end) != Some(seq.as_str()) {
        return Err(unexpected());
    }
    let ts_at = json
        .get(seq_end..)
        .and_then(|rest| rest.find(TS))
        .ok_or_else(unexpected)?
        + seq_end
        + TS.len();
    let ts = format_ts(&event.ts);
    let ts_end = ts_at + ts.len();
    if json.get(ts_at..ts_end) != Some(ts.as_str()) {
        return Err(unexpected());
    }
    Ok(Parts {
        head: json[..seq_at].to_string(),
        mid: json[seq_end..ts_at].to_string(),
        tail: json[ts_end..].to_string(),
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use switchyard_core::RunContext;
    use switchyard_core::event::{Custom, Payload, stamp};

    use super::*;

    #[test]
    fn parts_rebuild_the_json_for_any_seq_and_ts() {
        // Ids and an origin that spell the keys the cut looks for.
        let ctx = RunContext::new(r#"r,"seq":1,"ts":"x"#)
            .with_session(r#",\"ts\":\""#)
            .with_namespace(r#"n","ts":""#)
            .expect("namespace");
        let payload = Payload::Custom(Custom {
            name: "x".into(),
            data: serde_json::from_str(r#"{"seq": 5, "ts": "2020-01-01T00:00:00Z"}"#)
                .expect("object"),
        });
        let placeholder = stamp(Utc.timestamp_opt(981_173_106, 0).single().expect("ts"));
        let template = &Event::stamp_batch(&ctx, r#"o","ts":"#, 0, placeholder, [payload])[0];
        let parts = split(template).expect("split");
        for (seq, ts) in [
            (
                0_u64,
                Utc.timestamp_opt(1_764_583_200, 0).single().expect("ts"),
            ),
            (
                17,
                Utc.timestamp_opt(1_764_583_200, 123_456_000)
                    .single()
                    .expect("ts"),
            ),
            (
                u64::MAX,
                Utc.timestamp_opt(1_764_583_200, 1_000)
                    .single()
                    .expect("ts"),
            ),
        ] {
            let mut event = template.clone();
            event.seq = seq;
            event.ts = stamp(ts);
            let rebuilt = format!(
                "{}{seq}{}{}{}",
                parts.head,
                parts.mid,
                format_ts(&event.ts),
                parts.tail
            );
            assert_eq!(rebuilt, event.to_json());
        }
    }
}
