//! The front's own rules, on an adapter that only records what reaches it: what the front answers
//! itself never reaches the adapter, and what it hands on has passed its checks.

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::{Call, EventStoreOps};
use crate::context::{RunContext, RunSummary, SessionClaim};
use crate::event::{
    Block, InvocableKind, MessageText, Payload, RunResumed, RunStarted, StatusReported,
};
use crate::status::RunStatus;
use crate::store::{Appended, EventStore, MAX_LINE, QueuedRun};
use crate::{Error, Result};

/// Records every step and every guarded call; answers with nothing, and with `status` for the
/// run's status.
#[derive(Debug)]
struct Recorder {
    status: RunStatus,
    log: Mutex<Vec<String>>,
}

impl Recorder {
    fn new(status: RunStatus) -> Arc<Self> {
        Arc::new(Self {
            status,
            log: Mutex::new(Vec::new()),
        })
    }

    fn note(&self, entry: String) {
        self.log.lock().expect("log").push(entry);
    }

    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().expect("log"))
    }
}

#[async_trait]
impl EventStoreOps for Recorder {
    async fn append(
        &self,
        _ctx: &RunContext,
        payloads: Vec<Payload>,
        _origin: &str,
    ) -> Result<Vec<crate::Event>> {
        self.note(format!("append {}", payloads.len()));
        Ok(Vec::new())
    }

    async fn append_if_open(
        &self,
        _ctx: &RunContext,
        payloads: Vec<Payload>,
        _origin: &str,
    ) -> Result<Appended> {
        self.note(format!("append_if_open {}", payloads.len()));
        Ok(Appended::NotOpen(self.status))
    }

    async fn read(
        &self,
        _ctx: &RunContext,
        offset: u64,
        limit: Option<NonZeroU64>,
    ) -> Result<Vec<crate::Event>> {
        self.note(format!("read {offset} {limit:?}"));
        Ok(Vec::new())
    }

    async fn read_run(&self, _ctx: &RunContext, from_seq: u64) -> Result<Vec<crate::Event>> {
        self.note(format!("read_run {from_seq}"));
        Ok(Vec::new())
    }

    async fn claim_start(
        &self,
        _ctx: &RunContext,
        opening: Payload,
        _origin: &str,
        stale_after: Duration,
    ) -> Result<(SessionClaim, Option<crate::Event>)> {
        self.note(format!("claim_start {} {stale_after:?}", opening.kind()));
        Ok((SessionClaim::default(), None))
    }

    async fn claim_resume(
        &self,
        _ctx: &RunContext,
        resumed: Payload,
        _origin: &str,
    ) -> Result<Option<crate::Event>> {
        self.note(format!("claim_resume {}", resumed.kind()));
        Ok(None)
    }

    async fn list_runs(
        &self,
        _ctx: &RunContext,
        _status: Option<RunStatus>,
    ) -> Result<Vec<RunSummary>> {
        self.note("list_runs".into());
        Ok(Vec::new())
    }

    async fn run_status(&self, _ctx: &RunContext) -> Result<RunStatus> {
        self.note("run_status".into());
        Ok(self.status)
    }

    async fn line_push(&self, _ctx: &RunContext, entry: &QueuedRun) -> Result<u64> {
        self.note(format!("line_push {}", entry.run_id));
        Ok(1)
    }

    async fn line_read(&self, _ctx: &RunContext, limit: usize) -> Result<Vec<QueuedRun>> {
        self.note(format!("line_read {limit}"));
        Ok(Vec::new())
    }

    async fn line_remove(&self, _ctx: &RunContext, run_id: &str) -> Result<bool> {
        self.note(format!("line_remove {run_id}"));
        Ok(false)
    }

    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        key: &'a str,
        call: Call<'a, T>,
    ) -> Call<'a, T> {
        self.note(format!("guard {op} {key}"));
        call
    }
}

fn port(recorder: &Arc<Recorder>) -> Arc<dyn EventStore> {
    recorder.clone()
}

fn ctx() -> RunContext {
    RunContext::new("r")
        .with_session("s")
        .with_namespace("acme")
        .expect("namespace")
}

fn text() -> Payload {
    Payload::TextDelta(MessageText {
        message_id: "m".into(),
        text: "hi".into(),
    })
}

fn invalid() -> Payload {
    Payload::StatusReported(StatusReported {
        message: String::new(),
    })
}

fn started() -> RunStarted {
    RunStarted {
        invocable: "agent".into(),
        kind_of_invocable: InvocableKind::Agent,
        input: vec![Block::text("hi")],
    }
}

fn refused_field(result: Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::InvalidInput { field, .. }) => field,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[tokio::test]
async fn empty_and_invalid_batches_never_reach_the_adapter() {
    let recorder = Recorder::new(RunStatus::Running);
    let store = port(&recorder);
    let ctx = ctx();
    assert!(
        store
            .append(&ctx, vec![], "o")
            .await
            .expect("empty")
            .is_empty()
    );
    let field = refused_field(store.append(&ctx, vec![text(), invalid()], "o").await);
    assert_eq!(field, "payload.message");
    let field = refused_field(store.append_if_open(&ctx, vec![invalid()], "o").await);
    assert_eq!(field, "payload.message");
    assert_eq!(recorder.taken(), Vec::<String>::new());

    store
        .append(&ctx, vec![text(), text()], "o")
        .await
        .expect("append");
    assert_eq!(recorder.taken(), ["guard append s", "append 2"]);
}

