//! Who is writing: the run context, and what claims return.

use crate::Error;
use crate::event::Event;
use crate::status::RunStatus;

/// The run a call acts for. Stores fill the event envelope from it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunContext {
    run_id: String,
    session_id: Option<String>,
    namespace: Option<String>,
}

impl RunContext {
    /// A context for `run_id`, with no session and no namespace.
    pub fn new(run_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            session_id: None,
            namespace: None,
        }
    }

    /// Sets the session.
    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Sets the namespace. An empty namespace is refused: stores encode "no namespace" as `""`.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Result<Self, Error> {
        let namespace = namespace.into();
        if namespace.is_empty() {
            return Err(Error::invalid(
                "namespace",
                "must not be empty; use no namespace instead",
            ));
        }
        self.namespace = Some(namespace);
        Ok(self)
    }

    /// The same context for another run of the same session and namespace.
    pub fn for_run(&self, run_id: impl Into<String>, session_id: Option<String>) -> Self {
        Self {
            run_id: run_id.into(),
            session_id,
            namespace: self.namespace.clone(),
        }
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The session, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The namespace, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// What stores key by: the namespace, or `""`.
    pub fn namespace_key(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }

    /// The log a run writes to: its session, or the run itself when it has none.
    pub fn log_key(&self) -> &str {
        self.session_id.as_deref().unwrap_or(&self.run_id)
    }
}

/// What a `claim_start` found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionClaim {
    /// The open run that refused the claim; `None` when the claim won.
    pub held_by: Option<String>,
    /// The last event of each stale open run the winning claim stepped over, by run id. The store
    /// wrote nothing for them: closing them is the caller's job.
    pub overridden: Vec<Event>,
}

impl SessionClaim {
    /// True when the claim won.
    pub fn won(&self) -> bool {
        self.held_by.is_none()
    }
}

/// One run as `list_runs` sees it: a projection, never a stored row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunSummary {
    /// The log it lives in.
    pub log_key: String,
    /// The run.
    pub run_id: String,
    /// Folded from its latest lifecycle event.
    pub status: RunStatus,
}

impl RunSummary {
    /// The run's session: its log key when that is not the run id (a run without a session is
    /// its own log, [`RunContext::log_key`]).
    pub fn session_id(&self) -> Option<&str> {
        (self.log_key != self.run_id).then_some(self.log_key.as_str())
    }

    /// The context that addresses this run, in the namespace of `within` (the context
    /// `list_runs` was called with).
    pub fn context(&self, within: &RunContext) -> RunContext {
        within.for_run(self.run_id.clone(), self.session_id().map(str::to_owned))
    }
}
