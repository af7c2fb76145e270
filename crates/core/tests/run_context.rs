use switchyard_core::{Error, RunContext};

#[test]
fn empty_namespace_is_refused() {
    assert!(matches!(
        RunContext::new("r").with_namespace(""),
        Err(Error::InvalidInput { field, .. }) if field == "namespace"
    ));
}

#[test]
fn namespace_key_and_log_key() {
    let bare = RunContext::new("r1");
    assert_eq!(bare.namespace_key(), "");
    assert_eq!(
        bare.log_key(),
        "r1",
        "a run without a session is its own log"
    );
    let full = RunContext::new("r1")
        .with_session("s1")
        .with_namespace("acme")
        .expect("ns");
    assert_eq!(full.namespace_key(), "acme");
    assert_eq!(full.log_key(), "s1");
    let other = full.for_run("r2", Some("s1".into()));
    assert_eq!((other.run_id(), other.namespace()), ("r2", Some("acme")));
}
