//! Fenced locks of [`MemoryFleetBackend`]: [`Locks`] (guarantee `lock.fenced`).

use super::*;

#[async_trait]
impl LockOps for MemoryFleetBackend {
    async fn lock_try_acquire(&self, name: &str, hold_ms: u64) -> Result<Option<LockGrant>> {
        let now = self.now();
        let mut st = self.state();
        if st.locks.get(name).is_some_and(|(_, until)| *until > now) {
            return Ok(None);
        }
        let token = random_token();
        st.locks
            .insert(name.to_string(), (token.clone(), now + secs(hold_ms)));
        let fence = st.fences.entry(name.to_string()).or_default();
        *fence += 1;
        Ok(Some(LockGrant {
            token,
            fence: *fence,
        }))
    }

    async fn lock_release(&self, name: &str, token: &str) -> Result<bool> {
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

    async fn lock_extend(&self, name: &str, token: &str, hold_ms: u64) -> Result<bool> {
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