#[tokio::test]
async fn an_empty_conditional_append_answers_from_the_status() {
    let open = Recorder::new(RunStatus::Paused);
    let answer = port(&open).append_if_open(&ctx(), vec![], "o").await;
    assert_eq!(
        answer.expect("open"),
        Appended::Stored {
            events: vec![],
            status: RunStatus::Paused
        }
    );
    assert_eq!(open.taken(), ["guard append_if_open s", "run_status"]);

    let ended = Recorder::new(RunStatus::Completed);
    let answer = port(&ended).append_if_open(&ctx(), vec![], "o").await;
    assert_eq!(
        answer.expect("ended"),
        Appended::NotOpen(RunStatus::Completed)
    );
    assert_eq!(ended.taken(), ["guard append_if_open s", "run_status"]);

    let pending = Recorder::new(RunStatus::Pending);
    let answer = port(&pending)
        .append_if_open(&ctx(), vec![text()], "o")
        .await;
    assert_eq!(
        answer.expect("pending"),
        Appended::NotOpen(RunStatus::Pending)
    );
    assert_eq!(
        pending.taken(),
        ["guard append_if_open s", "append_if_open 1"]
    );
}

#[tokio::test]
async fn paging_is_checked_before_the_adapter() {
    let recorder = Recorder::new(RunStatus::Running);
    let store = port(&recorder);
    let ctx = ctx();
    assert_eq!(refused_field(store.read(&ctx, 0, Some(-1)).await), "limit");
    assert!(
        store
            .read(&ctx, 5, Some(0))
            .await
            .expect("limit 0")
            .is_empty()
    );
    assert!(
        store
            .read_run(&ctx, u64::MAX)
            .await
            .expect("past")
            .is_empty()
    );
    assert_eq!(recorder.taken(), Vec::<String>::new());

    store.read(&ctx, -7, Some(3)).await.expect("read");
    store.read(&ctx, 2, None).await.expect("read all");
    store
        .read_run(&ctx, i64::MAX as u64)
        .await
        .expect("read_run");
    assert_eq!(
        recorder.taken(),
        [
            "guard read s",
            "read 0 Some(3)",
            "guard read s",
            "read 2 None",
            "guard read_run s",
            &format!("read_run {}", i64::MAX),
        ]
    );
}

#[tokio::test]
async fn claims_get_validated_payloads_and_every_call_is_guarded_by_its_key() {
    let recorder = Recorder::new(RunStatus::Running);
    let store = port(&recorder);
    let ctx = ctx();
    let mut bad = started();
    bad.input = vec![Block::Image {
        media_type: "image/png".into(),
        data_b64: "not base64!".into(),
    }];
    let refused = store.claim_start(&ctx, bad, "o", Duration::MAX).await;
    assert_eq!(refused_field(refused), "payload.input[0].data_b64");
    assert_eq!(recorder.taken(), Vec::<String>::new());

    store
        .claim_start(&ctx, started(), "o", Duration::MAX)
        .await
        .expect("claim");
    let resumed = RunResumed {
        reason: None,
        value: None,
    };
    store
        .claim_resume(&ctx, resumed, "o")
        .await
        .expect("resume");
    store.list_runs(&ctx, None).await.expect("list");
    store.run_status(&ctx).await.expect("status");
    assert_eq!(
        recorder.taken(),
        [
            "guard claim_start s",
            &format!("claim_start run.started {:?}", Duration::MAX),
            "guard claim_resume s",
            "claim_resume run.resumed",
            "guard list_runs acme",
            "list_runs",
            "guard run_status s",
            "run_status",
        ]
    );
}

/// Guarantee `line.order`: the front refuses an entry that is not the context's run, answers a read of nothing itself and bounds every read by the line's
/// bound.
#[tokio::test]
async fn line_calls_are_checked_and_bounded() {
    let recorder = Recorder::new(RunStatus::Running);
    let store = port(&recorder);
    let entry = |run_id: &str| QueuedRun {
        run_id: run_id.into(),
        opening: RunStarted {
            invocable: "agent".into(),
            kind_of_invocable: InvocableKind::Agent,
            input: vec![Block::text("hi")],
        },
        origin: "o".into(),
        stale_after: Duration::from_secs(30),
    };
    let other = store.line_push(&ctx(), &entry("other")).await;
    assert!(
        matches!(other, Err(Error::InvalidInput { ref field, .. }) if field == "run_id"),
        "{other:?}"
    );
    assert_eq!(recorder.taken(), Vec::<String>::new());
    assert_eq!(store.line_push(&ctx(), &entry("r")).await.expect("push"), 1);
    assert!(store.line_read(&ctx(), 0).await.expect("read").is_empty());
    store.line_read(&ctx(), usize::MAX).await.expect("read");
    assert_eq!(
        recorder.taken(),
        vec![
            "guard line_push s".to_string(),
            "line_push r".into(),
            "guard line_read s".into(),
            format!("line_read {MAX_LINE}"),
        ]
    );
}
