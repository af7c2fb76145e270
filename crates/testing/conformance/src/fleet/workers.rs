//! Guarantees `worker.registry` and `worker.stats`: the worker registry and its stats history.

use serde_json::json;
use switchyard_core::fleet::{ConfigWrite, WorkerState};

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `worker.registry`: register seeds config `{}` at generation 0 or keeps what exists;
/// every config write bumps the generation, compare-and-set with `expected_gen`; config and
/// generation are read together; calls on an unregistered worker write nothing; a re-registered
/// worker's generation is above any it saw.
pub async fn worker_registry(b: Backend) {
    let at = unique_id("at");
    let w = "w1";
    assert_eq!(
        b.worker_get_config(&at, w).await.expect("config"),
        (json!({}), 0)
    );
    assert_eq!(
        b.worker_set_config(&at, w, &json!({"slots": 1}), None)
            .await
            .expect("set"),
        ConfigWrite::NotRegistered
    );
    let st = WorkerState {
        state: "RUNNING",
        last_error: None,
        last_seen: 5.0,
        applied_gen: None,
    };
    assert!(!b.worker_set_state(&at, w, st.clone()).await.expect("state"));
    assert!(
        !b.worker_set_stats(&at, w, &json!({"a": 1}))
            .await
            .expect("stats")
    );
    assert!(b.worker_get(&at, w).await.expect("get").is_none());
    assert!(
        b.worker_list(Some(&at)).await.expect("list").is_empty(),
        "nothing was created"
    );

    b.worker_register(&at, w, &json!({"cpu": 4}))
        .await
        .expect("register");
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!(
        (r.config.clone(), r.config_gen, r.state.as_str()),
        (json!({}), 0, "IDLE")
    );
    assert_eq!(
        (r.last_seen, r.last_error.clone(), r.stats.clone()),
        (0.0, None, json!({}))
    );
    assert_eq!(r.hardware, json!({"cpu": 4}));

    let cfg = json!({"slots": 3, "enabled": true});
    assert_eq!(
        b.worker_set_config(&at, w, &cfg, None).await.expect("set"),
        ConfigWrite::Applied { generation: 1 }
    );
    assert_eq!(
        b.worker_set_config(&at, w, &json!({"slots": 9}), Some(0))
            .await
            .expect("cas"),
        ConfigWrite::GenMismatch { current: 1 }
    );
    assert_eq!(
        b.worker_get_config(&at, w).await.expect("config"),
        (cfg.clone(), 1)
    );
    let cfg2 = json!({"slots": 4});
    assert_eq!(
        b.worker_set_config(&at, w, &cfg2, Some(1))
            .await
            .expect("cas"),
        ConfigWrite::Applied { generation: 2 }
    );
    b.worker_register(&at, w, &json!({"cpu": 8}))
        .await
        .expect("re-register");
    let st = WorkerState {
        state: "RUNNING",
        last_error: Some("boom"),
        last_seen: 12.5,
        applied_gen: Some(2),
    };
    assert!(b.worker_set_state(&at, w, st).await.expect("state"));
    assert!(
        b.worker_set_stats(&at, w, &json!({"done": 7}))
            .await
            .expect("stats")
    );
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!(r.hardware, json!({"cpu": 8}));
    assert_eq!(
        (r.config.clone(), r.config_gen),
        (cfg2, 2),
        "register keeps config and gen"
    );
    assert_eq!(
        (r.state.as_str(), r.last_seen, r.last_error.as_deref()),
        ("RUNNING", 12.5, Some("boom"))
    );
    assert_eq!(
        (r.applied_gen, r.stats.clone()),
        (Some(2), json!({"done": 7}))
    );

    b.worker_register(&at, "w2", &json!({}))
        .await
        .expect("register");
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![
            (at.clone(), "w1".to_string()),
            (at.clone(), "w2".to_string())
        ]
    );
    let all = b.worker_list(None).await.expect("list all");
    assert!(all.contains(&(at.clone(), "w1".to_string())));

    assert!(
        b.worker_stats_push(&at, w, 1.0, &json!({"f": 1}), 10)
            .await
            .expect("push")
    );
    assert!(b.worker_remove(&at, w).await.expect("remove"));
    assert!(!b.worker_remove(&at, w).await.expect("remove twice"));
    assert!(b.worker_get(&at, w).await.expect("get").is_none());
    assert_eq!(
        b.worker_list(Some(&at)).await.expect("list"),
        vec![(at.clone(), "w2".to_string())]
    );

    b.worker_register(&at, w, &json!({}))
        .await
        .expect("register again");
    let (config, generation) = b.worker_get_config(&at, w).await.expect("config");
    assert_eq!(config, json!({}));
    assert!(
        generation > 2,
        "a re-registered worker's generation is above any it saw ({generation})"
    );
    assert!(
        b.worker_stats_history(&at, w, 0.0, 10)
            .await
            .expect("history")
            .is_empty(),
        "remove deleted the stats history"
    );
    let r = b
        .worker_get(&at, w)
        .await
        .expect("get")
        .expect("registered");
    assert_eq!((r.state.as_str(), r.stats), ("IDLE", json!({})));
}

/// Guarantee `worker.stats`: the stats history keeps the newest `max_entries` frames and returns
/// `ts ≥ since`, oldest first, up to `limit`.
pub async fn worker_stats(b: Backend) {
    let at = unique_id("at");
    b.worker_register(&at, "w", &json!({}))
        .await
        .expect("register");
    for ts in 1..=10 {
        assert!(
            b.worker_stats_push(&at, "w", ts as f64, &json!({"n": ts}), 5)
                .await
                .expect("push")
        );
    }
    let all = b
        .worker_stats_history(&at, "w", 0.0, 240)
        .await
        .expect("history");
    assert_eq!(all, (6..=10).map(|n| json!({"n": n})).collect::<Vec<_>>());
    let since = b
        .worker_stats_history(&at, "w", 8.0, 240)
        .await
        .expect("history");
    assert_eq!(since, (8..=10).map(|n| json!({"n": n})).collect::<Vec<_>>());
    let limited = b
        .worker_stats_history(&at, "w", 0.0, 2)
        .await
        .expect("history");
    assert_eq!(limited, vec![json!({"n": 6}), json!({"n": 7})]);
    assert!(
        !b.worker_stats_push(&at, "nobody", 1.0, &json!({}), 5)
            .await
            .expect("push")
    );
}
