//! The futures of the backend's calls hold no fred command future inline (ADR 0403).
//!
//! A fred command's future is several kilobytes. Held inline, it is moved (copied whole) by
//! every layer of `async fn` that awaits it and once more into the box of each `async_trait`
//! call: measured on the typed queue's cycle, those copies were a fifth of the client's CPU.
//! `LuaScript::run` and the backend's `command` box it where it is made, so a call's future
//! stays smaller than one fred future, whatever the layers above it.

use std::time::Duration;

use fred::prelude::{Client, KeysInterface};
use switchyard_conformance::harness::{redis_url, unique_prefix};
use switchyard_core::fleet::adapter::{KvOps, QueueOps, TaskOps};
use switchyard_core::fleet::{Priority, Receipt, TaskHead};
use switchyard_fleet_redis::{RedisFleetBackend, RedisFleetConfig};

#[tokio::test]
async fn no_call_holds_a_fred_command_future_inline() {
    let prefix = format!("{}:", unique_prefix("sizes"));
    let b = RedisFleetBackend::with_config(RedisFleetConfig::new(redis_url()).with_prefix(&prefix))
        .await
        .expect("connect");
    let fred = {
        let c = Client::default();
        std::mem::size_of_val(&c.get::<fred::types::Value, _>("k"))
    };
    let head = TaskHead::with_id("t-1");
    let receipt = Receipt::new("r");
    let sizes = [
        (
            "queue_push",
            std::mem::size_of_val(&*QueueOps::queue_push(
                &b,
                "q",
                b"{}",
                &head,
                Priority::Normal,
            )),
        ),
        (
            "queue_try_reserve",
            std::mem::size_of_val(&*QueueOps::queue_try_reserve(&b, "q", 1, 1_000, false)),
        ),
        (
            "queue_ack",
            std::mem::size_of_val(&*QueueOps::queue_ack(&b, "q", &receipt, None)),
        ),
        (
            "kv_get",
            std::mem::size_of_val(&*KvOps::kv_get(&b, "ns", "k")),
        ),
        (
            "task_events",
            std::mem::size_of_val(&*TaskOps::task_events(&b, "q", None, 10)),
        ),
    ];
    for (call, size) in sizes {
        assert!(
            size < fred,
            "{call}'s future is {size} bytes, a fred command future {fred}: one is held inline"
        );
    }
    // The backend still works through the boxed calls.
    KvOps::kv_set(&b, "ns", "k", b"v", Some(Duration::from_secs(60)))
        .await
        .expect("set");
    assert_eq!(
        KvOps::kv_get(&b, "ns", "k").await.expect("get"),
        Some(b"v".to_vec())
    );
}
