//! A run's Server-Sent Events as a [`Stream`] of [`Frame`]s.
//!
//! The parser is a few lines of our own rather than a crate: the gateway writes one `event`, one
//! `id` and `data` lines per frame and comments as heartbeats, and that is all it needs to read.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use futures::stream::BoxStream;

use crate::Error;
use crate::error::chain;

/// One SSE frame with an event name. Comments (the gateway's heartbeats) are not frames.
///
/// The gateway's frames: one per stored event (`event` its kind, `id` the event id to resume
/// after, `data` the event's JSON); `end` when the run finished (the stream is over); `gap` when
/// the events after the `Last-Event-ID` are no longer retained (read the run instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame's `id`: pass the last one seen as `last_event_id` to resume after it.
    pub id: Option<String>,
    /// The frame's `event` (`message` when it names none).
    pub event: String,
    /// Its `data` lines, joined by newlines.
    pub data: String,
}

impl Frame {
    /// The data as JSON, or `None` when it is not JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Splits SSE text into frames as it arrives.
#[derive(Debug, Default)]
pub struct Parser {
    buf: String,
    /// Bytes of a UTF-8 character split across chunks.
    partial: Vec<u8>,
}

impl Parser {
    /// Takes more bytes; returns the frames they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        self.partial.extend_from_slice(bytes);
        // A chunk may end inside a character: keep its first bytes for the next chunk.
        let valid = match std::str::from_utf8(&self.partial) {
            Ok(_) => self.partial.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.partial.len(),
        };
        let rest = self.partial.split_off(valid);
        self.buf
            .push_str(&String::from_utf8_lossy(&self.partial).replace("\r\n", "\n"));
        self.partial = rest;
        let mut frames = Vec::new();
        while let Some(at) = self.buf.find("\n\n") {
            let raw: String = self.buf.drain(..at + 2).collect();
            let mut frame = Frame {
                id: None,
                event: String::new(),
                data: String::new(),
            };
            let mut data_lines = Vec::new();
            for line in raw.lines() {
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => frame.event = value.to_string(),
                    "data" => data_lines.push(value),
                    "id" => frame.id = Some(value.to_string()),
                    _ => {}
                }
            }
            if frame.event.is_empty() && data_lines.is_empty() {
                continue;
            }
            if frame.event.is_empty() {
                frame.event = "message".into();
            }
            frame.data = data_lines.join("\n");
            frames.push(frame);
        }
        frames
    }
}

/// A run's stream: frames as they arrive, until the gateway closes it.
///
/// It ends after the `end` frame, or without one when the connection drops or the gateway shuts
/// down; then open it again with the last frame's id as `last_event_id` and nothing is lost or
/// repeated. A broken connection is one [`Error::Unreachable`] item, then the end.
pub struct EventStream {
    body: BoxStream<'static, Result<Bytes, reqwest::Error>>,
    parser: Parser,
    ready: VecDeque<Frame>,
    base: String,
    done: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("base", &self.base)
            .field("ready", &self.ready.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) fn new(response: reqwest::Response, base: String) -> Self {
        EventStream {
            body: Box::pin(response.bytes_stream()),
            parser: Parser::default(),
            ready: VecDeque::new(),
            base,
            done: false,
        }
    }
}

impl Stream for EventStream {
    type Item = Result<Frame, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(frame) = self.ready.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if self.done {
                return Poll::Ready(None);
            }
            match self.body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => self.done = true,
                Poll::Ready(Some(Ok(chunk))) => {
                    let frames = self.parser.push(&chunk);
                    self.ready.extend(frames);
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(Error::Unreachable {
                        base: self.base.clone(),
                        reason: format!("the stream broke off: {}", chain(&e)),
                    })));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks() {
        let mut p = Parser::default();
        assert!(
            p.push(b": heartbeat\n\nevent: text.delta\ndata: {\"a\"")
                .is_empty()
        );
        let frames = p.push(b": 1}\nid: 5-0\n\nevent: end\ndata: \n\n");
        assert_eq!(
            frames,
            vec![
                Frame {
                    event: "text.delta".into(),
                    data: "{\"a\": 1}".into(),
                    id: Some("5-0".into()),
                },
                Frame {
                    event: "end".into(),
                    data: String::new(),
                    id: None,
                },
            ]
        );
    }

    #[test]
    fn a_character_split_across_chunks_is_kept_whole() {
        let mut p = Parser::default();
        let text = "event: x\ndata: é\n\n".as_bytes();
        let at = text.iter().position(|b| *b == 0xc3).expect("é") + 1;
        assert!(p.push(&text[..at]).is_empty());
        let frames = p.push(&text[at..]);
        assert_eq!(frames[0].data, "é");
    }
}
