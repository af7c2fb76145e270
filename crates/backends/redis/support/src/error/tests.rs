//! The classification table: every fred error kind, and every reply code the adapters meet.

use super::*;

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Want {
    Unavailable,
    Config,
    Rejected,
    Corrupt,
}

fn variant(e: &Error) -> Want {
    match e {
        Error::Unavailable { .. } => Want::Unavailable,
        Error::Config { .. } => Want::Config,
        Error::Rejected { .. } => Want::Rejected,
        Error::Corrupt { .. } => Want::Corrupt,
        other => panic!("unexpected variant {other:?}"),
    }
}

#[test]
fn every_fred_error_kind() {
    use Want::*;
    // Kinds as fred raises them on its own, with details that carry no reply code.
    let table = [
        (ErrorKind::Config, "Invalid client configuration.", Config),
        (ErrorKind::Auth, "Authentication failed.", Config),
        (ErrorKind::Routing, "Failed to route command.", Unavailable),
        (
            ErrorKind::IO,
            "Connection reset by peer (os error 104)",
            Unavailable,
        ),
        (
            ErrorKind::InvalidCommand,
            "Invalid command on a subscriber.",
            Rejected,
        ),
        (ErrorKind::InvalidArgument, "Invalid argument.", Rejected),
        (ErrorKind::Url, "Invalid port.", Config),
        (ErrorKind::Protocol, "Invalid frame.", Unavailable),
        (ErrorKind::Tls, "invalid peer certificate", Config),
        (ErrorKind::Canceled, "Canceled.", Unavailable),
        (ErrorKind::Unknown, "Max attempts exceeded", Unavailable),
        (ErrorKind::Timeout, "Request timed out.", Unavailable),
        (
            ErrorKind::Cluster,
            "Invalid or missing cluster state.",
            Unavailable,
        ),
        (ErrorKind::Parse, "Could not convert to number.", Corrupt),
        (
            ErrorKind::Sentinel,
            "Failed to connect to sentinel.",
            Unavailable,
        ),
        (ErrorKind::NotFound, "Expected a value, found nil.", Corrupt),
        (
            ErrorKind::Backpressure,
            "Max in-flight commands reached.",
            Unavailable,
        ),
    ];
    // A new fred kind must be added to the table (and to `classify`, which matches every kind).
    let covered = |k: &ErrorKind| table.iter().any(|(t, ..)| t == k);
    for kind in [
        ErrorKind::Config,
        ErrorKind::Auth,
        ErrorKind::Routing,
        ErrorKind::IO,
        ErrorKind::InvalidCommand,
        ErrorKind::InvalidArgument,
        ErrorKind::Url,
        ErrorKind::Protocol,
        ErrorKind::Tls,
        ErrorKind::Canceled,
        ErrorKind::Unknown,
        ErrorKind::Timeout,
        ErrorKind::Cluster,
        ErrorKind::Parse,
        ErrorKind::Sentinel,
        ErrorKind::NotFound,
        ErrorKind::Backpressure,
    ] {
        assert!(covered(&kind), "{kind:?} is missing from the table");
    }
    for (kind, details, want) in table {
        let got = classify("op", "k", FredError::new(kind.clone(), details));
        assert_eq!(variant(&got), want, "{kind:?} {details:?}: {got}");
    }
}

