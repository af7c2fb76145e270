//! Helpers every area of the stream bridge suite shares.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard_core::{
    Error, ItemStream, Result, StreamBridge, StreamEvent, StreamGap, StreamItem,
};

use crate::harness::unique_id;
use crate::stream_bridge::{Factory, StreamBridgeFixture, StreamBridgeSetup};

/// Heartbeat used where a case waits for one.
pub(super) const HB: Duration = Duration::from_millis(100);
/// Heartbeat used where heartbeats are noise.
pub(super) const SLOW_HB: Duration = Duration::from_secs(5);
/// A safety net against hangs, never a timing assertion.
pub(super) const HANG: Duration = Duration::from_secs(30);

/// A fresh bridge retaining `retention` events per run.
pub(super) async fn make(factory: Factory<'_>, retention: usize) -> Arc<dyn StreamBridge> {
    make_fixture(factory, retention).await.bridge
}

/// A fresh bridge retaining `retention` events per run, with the adapter's capabilities.
pub(super) async fn make_fixture(factory: Factory<'_>, retention: usize) -> StreamBridgeFixture {
    factory(StreamBridgeSetup { retention })
        .await
        .unwrap_or_else(|e| panic!("the adapter's factory could not build a bridge: {e}"))
}

pub(super) fn run(tag: &str) -> String {
    unique_id(tag)
}

/// The next item, including heartbeats; `None` when the stream ended.
pub(super) async fn next_raw(s: &mut ItemStream) -> Option<Result<StreamItem>> {
    tokio::time::timeout(HANG, s.next())
        .await
        .expect("subscription hung")
}

/// The next non-heartbeat item.
pub(super) async fn next(s: &mut ItemStream) -> Option<StreamItem> {
    loop {
        match next_raw(s).await {
            Some(Ok(StreamItem::Heartbeat)) => continue,
            Some(Ok(item)) => return Some(item),
            Some(Err(e)) => panic!("subscription failed: {e}"),
            None => return None,
        }
    }
}

/// Every non-heartbeat item up to and including the terminal one; asserts the stream then ends.
pub(super) async fn drain(s: &mut ItemStream) -> Vec<StreamItem> {
    let mut items = Vec::new();
    while let Some(item) = next(s).await {
        let terminal = item.is_terminal();
        items.push(item);
        if terminal {
            assert!(
                next_raw(s).await.is_none(),
                "stream must end after {:?}",
                items.last()
            );
            return items;
        }
    }
    panic!("stream ended without a terminal item after {items:?}");
}

/// Polls until the subscriber has parked (its first heartbeat).
pub(super) async fn park(s: &mut ItemStream) {
    match next_raw(s).await {
        Some(Ok(StreamItem::Heartbeat)) => {}
        other => panic!("expected a heartbeat from a parked subscriber, got {other:?}"),
    }
}

pub(super) fn names(items: &[StreamItem]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            StreamItem::Event(e) => e.event.clone(),
            StreamItem::End => "END".into(),
            StreamItem::Heartbeat => "HB".into(),
            StreamItem::Gap(_) => "GAP".into(),
        })
        .collect()
}

pub(super) fn ev(id: &str, event: &str, data: Value) -> StreamItem {
    StreamItem::Event(StreamEvent {
        id: id.into(),
        event: event.into(),
        data,
    })
}

pub(super) fn gap(requested: Option<&str>, earliest: &str, latest: &str) -> StreamItem {
    StreamItem::Gap(StreamGap {
        requested: requested.map(str::to_owned),
        earliest: earliest.into(),
        latest: latest.into(),
    })
}

pub(super) async fn publish_n(b: &dyn StreamBridge, run: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 1..=n {
        ids.push(
            b.publish(run, &format!("e{i}"), &json!({ "i": i }))
                .await
                .expect("publish"),
        );
    }
    ids
}

pub(super) fn assert_invalid<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    assert!(
        matches!(r, Err(Error::InvalidInput { .. })),
        "{what}: expected InvalidInput, got {r:?}"
    );
}
