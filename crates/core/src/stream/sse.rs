//! SSE framing, byte for byte as deer-flow's gateway writes it.
//!
//! Pure functions; the HTTP layer only writes what they return. The JSON on `data:` lines is
//! `json.dumps(data, ensure_ascii=False)`: Python's default separators (`", "` and `": "`), raw
//! UTF-8, floats in Python's repr form, so a Python and a Rust gateway send identical bytes.

use serde_json::Value;

use crate::pycompat::Dumps;

use super::{StreamGap, StreamItem};

/// The heartbeat frame: an SSE comment.
pub const HEARTBEAT_FRAME: &str = ": heartbeat\n\n";

/// The end frame. It never carries an `id:`.
pub const END_FRAME: &str = "event: end\ndata: null\n\n";

/// The `code` of a gap frame.
pub const GAP_CODE: &str = "stream_replay_gap";

/// The `recovery` of a gap frame.
pub const GAP_RECOVERY: &str = "reload_durable_state";

/// `event: <event>\ndata: <json>\n[id: <id>\n]\n`. The `id:` line is written only for a non-empty
/// id. CR and LF in the name (which `publish` refuses, but another producer could write) become
/// spaces so one item is always one frame.
pub fn event_frame(event: &str, data: &Value, id: Option<&str>) -> String {
    let mut frame = String::with_capacity(32 + event.len());
    frame.push_str("event: ");
    frame.push_str(&event.replace(['\r', '\n'], " "));
    frame.push_str("\ndata: ");
    frame.push_str(&python_json(data));
    frame.push('\n');
    if let Some(id) = id.filter(|id| !id.is_empty()) {
        frame.push_str("id: ");
        frame.push_str(id);
        frame.push('\n');
    }
    frame.push('\n');
    frame
}

/// The id-less gap frame with its six keys in deer-flow's order.
pub fn gap_frame(run_id: &str, gap: &StreamGap) -> String {
    let mut data = serde_json::Map::new();
    data.insert("code".into(), GAP_CODE.into());
    data.insert("run_id".into(), run_id.into());
    data.insert(
        "requested_event_id".into(),
        gap.requested.clone().map_or(Value::Null, Value::String),
    );
    data.insert(
        "earliest_available_event_id".into(),
        gap.earliest.clone().into(),
    );
    data.insert(
        "latest_available_event_id".into(),
        gap.latest.clone().into(),
    );
    data.insert("recovery".into(), GAP_RECOVERY.into());
    event_frame("gap", &Value::Object(data), None)
}

/// The frame for any item of `run_id`'s subscription.
pub fn frame(run_id: &str, item: &StreamItem) -> String {
    match item {
        StreamItem::Event(e) => event_frame(&e.event, &e.data, Some(&e.id)),
        StreamItem::Heartbeat => HEARTBEAT_FRAME.to_owned(),
        StreamItem::End => END_FRAME.to_owned(),
        StreamItem::Gap(gap) => gap_frame(run_id, gap),
    }
}

/// `json.dumps(value, ensure_ascii=False)`: `", "` between items, `": "` after keys, raw UTF-8,
/// floats as Python writes them (ADR 0177).
pub fn python_json(value: &Value) -> String {
    Dumps::DEFAULT.ensure_ascii(false).to_string(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::stream::StreamEvent;

    #[test]
    fn data_frame_exact() {
        assert_eq!(
            event_frame("values", &json!({"messages": []}), Some("1718000000000-3")),
            "event: values\ndata: {\"messages\": []}\nid: 1718000000000-3\n\n"
        );
        assert_eq!(
            event_frame(
                "metadata",
                &json!({"run_id": "r", "thread_id": "t"}),
                Some("123-0")
            ),
            "event: metadata\ndata: {\"run_id\": \"r\", \"thread_id\": \"t\"}\nid: 123-0\n\n"
        );
    }

    #[test]
    fn no_id_line_without_id_or_with_empty_id() {
        let want = "event: updates\ndata: [1, 2, {\"a\": null}]\n\n";
        assert_eq!(
            event_frame("updates", &json!([1, 2, {"a": null}]), None),
            want
        );
        assert_eq!(
            event_frame("updates", &json!([1, 2, {"a": null}]), Some("")),
            want
        );
    }

    #[test]
    fn null_unicode_and_escapes_like_python() {
        assert_eq!(
            event_frame("x", &Value::Null, None),
            "event: x\ndata: null\n\n"
        );
        // ensure_ascii=False: raw UTF-8; newlines inside strings stay escaped on one line.
        assert_eq!(
            event_frame("x", &json!({"t": "é✓\n\"q\"", "n": 1.5, "b": true}), None),
            "event: x\ndata: {\"t\": \"é✓\\n\\\"q\\\"\", \"n\": 1.5, \"b\": true}\n\n"
        );
        // Floats as Python's repr writes them, not as serde_json does (`1e-5`, `1e16`).
        assert_eq!(
            event_frame("x", &json!([1e-5, 1e16, 1e15, 0.1]), None),
            "event: x\ndata: [1e-05, 1e+16, 1000000000000000.0, 0.1]\n\n"
        );
    }

    #[test]
    fn heartbeat_and_end_frames_exact() {
        assert_eq!(frame("r", &StreamItem::Heartbeat), ": heartbeat\n\n");
        assert_eq!(frame("r", &StreamItem::End), "event: end\ndata: null\n\n");
    }

    #[test]
    fn gap_frame_exact_with_and_without_requested() {
        let gap = StreamGap {
            requested: Some("1-0".into()),
            earliest: "2-0".into(),
            latest: "3-0".into(),
        };
        assert_eq!(
            frame("run-1", &StreamItem::Gap(gap)),
            "event: gap\ndata: {\"code\": \"stream_replay_gap\", \"run_id\": \"run-1\", \
             \"requested_event_id\": \"1-0\", \"earliest_available_event_id\": \"2-0\", \
             \"latest_available_event_id\": \"3-0\", \"recovery\": \"reload_durable_state\"}\n\n"
        );
        let gap = StreamGap {
            requested: None,
            earliest: "2-0".into(),
            latest: "3-0".into(),
        };
        assert_eq!(
            gap_frame("run-1", &gap),
            "event: gap\ndata: {\"code\": \"stream_replay_gap\", \"run_id\": \"run-1\", \
             \"requested_event_id\": null, \"earliest_available_event_id\": \"2-0\", \
             \"latest_available_event_id\": \"3-0\", \"recovery\": \"reload_durable_state\"}\n\n"
        );
    }

    #[test]
    fn event_item_and_hostile_name() {
        let item = StreamItem::Event(StreamEvent {
            id: "5-1".into(),
            event: "__end__".into(),
            data: json!({}),
        });
        assert_eq!(frame("r", &item), "event: __end__\ndata: {}\nid: 5-1\n\n");
        assert_eq!(
            event_frame("a\r\nb", &json!(1), None),
            "event: a  b\ndata: 1\n\n"
        );
    }
}