#[test]
fn every_reply_code() {
    use Want::*;
    // Kinds as fred's reply parser assigns them (`pretty_error`): Unknown, except WRONGTYPE
    // (InvalidArgument), NOAUTH/WRONGPASS (Auth), MOVED/ASK/CLUSTERDOWN (Cluster).
    let table = [
        (
            ErrorKind::Unknown,
            "LOADING Redis is loading the dataset in memory",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "TRYAGAIN Multiple keys request during rehashing of slot",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            Unavailable,
        ),
        (
            ErrorKind::Cluster,
            "CLUSTERDOWN The cluster is down",
            Unavailable,
        ),
        (ErrorKind::Cluster, "MOVED 3999 127.0.0.1:6381", Unavailable),
        (ErrorKind::Cluster, "ASK 3999 127.0.0.1:6381", Unavailable),
        (
            ErrorKind::Unknown,
            "READONLY You can't write against a read only replica.",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "OOM command not allowed when used memory > 'maxmemory'.",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "NOREPLICAS Not enough good replicas to write.",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            Unavailable,
        ),
        (
            ErrorKind::Unknown,
            "NOSCRIPT No matching script. Please use EVAL.",
            Unavailable,
        ),
        (
            ErrorKind::Auth,
            "WRONGPASS invalid username-password pair or user is disabled.",
            Config,
        ),
        (ErrorKind::Auth, "NOAUTH Authentication required.", Config),
        (
            ErrorKind::Unknown,
            "NOPERM User alice has no permissions to run the 'eval' command",
            Config,
        ),
        (
            ErrorKind::Config,
            "ERR This instance has cluster support disabled",
            Config,
        ),
        // Connection loss: fred's own messages, not replies.
        (ErrorKind::Unknown, "Failed to route command.", Unavailable),
        (ErrorKind::IO, "Broken pipe (os error 32)", Unavailable),
        (ErrorKind::Unknown, "No response!", Unavailable),
        // Refused commands: the same call fails the same way.
        (
            ErrorKind::Unknown,
            "CROSSSLOT Keys in request don't hash to the same slot",
            Rejected,
        ),
        (
            ErrorKind::InvalidArgument,
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "ERR user_script:51: Script attempted to access nonexistent global variable 'x' script: 4f2a…, on @user_script:51.",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "ERR Error running script (call to f_4f2a…): @user_script:51: user_script:51: bad argument",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 4f2a…, on @user_script:12.",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "EXECABORT Transaction discarded because of previous errors.",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "BUSYKEY Target key name already exists.",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "BUSYGROUP Consumer Group name already exists",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "ERR wrong number of arguments for 'xadd' command",
            Rejected,
        ),
        (
            ErrorKind::Unknown,
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            Rejected,
        ),
    ];
    for (kind, details, want) in table {
        let got = classify("op", "k", FredError::new(kind.clone(), details));
        assert_eq!(variant(&got), want, "{kind:?} {details:?}: {got}");
    }
}

#[test]
fn messages_say_what_to_do() {
    let auth = classify(
        "append",
        "p:log",
        FredError::new(ErrorKind::Auth, "WRONGPASS invalid username-password pair"),
    );
    match auth {
        Error::Config { key, reason } => {
            assert_eq!(key, URL_SETTING);
            assert!(reason.contains("user and password"), "{reason}");
            assert!(reason.contains("append on `p:log`"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let oom = classify(
        "publish",
        "s:r",
        FredError::new(ErrorKind::Unknown, "OOM command not allowed"),
    );
    assert!(oom.is_transient());
    let text = oom.to_string();
    assert!(
        text.contains("maxmemory") && text.contains("retry later"),
        "{text}"
    );
    let wrong = classify(
        "append",
        "k",
        FredError::new(
            ErrorKind::InvalidArgument,
            "WRONGTYPE Operation against a key",
        ),
    );
    assert!(wrong.to_string().contains("own prefix"), "{wrong}");
    let cluster = classify(
        "connect",
        "pool",
        FredError::new(
            ErrorKind::Config,
            "ERR This instance has cluster support disabled",
        ),
    );
    assert!(cluster.to_string().contains("redis://"), "{cluster}");
}

#[test]
fn reply_codes_are_whole_upper_case_words() {
    assert_eq!(reply_code("OOM command not allowed"), Some("OOM"));
    assert_eq!(reply_code("BUSYKEY Target"), Some("BUSYKEY"));
    assert_eq!(reply_code("Failed to route command."), None);
    assert_eq!(reply_code("A lone letter"), None);
    assert_eq!(reply_code(""), None);
    assert!(is_noscript(&FredError::new(
        ErrorKind::Unknown,
        "NOSCRIPT No matching script."
    )));
    assert!(!is_noscript(&FredError::new(
        ErrorKind::Unknown,
        "NOSCRIPTS x"
    )));
}
