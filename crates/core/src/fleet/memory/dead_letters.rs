//! Dead letters of [`MemoryFleetBackend`]: [`DeadLetters`] (guarantees `dlq.fifo_atomic` and
//! `dlq.requeue_chosen`).

use super::*;

#[async_trait]
impl DeadLetterOps for MemoryFleetBackend {
    async fn dlq_peek(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let st = self.state();
        Ok(st
            .queues
            .get(name)
            .map_or_else(Vec::new, |q| q.dead.iter().take(n).cloned().collect()))
    }

    async fn dlq_pop(&self, name: &str, n: usize) -> Result<Vec<Vec<u8>>> {
        let now = self.now();
        let popped: Vec<Vec<u8>> = {
            let mut st = self.state();
            st.queues.get_mut(name).map_or_else(Vec::new, |q| {
                let k = n.min(q.dead.len());
                let popped: Vec<Vec<u8>> = q.dead.drain(..k).collect();
                // A popped letter's task ends `failed` (ADR 0380).
                for body in &popped {
                    q.tasks.letter_left(body, None, now);
                }
                popped
            })
        };
        if !popped.is_empty() {
            self.announce_ends();
        }
        Ok(popped)
    }

    async fn dlq_length(&self, name: &str) -> Result<u64> {
        Ok(self
            .state()
            .queues
            .get(name)
            .map_or(0, |q| q.dead.len() as u64))
    }

    async fn dlq_clear(&self, name: &str) -> Result<u64> {
        let now = self.now();
        let n = {
            let mut st = self.state();
            st.queues.get_mut(name).map_or(0, |q| {
                let n = q.dead.len() as u64;
                for body in std::mem::take(&mut q.dead) {
                    q.tasks.letter_left(&body, None, now);
                }
                n
            })
        };
        if n > 0 {
            self.announce_ends();
        }
        Ok(n)
    }

    async fn dlq_requeue_chosen(
        &self,
        name: &str,
        bodies: &[Vec<u8>],
        priority: Priority,
    ) -> Result<Vec<bool>> {
        let now = self.now();
        let answers: Vec<bool> = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(vec![false; bodies.len()]);
            };
            bodies
                .iter()
                .map(|body| {
                    // The oldest letter with these bytes; removing it keeps the others' order.
                    let Some(at) = q.dead.iter().position(|d| d == body) else {
                        return false;
                    };
                    if let Some(body) = q.dead.remove(at) {
                        let id = q.tasks.letter_left(&body, Some(priority), now);
                        q.tiers[tier(priority)].push_back(Entry::new(body, priority, id));
                    }
                    true
                })
                .collect()
        };
        if answers.contains(&true) {
            self.shared.pushed.notify_waiters();
        }
        Ok(answers)
    }

    async fn dlq_requeue(&self, name: &str, n: usize, priority: Priority) -> Result<u64> {
        let now = self.now();
        let moved = {
            let mut st = self.state();
            let Some(q) = st.queues.get_mut(name) else {
                return Ok(0);
            };
            let k = n.min(q.dead.len());
            let bodies: Vec<Vec<u8>> = q.dead.drain(..k).collect();
            for body in bodies {
                let id = q.tasks.letter_left(&body, Some(priority), now);
                q.tiers[tier(priority)].push_back(Entry::new(body, priority, id));
            }
            k as u64
        };
        if moved > 0 {
            self.shared.pushed.notify_waiters();
        }
        Ok(moved)
    }
}
