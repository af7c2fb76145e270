//! Sorted streams of [`MemoryFleetBackend`]: [`Streams`] (guarantee `streams.sorted`).

use super::*;

#[async_trait]
impl StreamOps for MemoryFleetBackend {
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        {
            let mut st = self.state();
            let s = st.streams.entry(name.to_string()).or_default();
            s.retain(|(_, e)| e != envelope);
            let pos = s.partition_point(|(sc, e)| (*sc, e.as_slice()) < (score, envelope));
            s.insert(pos, (score, envelope.to_vec()));
            trim(s, max_len, ttl_ms(ttl).map(|ms| score - secs(ms)));
        }
        self.publish(
            &format!("{name}.emit"),
            crate::pycompat::float_repr(score).into_bytes(),
        );
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let mut st = self.state();
        Ok(st.streams.get_mut(name).map_or_else(Vec::new, |s| {
            let k = n.min(s.len());
            s.drain(..k).map(|(_, e)| e).collect()
        }))
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let st = self.state();
        Ok(st.streams.get(name).map_or_else(Vec::new, |s| {
            s.iter().take(n).map(|(_, e)| e.clone()).collect()
        }))
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        Ok(self.state().streams.get(name).map_or(0, |s| s.len() as u64))
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        let now = self.now();
        let mut st = self.state();
        if let Some(s) = st.streams.get_mut(name) {
            trim(s, max_len, ttl_ms(ttl).map(|ms| now - secs(ms)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    /// `.emit` carries the score as Python's `repr` writes it (`1e-05`, not Rust's `1e-5`), the
    /// bytes the Redis and SQLite adapters publish too.
    #[tokio::test]
    async fn emit_spells_the_score_as_python_does() {
        let b = MemoryFleetBackend::new();
        let mut emits = b.event_subscribe("s.emit").await.expect("subscribe");
        for score in [1e-5, 1e16, 2.0] {
            b.stream_push("s", b"e", score, 0, None)
                .await
                .expect("push");
        }
        let mut got = Vec::new();
        for _ in 0..3 {
            let m = emits.next().await.expect("stream open");
            got.push(String::from_utf8(m).expect("utf8"));
        }
        assert_eq!(got, ["1e-05", "1e+16", "2.0"]);
    }
}
