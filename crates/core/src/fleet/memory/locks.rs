//! Fenced locks of [`MemoryFleetBackend`]: [`Locks`] (guarantee `lock.fenced`).

use super::*;

#[async_trait]
impl Locks for MemoryFleetBackend {
    async fn lock_acquire(
        &self,
        name: &str,
        hold: Duration,
        wait: Duration,
    ) -> Result<Option<LockGrant>> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut backoff = Duration::from_millis(50);
        loop {
            {
                let now = self.now();
                let mut st = self.state();
                let free = st.locks.get(name).is_none_or(|(_, until)| *until <= now);
                if free {
                    let token = random_token();
                    st.locks
                        .insert(name.to_string(), (token.clone(), now + secs(hold_ms)));
                    let fence = st.fences.entry(name.to_string()).or_default();
                    *fence += 1;
                    return Ok(Some(LockGrant {
                        token,
                        fence: *fence,
                    }));
                }
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
        let now = self.now();
        let mut st = self.state();
        match st.locks.get(name) {
            Some((t, until)) if t == token && *until > now => {
                st.locks.remove(name);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn lock_extend(&self, name: &str, token: &str, hold: Duration) -> Result<bool> {
        check_name("lock", name)?;
        let hold_ms = check_hold("hold", hold)?;
        let now = self.now();
        let mut st = self.state();
        match st.locks.get_mut(name) {
            Some((t, until)) if t == token && *until > now => {
                *until = now + secs(hold_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
