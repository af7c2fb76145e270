//! `append_if_open` on Redis (ADR 0365): the status is read in the append script from the keys
//! the seed writes too, a refusal writes nothing, and a resent call returns its first result.

mod common;

use chrono::Utc;
use common::{HOUR, started, text};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::event::{Block, Payload, RunCompleted, Usage};
use switchyard_core::{Appended, Error, EventStore, RunContext, RunStatus};

fn completed() -> Payload {
    Payload::RunCompleted(RunCompleted {
        output: vec![Block::text("done")],
        usage: Usage {
            input_tokens: 1,
            output_tokens: 2,
            usd: None,
        },
    })
}

async fn cmd(args: &[&str]) -> String {
    common::raw(&redis_url(), args)
        .await
        .expect("redis command")
}

/// Every key under `prefix` with its type, sorted.
async fn keys(prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = cmd(&["KEYS", &format!("{prefix}:*")])
        .await
        .lines()
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// A seed process opens, appends to and closes runs with its own MULTI writes (and may lay out
/// the JSON its own way): the script judges them by the seed's `life` key.
#[tokio::test]
async fn runs_written_by_a_seed_are_judged_by_their_life_key() {
    let prefix = unique_prefix("aio-seed");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let now = Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let seed_write = |json: String, seq: &'static str, lifecycle: bool| {
        let prefix = prefix.clone();
        async move {
            cmd(&["RPUSH", &format!("{prefix}:log::s"), &json]).await;
            cmd(&["RPUSH", &format!("{prefix}:run::s:py"), &json]).await;
            cmd(&["ZADD", &format!("{prefix}:seq::s:py"), seq, seq]).await;
            if lifecycle {
                cmd(&["SET", &format!("{prefix}:life::s:py"), &json]).await;
                cmd(&["SADD", &format!("{prefix}:logruns::s"), "py"]).await;
                cmd(&["SADD", &format!("{prefix}:runs:"), "s:py"]).await;
            }
        }
    };
    let py = RunContext::new("py").with_session("s");
    seed_write(
        format!(
            r#"{{"v":{{"major":3,"minor":1}},"kind":"run.started","seq":0,"run_id":"py","session_id":"s","namespace":null,"origin":"o","ts":"{now}","payload":{{"kind":"run.started","invocable":"helper","kind_of_invocable":"agent","input":[]}}}}"#
        ),
        "0",
        true,
    )
    .await;
    let events = store
        .append_if_open(&py, vec![text("ours")], "o")
        .await
        .expect("append_if_open")
        .into_stored()
        .expect("the seed's open run takes the append");
    assert_eq!(events[0].seq, 1, "the seed's seqs continue");

    // The seed closes the run, writing its JSON with `json.dumps`' spaces: decoded, not matched.
    seed_write(
        format!(
            r#"{{"v": {{"major": 3, "minor": 1}}, "kind": "run.cancelled", "seq": 2, "run_id": "py", "session_id": "s", "namespace": null, "origin": "o", "ts": "{now}", "payload": {{"kind": "run.cancelled", "reason": null}}}}"#
        ),
        "2",
        true,
    )
    .await;
    let before = keys(&prefix).await;
    let log_len = cmd(&["LLEN", &format!("{prefix}:log::s")]).await;
    assert_eq!(
        store
            .append_if_open(&py, vec![text("late")], "o")
            .await
            .expect("append_if_open"),
        Appended::NotOpen(RunStatus::Cancelled)
    );
    assert_eq!(
        store
            .append_if_open(&py, vec![text("late"), completed()], "o")
            .await
            .expect("append_if_open"),
        Appended::NotOpen(RunStatus::Cancelled),
        "the general path of the script refuses too"
    );
    assert_eq!(
        keys(&prefix).await,
        before,
        "no key is created, not even a receipt"
    );
    assert_eq!(
        cmd(&["LLEN", &format!("{prefix}:log::s")]).await,
        log_len,
        "nothing is pushed"
    );
}

