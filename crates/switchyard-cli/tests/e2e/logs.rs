//! The log on stderr: plain text, without terminal colour codes, when stderr is a pipe or a file
//! (a log collector or a file must not receive escape sequences).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::Stdio;

use crate::common::command;

#[test]
fn the_log_has_no_colour_codes_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("switchyard.db");
    let mut child = command(dir.path())
        // The refused request below is logged at debug by the gateway's error finisher.
        .env("SWITCHYARD_LOG", "warn,switchyard=debug")
        .args(["serve", "--listen", "127.0.0.1:0", "--sqlite"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchyard");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let base = line
        .trim()
        .strip_prefix("switchyard listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let mut conn = TcpStream::connect(&base).expect("connect");
    write!(
        conn,
        "GET /no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    conn.read_to_string(&mut response).expect("response");
    assert!(response.starts_with("HTTP/1.1 404"), "{response}");

    let _ = child.kill();
    let mut log = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut log)
        .expect("the log");
    let _ = child.wait();
    assert!(
        log.contains("request refused"),
        "the request was logged: {log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no escape sequence in the log: {log:?}"
    );
}
