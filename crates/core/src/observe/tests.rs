use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::event::{InvocableKind, Payload, RunStarted};
use crate::fleet::{FleetBackend, MemoryFleetBackend, Priority};
use crate::store::EventStore;
use crate::stream::{MemoryStreamBridge, StreamBridge};
use crate::{MemoryEventStore, RunContext};

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(PortKind, String, &'static str, Outcome)>>);

impl Observer for Recorder {
    fn finished(&self, call: &Call<'_>, _elapsed: Duration, outcome: Outcome) {
        self.0.lock().expect("recorder").push((
            call.port,
            call.adapter.to_string(),
            call.name,
            outcome,
        ));
    }
}

impl Recorder {
    fn calls(&self) -> Vec<(PortKind, String, &'static str, Outcome)> {
        self.0.lock().expect("recorder").clone()
    }
}

#[tokio::test]
async fn store_calls_are_reported_with_their_outcome() {
    let recorder = Arc::new(Recorder::default());
    let inner: Arc<dyn EventStore> = Arc::new(MemoryEventStore::new());
    let store: Arc<dyn EventStore> = Observed::new(inner, "memory", recorder.clone()).into_arc();
    let ctx = RunContext::new("r1").with_session("s1");
    let (claim, started) = store
        .claim_start(
            &ctx,
            RunStarted::new("agent", InvocableKind::Agent, vec![]),
            "test",
            Duration::from_secs(60),
        )
        .await
        .expect("claim");
    assert!(claim.held_by.is_none() && started.is_some());
    store
        .append(&ctx, vec![Payload::text_delta("m1", "x")], "test")
        .await
        .expect("append");
    // A negative limit is refused: the error reaches the caller as it is and is reported as one.
    let bad = store.read(&ctx, 0, Some(-1)).await;
    assert!(
        matches!(bad, Err(crate::Error::InvalidInput { .. })),
        "{bad:?}"
    );
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        crate::RunStatus::Running
    );
    let calls = recorder.calls();
    let names: Vec<_> = calls.iter().map(|c| (c.2, c.3)).collect();
    assert_eq!(
        names,
        [
            ("claim_start", Outcome::Ok),
            ("append", Outcome::Ok),
            ("read", Outcome::Error),
            ("run_status", Outcome::Ok)
        ]
    );
    assert!(
        calls
            .iter()
            .all(|c| c.0 == PortKind::EventStore && c.1 == "memory")
    );
}

#[tokio::test]
async fn fleet_and_bridge_calls_are_reported_under_their_method_names() {
    let recorder = Arc::new(Recorder::default());
    let fleet: Arc<dyn FleetBackend> = Arc::new(MemoryFleetBackend::new());
    let fleet: Arc<dyn FleetBackend> = Observed::new(fleet, "memory", recorder.clone()).into_arc();
    fleet
        .queue_push("q", b"{}", Priority::Normal)
        .await
        .expect("push");
    let got = fleet
        .queue_reserve("q", Duration::ZERO, Duration::from_secs(5))
        .await
        .expect("reserve");
    assert!(got.is_some());
    // The front's argument check refuses an empty name before any backend work: still a call.
    assert!(fleet.queue_size("").await.is_err());
    let bridge: Arc<dyn StreamBridge> = Arc::new(MemoryStreamBridge::new(16).expect("bridge"));
    let bridge: Arc<dyn StreamBridge> =
        Observed::new(bridge, "memory", recorder.clone()).into_arc();
    assert!(!bridge.stream_exists("nothing").await.expect("exists"));
    assert_eq!(
        bridge.capabilities(),
        crate::stream::Capabilities::IN_PROCESS
    );
    let names: Vec<_> = recorder.calls().iter().map(|c| (c.0, c.2, c.3)).collect();
    assert_eq!(
        names,
        [
            (PortKind::Fleet, "queue_push", Outcome::Ok),
            (PortKind::Fleet, "queue_reserve", Outcome::Ok),
            (PortKind::Fleet, "queue_size", Outcome::Error),
            (PortKind::StreamBridge, "stream_exists", Outcome::Ok),
        ]
    );
}
