//! Fenced locks of [`RedisFleetBackend`]: [`Locks`] (guarantee `lock.fenced`), on the seed's keys.

use super::*;

#[async_trait]
impl LockOps for RedisFleetBackend {
    async fn lock_try_acquire(&self, name: &str, hold_ms: u64) -> Result<Option<LockGrant>> {
        let k = self.inner.keys.lock(name);
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
        // The script answers 0 when the lock is held, else the new fence (at least 1).
        Ok(u64::try_from(fence)
            .ok()
            .filter(|f| *f > 0)
            .map(|fence| LockGrant { token, fence }))
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
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

    async fn lock_extend(&self, name: &str, token: &str, hold_ms: u64) -> Result<bool> {
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
