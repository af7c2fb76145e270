//! What a handler returns: nothing or a result to store ([`TaskOutput`]), and errors that must
//! not be retried ([`Permanent`]).

use std::fmt;

use serde::Serialize;

use super::HandlerError;

/// A handler error that must not be retried: the consumer dead-letters the task at once, with
/// this error's message as its `last_error` (ADR 0380, section 8).
///
/// ```
/// use switchyard_fleet::{HandlerError, Permanent};
/// fn check(width: u32) -> Result<(), HandlerError> {
///     if width == 0 {
///         return Err(Permanent::new("width must be positive").into());
///     }
///     Ok(())
/// }
/// assert!(check(0).unwrap_err().downcast_ref::<Permanent>().is_some());
/// ```
#[derive(Debug)]
pub struct Permanent(pub HandlerError);

impl Permanent {
    /// Wraps `error` (anything a handler may return: a message, an error value).
    pub fn new(error: impl Into<HandlerError>) -> Self {
        Permanent(error.into())
    }
}

impl fmt::Display for Permanent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for Permanent {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A handler's result to store with the task's end (as JSON, through `queue_complete`), read
/// back with [`Queue::result`](crate::Queue::result) or [`Queue::wait`](crate::Queue::wait).
/// A handler returning `Ok(Output(r))` instead of `Ok(())` stores `r`.
#[derive(Debug, Clone, PartialEq)]
pub struct Output<R>(pub R);

/// What a handler may return on success: `()` (nothing stored) or [`Output<R>`] (`R` stored
/// as JSON).
pub trait TaskOutput: Send + 'static {
    /// The result's JSON, or `None` to store nothing. An error here dead-letters the task (a
    /// retry would not fix it).
    fn into_result(self) -> Result<Option<Vec<u8>>, HandlerError>;
}

impl TaskOutput for () {
    fn into_result(self) -> Result<Option<Vec<u8>>, HandlerError> {
        Ok(None)
    }
}

impl<R: Serialize + Send + 'static> TaskOutput for Output<R> {
    fn into_result(self) -> Result<Option<Vec<u8>>, HandlerError> {
        serde_json::to_vec(&self.0)
            .map(Some)
            .map_err(|e| format!("the result does not serialize as JSON: {e}").into())
    }
}

/// Whether a handler's error is [`Permanent`] (looked for through a chain of sources too).
pub(super) fn is_permanent(e: &HandlerError) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(&**e);
    while let Some(err) = cur {
        if err.is::<Permanent>() {
            return true;
        }
        cur = err.source();
    }
    false
}
