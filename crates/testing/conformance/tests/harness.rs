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

mod postgres {
    use switchyard_conformance::harness::{
        PostgresServer, fresh_database, postgres_exec, postgres_query, postgres_url, unique_schema,
        with_database,
    };

    fn scalar(url: &str, sql: &str) -> Option<String> {
        let rows = postgres_query(url, sql).expect(sql);
        rows.into_iter()
            .next()
            .and_then(|row| row.into_iter().next().flatten())
    }

    #[test]
    fn shared_server_answers_and_is_the_same_for_every_test() {
        let url = postgres_url();
        assert_eq!(postgres_url(), url);
        assert_eq!(scalar(&url, "SELECT 1 + 1").as_deref(), Some("2"));
    }

    #[test]
    fn schemas_and_databases_are_fresh_per_test() {
        let (a, b) = (unique_schema("Same Tag"), unique_schema("Same Tag"));
        assert_ne!(a, b);
        assert!(a.starts_with("swt_same_tag_"), "{a}");
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
        );
        let url = postgres_url();
        let db = fresh_database(&url, "harness");
        assert_ne!(db, url);
        postgres_exec(
            &db,
            "CREATE TABLE only_here (x INT); INSERT INTO only_here VALUES (7)",
        )
        .expect("create");
        assert_eq!(scalar(&db, "SELECT x FROM only_here").as_deref(), Some("7"));
        assert!(
            postgres_exec(&url, "SELECT x FROM only_here").is_err(),
            "another database does not see the table"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/old?sslmode=disable", "new"),
            "postgres://u:p@h:1/new?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "new"), "postgres://h/new");
    }

    /// One server through all of a fault test's moves: a committed row survives a SIGKILL of
    /// the server and every backend, and a clean stop; a stopped or killed server refuses
    /// connections; dropping it removes its directory.
    #[test]
    fn private_server_stops_kills_and_restarts_on_its_data() {
        let mut server = PostgresServer::start_durable().expect("start");
        let url = server.url();
        assert_ne!(
            url,
            postgres_url(),
            "a private server is not the shared one"
        );
        postgres_exec(
            &url,
            "CREATE TABLE durable (x INT); INSERT INTO durable VALUES (1)",
        )
        .expect("write");
        server.kill();
        assert!(!server.is_running());
        assert!(
            postgres_exec(&url, "SELECT 1").is_err(),
            "a killed server refuses"
        );
        server.restart().expect("restart after kill");
        assert_eq!(
            scalar(&url, "SELECT count(*) FROM durable").as_deref(),
            Some("1")
        );
        server.stop();
        assert!(
            postgres_exec(&url, "SELECT 1").is_err(),
            "a stopped server refuses"
        );
        server.restart().expect("restart after stop");
        assert_eq!(scalar(&url, "SELECT x FROM durable").as_deref(), Some("1"));
        let dir = server.data_dir();
        drop(server);
        assert!(!dir.exists(), "the directory goes with the value");
        assert!(postgres_exec(&url, "SELECT 1").is_err());
    }
}
