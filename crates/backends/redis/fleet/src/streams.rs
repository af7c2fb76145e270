//! Sorted streams of [`RedisFleetBackend`]: [`Streams`] (guarantee `streams.sorted`), on the seed's
//! keys.

use super::*;

#[async_trait]
impl StreamOps for RedisFleetBackend {
    async fn stream_push(
        &self,
        name: &str,
        envelope: &[u8],
        score: f64,
        max_len: u64,
        ttl: Option<Duration>,
    ) -> Result<()> {
        let k = self.inner.keys.stream(name);
        self.eval(
            "stream_push",
            &k,
            &self.inner.scripts.stream_push,
            vec![k.clone()],
            vec![
                bin(envelope),
                text(float_repr(score)),
                int(max_len),
                ms_arg(ttl_ms(ttl).unwrap_or(0)),
                text(self.inner.keys.channel(&format!("{name}.emit"))),
            ],
        )
        .await?;
        Ok(())
    }

    async fn stream_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.stream(name);
        let r: RValue = self
            .command("stream_pop", &k, self.client().zpopmin(&k, Some(n)))
            .await?;
        // ZPOPMIN replies member, score, member, score… (RESP2).
        Ok(flatten_pairs(r)
            .into_iter()
            .step_by(2)
            .filter_map(to_bytes)
            .collect())
    }

    async fn stream_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let k = self.inner.keys.stream(name);
        let r: Vec<RValue> = self
            .command(
                "stream_peek",
                &k,
                self.client()
                    .zrange(&k, 0, n as i64 - 1, None, false, None, false),
            )
            .await?;
        Ok(r.into_iter().filter_map(to_bytes).collect())
    }

    async fn stream_length(&self, name: &str) -> Result<u64> {
        let k = self.inner.keys.stream(name);
        let n: i64 = self
            .command("stream_length", &k, self.client().zcard(&k))
            .await?;
        Ok(n.max(0) as u64)
    }

    async fn stream_trim(&self, name: &str, max_len: u64, ttl: Option<Duration>) -> Result<()> {
        let k = self.inner.keys.stream(name);
        self.eval(
            "stream_trim",
            &k,
            &self.inner.scripts.stream_trim,
            vec![k.clone()],
            vec![int(max_len), ms_arg(ttl_ms(ttl).unwrap_or(0))],
        )
        .await?;
        Ok(())
    }
}
