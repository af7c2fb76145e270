//! Fenced locks of [`RedisFleetBackend`]: [`Locks`] (guarantee `lock.fenced`), on the seed's keys.

use super::*;

#[async_trait]
impl Locks for RedisFleetBackend {
    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let k = self.inner.keys.lock(name);
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            let token = random_token();
            let fence = self
                .eval_i64(
                    "lock_acquire",
                    &k,
                    &self.inner.scripts.lock_acquire,
                    vec![k.clone(), self.inner.keys.lock_fence(name)],
                    vec![text(token.clone()), ms_arg(hold_ms)],
                )
                .await?;
            if fence > 0 {
                return Ok(Some(LockGrant {
                    token,
                    fence: fence as u64,
                }));
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            tokio::time::sleep(backoff.min(left)).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
        check_name("lock", name)?;
        let k = self.inner.keys.lock(name);
        let n = self
            .eval_i64(
                "lock_release",
                &k,
                &self.inner.scripts.lock_release,
                vec![k.clone()],
                vec![text(token)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let k = self.inner.keys.lock(name);
        let n = self
            .eval_i64(
                "lock_extend",
                &k,
                &self.inner.scripts.lock_extend,
                vec![k.clone()],
                vec![text(token), ms_arg(hold_ms)],
            )
            .await?;
        Ok(n == 1)
    }
}
