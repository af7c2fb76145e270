//! Guarantee `streams.sorted`: sorted, trimmed, deduplicated streams.

use std::time::Duration;

use crate::fleet::Backend;
use crate::harness::unique_id;

/// Guarantee `streams.sorted`: entries come in score order; push trims by age and `max_len`; an
/// identical envelope is stored once, at its new score; `n = 0` reads nothing; push publishes the
/// score on `{name}.emit`.
pub async fn stream(b: Backend) {
    use futures::StreamExt;
    let s = unique_id("s");
    let mut emits = b
        .event_subscribe(&format!("{s}.emit"))
        .await
        .expect("subscribe");
    b.stream_push(&s, b"e3", 3.0, 0, None).await.expect("push");
    b.stream_push(&s, b"e1", 1.0, 0, None).await.expect("push");
    b.stream_push(&s, b"e2", 2.5, 0, None).await.expect("push");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e1".to_vec(), b"e2".to_vec(), b"e3".to_vec()]
    );
    assert_eq!(
        b.stream_peek(&s, 0).await.expect("peek"),
        Vec::<Vec<u8>>::new()
    );
    b.stream_push(&s, b"e1", 4.0, 0, None)
        .await
        .expect("push identical");
    assert_eq!(
        b.stream_length(&s).await.expect("len"),
        3,
        "identical envelope stored once"
    );
    assert_eq!(
        b.stream_peek(&s, 1).await.expect("peek"),
        vec![b"e2".to_vec()]
    );
    b.stream_push(&s, b"e5", 5.0, 3, None)
        .await
        .expect("push capped");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e3".to_vec(), b"e1".to_vec(), b"e5".to_vec()]
    );
    b.stream_push(&s, b"e9", 9.0, 0, Some(Duration::from_secs(5)))
        .await
        .expect("push ttl");
    assert_eq!(
        b.stream_peek(&s, 10).await.expect("peek"),
        vec![b"e1".to_vec(), b"e5".to_vec(), b"e9".to_vec()],
        "entries scored before 9 - 5 are dropped"
    );
    assert_eq!(
        b.stream_pop(&s, 0).await.expect("pop"),
        Vec::<Vec<u8>>::new()
    );
    assert_eq!(
        b.stream_pop(&s, 2).await.expect("pop"),
        vec![b"e1".to_vec(), b"e5".to_vec()]
    );
    b.stream_trim(&s, 0, Some(Duration::from_secs(60)))
        .await
        .expect("trim");
    assert_eq!(
        b.stream_length(&s).await.expect("len"),
        0,
        "score 9 is long before now - 60 s"
    );

    let mut got = Vec::new();
    for _ in 0..6 {
        let m = tokio::time::timeout(Duration::from_secs(5), emits.next())
            .await
            .expect("emit within 5 s")
            .expect("stream open");
        got.push(String::from_utf8(m).expect("utf8"));
    }
    assert_eq!(
        got,
        ["3.0", "1.0", "2.5", "4.0", "5.0", "9.0"],
        "push publishes its score"
    );
}
