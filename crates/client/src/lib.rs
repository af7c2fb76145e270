//! `switchyard-client`: the typed Rust client of a switchyard gateway's HTTP API, for operators'
//! tools and programs that start runs, follow their streams and work queues over HTTP
//! ([ADR 0375](https://github.com/switchyard-rs/switchyard/blob/main/adr/0375-a-typed-client-library-of-the-gateway.md)).
//! The `switchyard` binary's operator commands are a thin layer over it.
//!
//! Its methods take and return the request and answer types of `switchyard-service`, the same
//! structs the gateway reads and writes, so a field the gateway adds is a compile error here, not
//! a silent `null`. One method per route: runs ([`Client::start_run`], [`Client::run`],
//! [`Client::runs`], [`Client::append_events`], [`Client::resume_run`],
//! [`Client::run_stream`]), queues ([`Client::submit`], [`Client::queue_stats`],
//! [`Client::waiting_tasks`], [`Client::pause`], [`Client::set_rate_limit`], …), the worker verbs
//! ([`Client::reserve`], [`Client::ack`], [`Client::nack`], [`Client::fail`],
//! [`Client::extend`], [`Client::progress`], [`Client::in_flight`]), dead letters
//! ([`Client::dead_letters`], [`Client::requeue`]), workers, schedules and webhooks
//! ([`Client::create_webhook`], [`Client::webhook_deliveries`], …).
//!
//! ```no_run
//! # async fn demo() -> Result<(), switchyard_client::Error> {
//! use futures::StreamExt;
//! use switchyard_client::{Client, RunRef};
//! use switchyard_service::queues::{ReserveBody, SubmitBody};
//!
//! let client = Client::builder("http://127.0.0.1:8080").token("s3cret").build()?;
//! let task: SubmitBody = serde_json::from_value(serde_json::json!({"payload": {"n": 1}}))
//!     .expect("a submit body");
//! client.submit("jobs", &task).await?;
//! let reserved = client.reserve("jobs", &ReserveBody::default()).await?;
//! for task in &reserved.tasks {
//!     client.ack("jobs", &task.receipt).await?;
//! }
//! let mut frames = client.run_stream(&RunRef::new("run-1").session("s1"), None).await?;
//! while let Some(frame) = frames.next().await {
//!     let frame = frame?;
//!     if frame.event == "end" { break; }
//!     println!("{:?} {} {}", frame.id, frame.event, frame.data);
//! }
//! # Ok(()) }
//! ```
//!
//! Errors are one [`Error`], by what the caller can do: [`Error::Unreachable`] (no answer;
//! retrying may help), [`Error::Refused`] (the gateway's status, error code, message and request
//! id, with [`Error::is_not_found`], [`Error::is_unauthorized`] and [`Error::is_retryable`]),
//! [`Error::Decode`] (an answer this client cannot read) and [`Error::Setup`]. No message holds
//! the token.
//!
//! A run's stream is an [`EventStream`] of [`Frame`]s `{id, event, data}`. It ends after the
//! `end` frame, or without one when the connection drops or the gateway shuts down: open it
//! again with the last frame's id as `last_event_id` and the gateway replays what came after.

// `Error::Refused` carries what the caller reads (status, code, message, request id, body) and is
// built only after a network round trip; boxing it would make matching on it clumsier for nothing.
#![allow(clippy::result_large_err)]

mod client;
mod error;
mod sse;

pub use client::{
    Client, ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_REQUEST_TIMEOUT, RunClaim, RunRef,
};
pub use error::{Error, status_text};
pub use sse::{EventStream, Frame, Parser};
