//! The log on stderr: plain text, without terminal colour codes, when stderr is a pipe or a file
//! (a log collector or a file must not receive escape sequences).

use std::process::Stdio;

use crate::common::{Gateway, command};

#[tokio::test]
async fn the_log_has_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("switchyard.db");
    let mut cmd = command(dir.path());
    // The refused request below is logged at debug by the gateway's error finisher.
    cmd.env("SWITCHYARD_LOG", "warn,switchyard=debug")
        .args(["serve", "--listen", "127.0.0.1:0", "--sqlite"])
        .arg(&db)
        .stderr(Stdio::piped());
    let gateway = Gateway::spawn(cmd);
    let response = gateway.http().get("/no-such-route").await;
    assert_eq!(response.code(), 404);

    let log = gateway.kill_and_read_stderr();
    assert!(
        log.contains("request refused"),
        "the request was logged: {log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no escape sequence in the log: {log:?}"
    );
}
