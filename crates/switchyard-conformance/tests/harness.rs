//! The harness proves itself: it finds or starts a Redis, isolates tests, and owns private servers.

use switchyard_conformance::harness::{
    RedisServer, TempSqlite, redis_cmd, redis_url, unique_prefix,
};

#[test]
fn shared_redis_answers_ping() {
    let url = redis_url();
    assert_eq!(redis_cmd(&url, &["PING"]).as_deref(), Ok("PONG"));
}

#[test]
fn shared_redis_is_the_same_for_every_test_of_a_binary() {
    assert_eq!(redis_url(), redis_url());
}

#[test]
fn prefixes_are_unique_per_test() {
    let a = unique_prefix("t");
    let b = unique_prefix("t");
    assert_ne!(a, b);
    let url = redis_url();
    redis_cmd(&url, &["SET", &format!("{a}:k"), "1"]).expect("SET");
    assert_eq!(
        redis_cmd(&url, &["GET", &format!("{b}:k")]).as_deref(),
        Ok("")
    );
}

#[test]
fn private_server_stops_and_restarts_on_its_data() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
        .expect("start");
    let url = server.url();
    assert_ne!(url, redis_url(), "a private server is not the shared one");
    redis_cmd(&url, &["SET", "durable", "yes"]).expect("SET");
    server.kill();
    assert!(!server.is_running());
    assert!(
        redis_cmd(&url, &["PING"]).is_err(),
        "a killed server refuses connections"
    );
    server.restart().expect("restart");
    assert_eq!(redis_cmd(&url, &["GET", "durable"]).as_deref(), Ok("yes"));
}

#[test]
fn dropping_a_private_server_stops_it() {
    let server = RedisServer::start().expect("start");
    let url = server.url();
    drop(server);
    assert!(redis_cmd(&url, &["PING"]).is_err());
}

#[test]
fn sqlite_files_are_temporary_and_distinct() {
    let a = TempSqlite::new();
    let b = TempSqlite::new();
    assert_ne!(a.path(), b.path());
    assert!(a.url().starts_with("sqlite://"));
    let dir = a.path().parent().expect("parent").to_path_buf();
    assert!(dir.exists());
    drop(a);
    assert!(!dir.exists(), "the directory goes with the value");
}

#[test]
fn shared_cluster_has_every_slot_covered() {
    use switchyard_conformance::harness::redis_cluster_url;
    let url = redis_cluster_url();
    assert!(url.starts_with("redis-cluster://"), "{url}");
    let first = url
        .trim_start_matches("redis-cluster://")
        .split('?')
        .next()
        .expect("host");
    let info = redis_cmd(&format!("redis://{first}"), &["CLUSTER", "INFO"]).expect("CLUSTER INFO");
    assert!(info.contains("cluster_state:ok"), "{info}");
    assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    assert!(info.contains("cluster_size:3"), "{info}");
}

#[test]
fn private_cluster_fails_over_when_a_master_dies() {
    use switchyard_conformance::harness::RedisCluster;
    let mut cluster = RedisCluster::start(3, 1).expect("cluster");
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    cluster
        .kill_master_and_wait_failover(masters[0])
        .expect("a replica takes over");
    let now = cluster.master_ports();
    assert_eq!(now.len(), 3, "a replica was promoted: {now:?}");
    assert!(!now.contains(&masters[0]));
}
