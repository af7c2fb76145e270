//! [`CancelToken`]: how a consumer tells a running handler to stop (ADR 0380, section 8).

use std::sync::Arc;

use tokio::sync::watch;

/// Why a task's [`CancelToken`] fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The task was cancelled (`Queue::cancel`, the HTTP cancel, …): stop; it is never retried.
    Cancelled,
    /// The attempt ran past its timeout: stop; it counts as a failed attempt.
    TimedOut,
    /// The consumer is shutting down: stop if you can; an unfinished task is given back.
    Shutdown,
}

/// Fires once when a handler should stop; cheap to clone (clones share the one state). The
/// first reason wins. A token of a task reserved by hand (not by a
/// [`Consumer`](crate::Consumer)) fires only on a `Cancelled` answer of
/// [`Task::report_progress`](crate::Task::report_progress).
///
/// ```
/// # async fn handler(task: switchyard_fleet::Task<u32>) {
/// tokio::select! {
///     _ = task.cancel.cancelled() => { /* stop, clean up */ }
///     _ = async { /* the work */ } => {}
/// }
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    state: Arc<watch::Sender<Option<CancelReason>>>,
}

impl CancelToken {
    /// Whether it fired.
    pub fn is_cancelled(&self) -> bool {
        self.state.borrow().is_some()
    }

    /// Why it fired, if it did.
    pub fn reason(&self) -> Option<CancelReason> {
        *self.state.borrow()
    }

    /// Waits until it fires; returns why.
    pub async fn cancelled(&self) -> CancelReason {
        let mut rx = self.state.subscribe();
        // The sender lives as long as `self`, so the wait ends only by firing.
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(r) => *r,
            Err(_) => None,
        };
        match reason {
            Some(r) => r,
            None => std::future::pending().await,
        }
    }

    /// Fires with `reason` unless it already fired; whether this call fired it.
    pub(crate) fn fire(&self, reason: CancelReason) -> bool {
        self.state.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_once_with_the_first_reason() {
        let t = CancelToken::default();
        assert!(!t.is_cancelled());
        let waiter = tokio::spawn({
            let t = t.clone();
            async move { t.cancelled().await }
        });
        assert!(t.fire(CancelReason::TimedOut));
        assert!(!t.fire(CancelReason::Cancelled));
        assert_eq!(waiter.await.expect("joins"), CancelReason::TimedOut);
        assert_eq!(t.reason(), Some(CancelReason::TimedOut));
        assert_eq!(t.cancelled().await, CancelReason::TimedOut);
    }
}
