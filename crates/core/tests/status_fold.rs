//! The status fold, as given / when / then over agentdeck's whole transition table:
//! every status × every kind (the seven lifecycle kinds, a non-lifecycle kind, an unknown kind).

use switchyard_core::status::{
    LIFECYCLE_KINDS, RESUMABLE_STATUSES, RunStatus, TERMINAL_KINDS, TERMINAL_STATUSES, can_resume,
    fold_kinds, lifecycle_status,
};

/// The kinds that bring a run to each status from PENDING (given).
fn path_to(status: RunStatus) -> Vec<&'static str> {
    match status {
        RunStatus::Pending => vec![],
        RunStatus::Running => vec!["run.started"],
        RunStatus::Paused => vec!["run.started", "run.paused"],
        RunStatus::WaitingHuman => vec!["run.started", "run.interrupted"],
        RunStatus::Completed => vec!["run.started", "run.completed"],
        RunStatus::Failed => vec!["run.started", "run.failed"],
        RunStatus::Cancelled => vec!["run.started", "run.cancelled"],
    }
}

#[test]
fn every_status_times_every_kind() {
    let table = [
        ("run.started", Some(RunStatus::Running)),
        ("run.paused", Some(RunStatus::Paused)),
        ("run.resumed", Some(RunStatus::Running)),
        ("run.interrupted", Some(RunStatus::WaitingHuman)),
        ("run.completed", Some(RunStatus::Completed)),
        ("run.failed", Some(RunStatus::Failed)),
        ("run.cancelled", Some(RunStatus::Cancelled)),
        ("text.delta", None),
        ("custom", None),
        ("acme.unknown.kind", None),
    ];
    for given in RunStatus::ALL {
        for (when, sets) in table {
            let mut kinds = path_to(given);
            assert_eq!(fold_kinds(kinds.iter().copied()), given, "given {given}");
            kinds.push(when);
            // Then: a lifecycle kind overwrites any status, unvalidated; other kinds keep it.
            let then = sets.unwrap_or(given);
            assert_eq!(fold_kinds(kinds), then, "given {given}, when {when}");
        }
    }
}

#[test]
fn no_events_or_no_lifecycle_events_is_pending() {
    assert_eq!(fold_kinds([]), RunStatus::Pending);
    assert_eq!(
        fold_kinds(["text.delta", "custom", "x.y"]),
        RunStatus::Pending
    );
}

#[test]
fn interrupted_is_waiting_whatever_its_reason() {
    // The fold looks at kinds only; an interrupt for "pause" still waits for a human.
    assert_eq!(
        lifecycle_status("run.interrupted"),
        Some(RunStatus::WaitingHuman)
    );
}

#[test]
fn the_sets() {
    assert_eq!(LIFECYCLE_KINDS.len(), 7);
    assert!(
        LIFECYCLE_KINDS
            .iter()
            .all(|k| lifecycle_status(k).is_some())
    );
    for k in TERMINAL_KINDS {
        assert!(lifecycle_status(k).is_some_and(RunStatus::is_terminal));
    }
    for s in RunStatus::ALL {
        assert_eq!(s.is_terminal(), TERMINAL_STATUSES.contains(&s));
        assert_eq!(can_resume(s), RESUMABLE_STATUSES.contains(&s));
        assert_eq!(s.as_str().parse::<RunStatus>().expect("round trip"), s);
    }
    assert!(can_resume(RunStatus::Paused) && can_resume(RunStatus::WaitingHuman));
    assert!("RUNNING".parse::<RunStatus>().is_err());
}
