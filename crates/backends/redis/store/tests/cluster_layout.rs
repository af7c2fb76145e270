//! The cluster key layout (ADR 0090) on the harness Redis Cluster: exact keys, one slot per
//! namespace, and hostile ids that can neither leave their namespace's slot nor collide.

mod common;

use std::collections::BTreeSet;

use common::{HOUR, started, text};
use switchyard_conformance::harness::{redis_cluster_url, unique_prefix};
use switchyard_core::keys::quote;
use switchyard_core::store::QueuedRun;
use switchyard_core::{EventStore, RunContext, RunStatus};
use switchyard_store_redis::{KeyLayout, KeySpace};

async fn raw(args: &[&str]) -> String {
    common::cluster_raw(&redis_cluster_url(), args)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[tokio::test]
async fn cluster_layout_exact_keys() {
    let url = redis_cluster_url();
    let prefix = unique_prefix("clayout");
    let store = common::store_at(&url, &prefix, None).await;
    let ctx = RunContext::new("r:1")
        .with_session("s/1")
        .with_namespace("team a")
        .expect("namespace");
    let (claim, _) = store
        .claim_start(&ctx, started(), "test", HOUR)
        .await
        .expect("claim_start");
    assert!(claim.won());
    store
        .append_with_op("s/1", vec![text("x")], &ctx, "test", "tok1")
        .await
        .expect("append");

    let p = &prefix;
    let tag = "{ns:team%20a}";
    let expected = [
        (format!("{p}:log:{tag}:s%2F1"), "list"),
        (format!("{p}:run:{tag}:s%2F1:r%3A1"), "list"),
        (format!("{p}:seq:{tag}:s%2F1:r%3A1"), "zset"),
        (format!("{p}:life:{tag}:s%2F1:r%3A1"), "string"),
        (format!("{p}:logruns:{tag}:s%2F1"), "set"),
        (format!("{p}:runs:{tag}"), "set"),
        (format!("{p}:open:{tag}:s%2F1"), "set"),
        (format!("{p}:openlen:{tag}:s%2F1"), "string"),
        (format!("{p}:op:{tag}:tok1"), "string"),
    ];
    let slot = common::keyslot(&url, "ns:team%20a").await;
    for (key, ty) in &expected {
        assert_eq!(raw(&["TYPE", key]).await, *ty, "{key}");
        assert_eq!(common::keyslot(&url, key).await, slot, "{key}");
    }
    assert_eq!(raw(&["LLEN", &expected[0].0]).await, "2");
    assert_eq!(raw(&["SMEMBERS", &expected[5].0]).await, "s%2F1:r%3A1");
    assert_eq!(raw(&["SMEMBERS", &expected[6].0]).await, "r:1");
    assert_eq!(raw(&["GET", &expected[7].0]).await, "2");
    // The KeySpace the store reports builds the same keys.
    assert_eq!(store.keys().layout(), KeyLayout::Cluster);
    assert_eq!(store.keys().runs("team a"), expected[5].0);
}

#[tokio::test]
async fn hostile_ids_stay_in_their_namespace_slot_and_never_collide() {
    let url = redis_cluster_url();
    let prefix = unique_prefix("chostile");
    let store = common::store_at(&url, &prefix, None).await;
    let keys = KeySpace::with_layout(prefix.clone(), KeyLayout::Cluster);
    // `None` is the null namespace (key ""); the rest are hostile namespace names. `{ns:}` would
    // forge the null namespace's tag if braces were not escaped.
    let namespaces: [Option<&str>; 7] = [
        None,
        Some("{"),
        Some("}"),
        Some("}{"),
        Some("%7B"),
        Some("{ns:}"),
        Some("ns:"),
    ];
    let hostile = ["{", "}", "}{", "%7B", "{ns:}"];
    let mut all_keys = BTreeSet::new();
    let mut tags = BTreeSet::new();
    for (i, ns) in namespaces.iter().enumerate() {
        let log = hostile[i % hostile.len()];
        let run = format!("{}{i}", hostile[(i + 1) % hostile.len()]);
        let mut ctx = RunContext::new(run.clone()).with_session(log);
        if let Some(ns) = ns {
            ctx = ctx.with_namespace(*ns).expect("namespace");
        }
        let (claim, _) = store
            .claim_start(&ctx, started(), "test", HOUR)
            .await
            .expect("claim_start (no CROSSSLOT)");
        assert!(claim.won(), "{ns:?}: {claim:?}");
        store
            .append(&ctx, vec![text("a")], "test")
            .await
            .expect("append");
        // A run waiting in the log's line (ADR 0394): its LIST is in the slot too.
        let waiting = format!("{run}w");
        let entry = QueuedRun {
            run_id: waiting.clone(),
            opening: started(),
            origin: "test".into(),
            stale_after: HOUR,
        };
        let waiting_ctx = ctx.for_run(waiting, Some(log.to_string()));
        store
            .line_push(&waiting_ctx, &entry)
            .await
            .expect("line_push (no CROSSSLOT)");
        let listed = store.list_runs(&ctx, None).await.expect("list_runs");
        assert_eq!(listed.len(), 1, "{ns:?} sees only its own run: {listed:?}");
        assert_eq!(listed[0].run_id, run);
        assert_eq!(listed[0].status, RunStatus::Running);

        let ns_key = ctx.namespace_key();
        let tag = format!("ns:{}", quote(ns_key));
        assert!(
            tags.insert(tag.clone()),
            "tag {tag} shared by two namespaces"
        );
        let slot = common::keyslot(&url, &tag).await;
        for key in [
            keys.log(ns_key, log),
            keys.run(ns_key, log, &run),
            keys.seq(ns_key, log, &run),
            keys.life(ns_key, log, &run),
            keys.logruns(ns_key, log),
            keys.runs(ns_key),
            keys.open(ns_key, log),
            keys.openlen(ns_key, log),
            keys.op(ns_key, "t"),
            keys.line(ns_key, log),
        ] {
            assert_eq!(common::keyslot(&url, &key).await, slot, "{key} left {tag}");
            if !key.contains(":op:") {
                assert_eq!(raw(&["EXISTS", &key]).await, "1", "{key}");
            }
            assert!(all_keys.insert(key.clone()), "{key} collides");
        }
    }
}

/// On a cluster the claim's EVALSHA goes to the namespace's node; after every master lost its
/// script cache the claim loads the script again (on every master) and wins (ADR 0330).
#[tokio::test]
async fn claims_on_a_cluster_survive_a_flushed_script_cache() {
    let mut cluster =
        switchyard_conformance::harness::RedisCluster::start(3, 0).expect("a private cluster");
    let url = cluster.url();
    let store = common::store_at(&url, &unique_prefix("cflush"), None).await;
    for node in cluster.nodes() {
        switchyard_conformance::harness::redis_cmd(&node.url(), &["SCRIPT", "FLUSH"])
            .expect("SCRIPT FLUSH");
    }
    for ns in ["a", "b", "c", "d"] {
        let ctx = RunContext::new("r")
            .with_session("s")
            .with_namespace(ns)
            .expect("namespace");
        let (claim, event) = store
            .claim_start(&ctx, started(), "o", HOUR)
            .await
            .expect("claim_start after SCRIPT FLUSH");
        assert!(claim.won(), "{ns}: {claim:?}");
        assert_eq!(event.map(|e| e.seq), Some(0), "{ns}");
        let other = RunContext::new("q")
            .with_session("s")
            .with_namespace(ns)
            .expect("namespace");
        let (claim, _) = store
            .claim_start(&other, started(), "o", HOUR)
            .await
            .expect("claim_start");
        assert_eq!(claim.held_by.as_deref(), Some("r"), "{ns}");
    }
}
