//! How `serve` starts: nothing is created before the listener binds, and a Redis that may lose
//! acknowledged writes is reported (or refused with `--require-durable`).

use std::process::Stdio;

use switchyard_conformance::harness::RedisServer;

use crate::common::{Gateway, command};

#[test]
fn a_start_that_fails_on_a_port_in_use_creates_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = command(dir.path())
        .args(["serve", "--listen", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run serve");
    assert!(!out.status.success(), "serve started on a taken port");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot listen on"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "created before the bind: {left:?}");
}

#[test]
fn a_redis_without_persistence_is_refused_with_require_durable() {
    // The harness's servers keep nothing on disk, as a developer's default Redis often does.
    let redis = RedisServer::start().expect("redis-server (see docs/testing.md)");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = command(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis",
            &redis.url(),
            "--require-durable",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run serve");
    assert!(
        !out.status.success(),
        "serve started on a non-durable Redis"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("persistence is off"), "{err}");
    assert!(err.contains("appendonly yes"), "{err}");

    // Without the flag it starts, and says why the server is unfit.
    let mut cmd = command(dir.path());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--redis", &redis.url()])
        .stderr(Stdio::piped());
    let gateway = Gateway::spawn(cmd);
    let log = gateway.kill_and_read_stderr();
    assert!(log.contains("may lose acknowledged writes"), "{log}");

    // A durable server passes the check.
    let durable = RedisServer::start_with(&["--appendonly", "yes"]).expect("redis-server");
    let mut cmd = command(dir.path());
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--redis",
        &durable.url(),
        "--require-durable",
    ])
    .stderr(Stdio::piped());
    let gateway = Gateway::spawn(cmd);
    let log = gateway.kill_and_read_stderr();
    assert!(!log.contains("may lose acknowledged writes"), "{log}");
}
