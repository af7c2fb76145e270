//! Constructors for the payloads a runtime writes, so a caller names what happened and the
//! model's rules (preview length, hash format) are met by construction.

use sha2::{Digest, Sha256};

use super::lax::JsonObject;
use super::payload::{
    Custom, ErrorCode, Input, InterruptReason, InvocableKind, MAX_RESULT_PREVIEW_CHARS,
    MessageText, Payload, ProgressReported, RunCancelled, RunCompleted, RunFailed, RunInterrupted,
    RunPaused, RunResumed, RunStarted, StatusReported, ToolCallCompleted, ToolCallStarted, Usage,
    UsageReported,
};

impl RunStarted {
    /// `run.started` for `invocable` of `kind` with its input.
    pub fn new(invocable: impl Into<String>, kind: InvocableKind, input: Input) -> Self {
        RunStarted {
            invocable: invocable.into(),
            kind_of_invocable: kind,
            input,
        }
    }
}

impl RunResumed {
    /// `run.resumed` with a reason and no value.
    pub fn new(reason: impl Into<String>) -> Self {
        RunResumed {
            reason: Some(reason.into()),
            value: None,
        }
    }

    /// The same, carrying the human's answer.
    pub fn with_value(self, value: Input) -> Self {
        RunResumed {
            value: Some(value),
            ..self
        }
    }
}

impl Usage {
    /// Token counts without a cost.
    pub fn tokens(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            usd: None,
        }
    }
}

impl ToolCallCompleted {
    /// `tool.call.completed` for a tool's full `result`: the preview is its first 4096
    /// characters, the size its length in bytes (UTF-8), the hash its SHA-256 in lowercase hex.
    pub fn from_result(call_id: impl Into<String>, tool: impl Into<String>, result: &str) -> Self {
        let preview = match result.char_indices().nth(MAX_RESULT_PREVIEW_CHARS) {
            Some((cut, _)) => &result[..cut],
            None => result,
        };
        ToolCallCompleted {
            call_id: call_id.into(),
            tool: tool.into(),
            result_preview: preview.to_string(),
            result_size: u64::try_from(result.len()).unwrap_or(u64::MAX),
            result_sha256: hex::encode(Sha256::digest(result.as_bytes())),
            artifact_id: None,
            error: None,
        }
    }

    /// The same, noting where the full result was stored.
    pub fn with_artifact(self, artifact_id: impl Into<String>) -> Self {
        ToolCallCompleted {
            artifact_id: Some(artifact_id.into()),
            ..self
        }
    }

    /// The same, noting the tool's error.
    pub fn with_error(self, error: impl Into<String>) -> Self {
        ToolCallCompleted {
            error: Some(error.into()),
            ..self
        }
    }
}

fn text(message_id: impl Into<String>, text: impl Into<String>) -> MessageText {
    MessageText {
        message_id: message_id.into(),
        text: text.into(),
    }
}

impl Payload {
    /// `run.started`.
    pub fn started(invocable: impl Into<String>, kind: InvocableKind, input: Input) -> Self {
        Payload::RunStarted(RunStarted::new(invocable, kind, input))
    }

    /// `run.completed`.
    pub fn completed(output: Input, usage: Usage) -> Self {
        Payload::RunCompleted(RunCompleted { output, usage })
    }

    /// `run.failed`.
    pub fn failed(code: ErrorCode, message: impl Into<String>, retryable: bool) -> Self {
        Payload::RunFailed(RunFailed {
            error_code: code,
            message: message.into(),
            retryable,
        })
    }

    /// `run.paused`.
    pub fn paused(reason: Option<String>) -> Self {
        Payload::RunPaused(RunPaused { reason })
    }

    /// `run.cancelled`.
    pub fn cancelled(reason: Option<String>) -> Self {
        Payload::RunCancelled(RunCancelled { reason })
    }

    /// `run.resumed` (see [`RunResumed::new`] for the typed value `claim_resume` takes).
    pub fn resumed(resumed: RunResumed) -> Self {
        Payload::RunResumed(resumed)
    }

    /// `run.interrupted` with an empty payload and no thread or expected resume (set those
    /// fields on a [`RunInterrupted`] for more).
    pub fn interrupted(interrupt_id: impl Into<String>, reason: InterruptReason) -> Self {
        Payload::RunInterrupted(RunInterrupted {
            interrupt_id: interrupt_id.into(),
            reason,
            payload: JsonObject::new(),
            thread_id: None,
            expected_resume: None,
        })
    }

    /// `text.delta`.
    pub fn text_delta(message_id: impl Into<String>, delta: impl Into<String>) -> Self {
        Payload::TextDelta(text(message_id, delta))
    }

    /// `thought.delta`.
    pub fn thought_delta(message_id: impl Into<String>, delta: impl Into<String>) -> Self {
        Payload::ThoughtDelta(text(message_id, delta))
    }

    /// `message.completed`.
    pub fn message_completed(message_id: impl Into<String>, full: impl Into<String>) -> Self {
        Payload::MessageCompleted(text(message_id, full))
    }

    /// `tool.call.started`.
    pub fn tool_call_started(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        args: JsonObject,
    ) -> Self {
        Payload::ToolCallStarted(ToolCallStarted {
            call_id: call_id.into(),
            tool: tool.into(),
            args,
        })
    }

    /// `tool.call.completed` from the full result; see [`ToolCallCompleted::from_result`].
    pub fn tool_call_completed_from(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        result: &str,
    ) -> Self {
        Payload::ToolCallCompleted(ToolCallCompleted::from_result(call_id, tool, result))
    }

    /// `usage.reported`.
    pub fn usage_reported(model: impl Into<String>, usage: Usage) -> Self {
        Payload::UsageReported(UsageReported {
            model: model.into(),
            usage,
        })
    }

    /// `status.reported` (the message must not be empty).
    pub fn status(message: impl Into<String>) -> Self {
        Payload::StatusReported(StatusReported {
            message: message.into(),
        })
    }

    /// `progress.reported`.
    pub fn progress(step: impl Into<String>, current: Option<u64>, total: Option<u64>) -> Self {
        Payload::ProgressReported(ProgressReported {
            step: step.into(),
            current,
            total,
        })
    }

    /// `custom` (the name must look like `vendor.thing`).
    pub fn custom(name: impl Into<String>, data: JsonObject) -> Self {
        Payload::Custom(Custom {
            name: name.into(),
            data,
        })
    }
}