/// An unknown run is refused without a single key written (a seed sharing the Redis sees
/// nothing of it).
#[tokio::test]
async fn refusing_an_unknown_run_writes_no_key() {
    let prefix = unique_prefix("aio-none");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("ghost").with_session("s");
    for batch in [vec![text("a")], vec![completed()], vec![]] {
        assert_eq!(
            store
                .append_if_open(&ctx, batch, "o")
                .await
                .expect("append_if_open"),
            Appended::NotOpen(RunStatus::Pending)
        );
    }
    assert_eq!(keys(&prefix).await, Vec::<String>::new());
}

/// A missing (evicted) `life` key is recovered by folding the run's LIST, as `run_status` does;
/// an entry of that LIST that is no event is `Corrupt`, naming it, and nothing is written.
#[tokio::test]
async fn a_missing_life_key_is_folded_from_the_run_list() {
    let prefix = unique_prefix("aio-life");
    let store = common::store_at(&redis_url(), &prefix, None).await;
    let ctx = RunContext::new("live").with_session("s");
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    let life = format!("{prefix}:life::s:live");
    cmd(&["DEL", &life]).await;
    assert!(
        store
            .append_if_open(&ctx, vec![text("a")], "o")
            .await
            .expect("append_if_open")
            .is_stored(),
        "the run LIST says it is open"
    );
    // A life value that is no event is folded over the same way.
    cmd(&["SET", &life, "{not json"]).await;
    assert!(
        store
            .append_if_open(&ctx, vec![text("b")], "o")
            .await
            .expect("append_if_open")
            .is_stored()
    );
    store
        .append(&ctx, vec![completed()], "o")
        .await
        .expect("complete");
    cmd(&["DEL", &life]).await;
    assert_eq!(
        store
            .append_if_open(&ctx, vec![text("c")], "o")
            .await
            .expect("append_if_open"),
        Appended::NotOpen(RunStatus::Completed)
    );
    assert_eq!(
        store.run_status(&ctx).await.expect("status"),
        RunStatus::Completed,
        "the same answer as run_status"
    );

    let broken = RunContext::new("broken").with_session("s");
    store
        .claim_start(&broken, started(), "o", HOUR)
        .await
        .expect("claim");
    let run_key = format!("{prefix}:run::s:broken");
    cmd(&["RPUSH", &run_key, "{\"v\": not json"]).await;
    cmd(&["DEL", &format!("{prefix}:life::s:broken")]).await;
    match store.append_if_open(&broken, vec![text("d")], "o").await {
        Err(Error::Corrupt { location, .. }) => assert_eq!(location, format!("{run_key}[1]")),
        other => panic!("expected Corrupt naming the entry, got {other:?}"),
    }
    assert_eq!(cmd(&["LLEN", &run_key]).await, "2", "nothing was written");
}

/// A call re-sent with its op token (what fred does after a reconnect) returns its first result,
/// also when that first run ended the run or the run ended since.
#[tokio::test]
async fn a_resent_conditional_append_returns_its_first_result() {
    let store = common::store("aio-resend", None).await;
    let ctx = RunContext::new("r").with_session("s");
    store
        .claim_start(&ctx, started(), "o", HOUR)
        .await
        .expect("claim");
    let plain = store
        .append_if_open_with_op("s", vec![text("a")], &ctx, "o", "op-plain")
        .await
        .expect("append_if_open");
    let ending = store
        .append_if_open_with_op("s", vec![text("b"), completed()], &ctx, "o", "op-end")
        .await
        .expect("append_if_open");
    assert!(ending.is_stored());
    for (op, first, payloads) in [
        ("op-plain", &plain, vec![text("a")]),
        ("op-end", &ending, vec![text("b"), completed()]),
    ] {
        let again = store
            .append_if_open_with_op("s", payloads, &ctx, "o", op)
            .await
            .expect("append_if_open");
        assert_eq!(&again, first, "{op}: the receipt answers");
    }
    assert_eq!(
        store.read_run(&ctx, 0).await.expect("read_run").len(),
        4,
        "each batch was written once"
    );
    assert_eq!(
        store
            .append_if_open_with_op("s", vec![text("c")], &ctx, "o", "op-new")
            .await
            .expect("append_if_open"),
        Appended::NotOpen(RunStatus::Completed)
    );
}
