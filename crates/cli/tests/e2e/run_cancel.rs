//! A cancel that reaches the worker (ADR 0396), from plain Python clients
//! (`fixtures/cancel_client.py`, urllib only, no switchyard library): a worker following its
//! run's signals sees the request and confirms; a worker that ignores it is ended after the
//! grace period by the gateway's own queue; a cancel with no grace ends the run at once and
//! cancels the queue task named as carrying it; a finished run is left as it is.

use std::process::Command;

use serde_json::Value;

use crate::common::{Gateway, fixture, python};

#[tokio::test]
async fn a_cancel_reaches_a_plain_python_worker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gateway = Gateway::embedded(dir.path(), &[]);
    let out = dir.path().join("seen.json");
    let script = fixture("cancel_client.py");
    let run = Command::new(python())
        .arg(&script)
        .args([gateway.base.as_str(), out.to_str().expect("utf-8 path")])
        .output()
        .expect("run the Python clients");
    assert!(
        run.status.success(),
        "the Python clients failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let seen: Value =
        serde_json::from_slice(&std::fs::read(&out).expect("their output")).expect("JSON");

    // 1. The worker saw the request on its signals and its confirmation ended the run.
    assert_eq!(seen["requested"]["outcome"], "requested", "{seen}");
    assert_eq!(seen["signal"]["kind"], "control.requested", "{seen}");
    assert_eq!(seen["signal"]["payload"]["verb"], "cancel", "{seen}");
    assert_eq!(seen["signal"]["payload"]["reason"], "user pressed stop");
    assert_eq!(seen["confirm_status"], 201, "{seen}");
    assert_eq!(
        seen["end_seen"], true,
        "the signals did not carry the run's end"
    );
    assert_eq!(seen["r1"]["status"], "cancelled");
    let last = seen["r1"]["events"]
        .as_array()
        .and_then(|e| e.last())
        .expect("an end");
    assert_eq!(last["payload"]["reason"], "stopped by the worker");
    println!(
        "cancel → worker saw it: {:.1} ms",
        seen["signal_ms"].as_f64().unwrap_or(f64::NAN)
    );

    // 2. Ignored: the grace period ended it.
    assert_eq!(seen["r2"]["status"], "cancelled");
    let end = seen["r2"]["events"]
        .as_array()
        .and_then(|e| e.last())
        .expect("an end");
    assert_eq!(
        end["payload"]["reason"],
        "cancel requested; the worker did not confirm in time"
    );

    // 3. Ended at once, with its task.
    assert_eq!(seen["r3_cancel"]["outcome"], "ended", "{seen}");
    assert_eq!(seen["r3_cancel"]["status"], "cancelled");
    assert_eq!(seen["r3_cancel"]["task"], "cancelled");
    assert_eq!(seen["t3"]["state"], "cancelled", "{seen}");

    // 4. Finished: nothing changed.
    assert_eq!(seen["r1_again"]["outcome"], "finished");
    assert_eq!(seen["r1_again"]["status"], "cancelled");
}
