//! The 21 payload kinds of agentdeck-sdk 3.1.0, and unknown kinds.
//!
//! Struct fields are declared in the seed's order, which is also the JSON order; optional fields are
//! serialized as `null`, never left out.

use serde::Serialize;
use serde_json::Value;

use super::content::Block;
use super::lax::{Fields, JsonObject, check_finite};
use crate::Error;

/// A list of content blocks.
pub type Input = Vec<Block>;

macro_rules! literal_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum $name {
            $($(#[$vmeta])* #[doc = concat!("`\"", $text, "\"` on the wire.")] #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire string.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            fn parse(fields: &Fields<'_>, key: &str) -> Result<Self, Error> {
                let text = fields.string(key)?;
                match text.as_str() {
                    $($text => Ok($name::$variant),)+
                    other => Err(Error::invalid(
                        fields.path(key),
                        format!("must be one of {:?}, got {other:?}", [$($text),+]),
                    )),
                }
            }
        }

        // By hand rather than derived: the derive does not see the wire names through the
        // macro's `$text` (it would document the variant names).
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }
    };
}

literal_enum!(
    /// What kind of invocable a run started.
    InvocableKind { Agent = "agent", Workflow = "workflow", Skill = "skill" }
);
literal_enum!(
    /// Why a run failed.
    ErrorCode {
        EngineError = "engine_error",
        ToolError = "tool_error",
        BudgetExceeded = "budget_exceeded",
        Deadline = "deadline",
        CancelledHard = "cancelled_hard",
    }
);
literal_enum!(
    /// Why a run was interrupted.
    InterruptReason { Human = "human", Pause = "pause", Approval = "approval" }
);
literal_enum!(
    /// A control verb.
    ControlVerb { Cancel = "cancel", Pause = "pause", Resume = "resume", Steer = "steer" }
);
literal_enum!(
    /// Where a control request was observed.
    SafePoint {
        StreamItem = "stream_item",
        ToolDispatch = "tool_dispatch",
        NodeBoundary = "node_boundary",
    }
);

/// Token and cost accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars; finite and >= 0 when present.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub usd: Option<f64>,
}

/// `run.started`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunStarted {
    /// The invocable's name.
    pub invocable: String,
    /// Its kind.
    pub kind_of_invocable: InvocableKind,
    /// The input.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Block>))]
    pub input: Input,
}

/// `run.completed`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCompleted {
    /// The output.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Block>))]
    pub output: Input,
    /// Total usage.
    pub usage: Usage,
}

/// `run.failed`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunFailed {
    /// Why.
    pub error_code: ErrorCode,
    /// Human-readable message.
    pub message: String,
    /// Whether a retry may succeed.
    pub retryable: bool,
}

/// `run.paused`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunPaused {
    /// Why.
    pub reason: Option<String>,
}

/// `run.resumed`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunResumed {
    /// Why.
    pub reason: Option<String>,
    /// The answer, stored in full.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<Block>>))]
    pub value: Option<Input>,
}

/// `run.cancelled`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCancelled {
    /// Why.
    pub reason: Option<String>,
}

/// `run.interrupted`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunInterrupted {
    /// Identifies the interrupt.
    pub interrupt_id: String,
    /// Why.
    pub reason: InterruptReason,
    /// Free-form details.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: JsonObject,
    /// The engine's thread, if any.
    pub thread_id: Option<String>,
    /// What the resume should carry.
    pub expected_resume: Option<String>,
}

/// `control.requested`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ControlRequested {
    /// The verb.
    pub verb: ControlVerb,
    /// Why.
    pub reason: Option<String>,
}

/// `control.observed`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ControlObserved {
    /// The verb.
    pub verb: ControlVerb,
    /// Where it was observed.
    pub safe_point: SafePoint,
}

/// `text.delta`, `thought.delta` and `message.completed` share this shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageText {
    /// The message.
    pub message_id: String,
    /// The text.
    pub text: String,
}

/// `tool.call.started`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallStarted {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub args: JsonObject,
}

/// Longest `result_preview` of `tool.call.completed`, in characters.
pub const MAX_RESULT_PREVIEW_CHARS: usize = 4096;

/// `tool.call.completed`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallCompleted {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// At most 4096 characters of the result.
    #[cfg_attr(feature = "openapi", schema(max_length = 4096))]
    pub result_preview: String,
    /// Size of the full result.
    pub result_size: u64,
    /// SHA-256 of the full result, 64 lowercase hex characters.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub result_sha256: String,
    /// Where the full result was stored.
    pub artifact_id: Option<String>,
    /// The tool's error, if it failed.
    pub error: Option<String>,
}

/// `node.updated`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeUpdated {
    /// The node.
    pub node: String,
    /// What changed.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub state_patch: JsonObject,
}

/// `artifact.created`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArtifactCreated {
    /// The artifact.
    pub artifact_id: String,
    /// MIME type.
    pub media_type: String,
    /// Where it lives.
    pub uri: String,
    /// Its size.
    pub size: u64,
}

/// `usage.reported`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UsageReported {
    /// The model.
    pub model: String,
    /// The usage.
    pub usage: Usage,
}

/// `input.appended`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InputAppended {
    /// The input.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Block>))]
    pub input: Input,
    /// Who added it.
    pub source: String,
}

/// `status.reported`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusReported {
    /// At least one character.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub message: String,
}

/// `progress.reported`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProgressReported {
    /// At least one character.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub step: String,
    /// Progress so far; at most `total` when both are present.
    pub current: Option<u64>,
    /// Greater than 0 when present.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub total: Option<u64>,
}

/// `custom`
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Custom {
    /// Matches `^[^.]+\..+$`, e.g. `acme.thing`.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[^.]+\..+$"))]
    pub name: String,
    /// The data.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: JsonObject,
}

/// A payload of a kind this version does not know, kept as `{kind, raw_payload}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UnknownPayload {
    /// The envelope's kind.
    pub kind: String,
    /// The payload object as it was read.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub raw_payload: JsonObject,
}

/// An event payload, tagged by `kind` in JSON (always its first key).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind")]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum Payload {
    #[serde(rename = "run.started")]
    RunStarted(RunStarted),
    #[serde(rename = "run.completed")]
    RunCompleted(RunCompleted),
    #[serde(rename = "run.failed")]
    RunFailed(RunFailed),
    #[serde(rename = "run.paused")]
    RunPaused(RunPaused),
    #[serde(rename = "run.resumed")]
    RunResumed(RunResumed),
    #[serde(rename = "run.cancelled")]
    RunCancelled(RunCancelled),
    #[serde(rename = "run.interrupted")]
    RunInterrupted(RunInterrupted),
    #[serde(rename = "control.requested")]
    ControlRequested(ControlRequested),
    #[serde(rename = "control.observed")]
    ControlObserved(ControlObserved),
    #[serde(rename = "text.delta")]
    TextDelta(MessageText),
    #[serde(rename = "thought.delta")]
    ThoughtDelta(MessageText),
    #[serde(rename = "message.completed")]
    MessageCompleted(MessageText),
    #[serde(rename = "tool.call.started")]
    ToolCallStarted(ToolCallStarted),
    #[serde(rename = "tool.call.completed")]
    ToolCallCompleted(ToolCallCompleted),
    #[serde(rename = "node.updated")]
    NodeUpdated(NodeUpdated),
    #[serde(rename = "artifact.created")]
    ArtifactCreated(ArtifactCreated),
    #[serde(rename = "usage.reported")]
    UsageReported(UsageReported),
    #[serde(rename = "input.appended")]
    InputAppended(InputAppended),
    #[serde(rename = "status.reported")]
    StatusReported(StatusReported),
    #[serde(rename = "progress.reported")]
    ProgressReported(ProgressReported),
    #[serde(rename = "custom")]
    Custom(Custom),
    /// A kind this version does not know.
    #[serde(untagged)]
    Unknown(UnknownPayload),
}

/// The 21 kinds agentdeck-sdk 3.1.0 knows.
pub const KNOWN_KINDS: [&str; 21] = [
    "run.started",
    "run.completed",
    "run.failed",
    "run.paused",
    "run.resumed",
    "run.cancelled",
    "run.interrupted",
    "control.requested",
    "control.observed",
    "text.delta",
    "thought.delta",
    "message.completed",
    "tool.call.started",
    "tool.call.completed",
    "node.updated",
    "artifact.created",
    "usage.reported",
    "input.appended",
    "status.reported",
    "progress.reported",
    "custom",
];

/// True when `kind` is one of [`KNOWN_KINDS`].
pub fn is_known_kind(kind: &str) -> bool {
    KNOWN_KINDS.contains(&kind)
}

/// What [`Payload::from_value_with`] does with a payload whose kind the event model does not know
/// (a well-formed kind outside [`KNOWN_KINDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownKinds {
    /// Keep it as `{kind, raw_payload}` ([`Payload::Unknown`]), as the seed does, so the kinds of
    /// a newer writer survive a round trip. What [`Payload::from_value`], the envelope reader and
    /// the library's `append` do.
    Keep,
    /// Refuse it with [`Error::InvalidInput`] on `payload.kind`, naming the known kinds: for an
    /// API that takes payloads from clients, where an unknown kind is far more often a typo
    /// (`tool.call`) than a newer writer, and a stored `raw_payload` hides it (ADR 0373).
    Refuse,
}

/// True when `kind` matches `^[a-z][a-z0-9]*(\.[a-z][a-z0-9]*)*$`.
pub fn is_valid_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c.is_ascii_lowercase())
                && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

impl Payload {
    /// The payload's kind, e.g. `run.started`.
    pub fn kind(&self) -> &str {
        match self {
            Payload::RunStarted(_) => "run.started",
            Payload::RunCompleted(_) => "run.completed",
            Payload::RunFailed(_) => "run.failed",
            Payload::RunPaused(_) => "run.paused",
            Payload::RunResumed(_) => "run.resumed",
            Payload::RunCancelled(_) => "run.cancelled",
            Payload::RunInterrupted(_) => "run.interrupted",
            Payload::ControlRequested(_) => "control.requested",
            Payload::ControlObserved(_) => "control.observed",
            Payload::TextDelta(_) => "text.delta",
            Payload::ThoughtDelta(_) => "thought.delta",
            Payload::MessageCompleted(_) => "message.completed",
            Payload::ToolCallStarted(_) => "tool.call.started",
            Payload::ToolCallCompleted(_) => "tool.call.completed",
            Payload::NodeUpdated(_) => "node.updated",
            Payload::ArtifactCreated(_) => "artifact.created",
            Payload::UsageReported(_) => "usage.reported",
            Payload::InputAppended(_) => "input.appended",
            Payload::StatusReported(_) => "status.reported",
            Payload::ProgressReported(_) => "progress.reported",
            Payload::Custom(_) => "custom",
            Payload::Unknown(u) => &u.kind,
        }
    }

    /// Checks every rule of the model: what a reader would refuse, a store refuses to write.
    pub fn validate(&self) -> Result<(), Error> {
        const P: &str = "payload";
        match self {
            Payload::RunStarted(p) => validate_input(&p.input, "payload.input"),
            Payload::RunCompleted(p) => {
                validate_input(&p.output, "payload.output")?;
                validate_usage(&p.usage, "payload.usage")
            }
            Payload::RunResumed(p) => match &p.value {
                Some(value) => validate_input(value, "payload.value"),
                None => Ok(()),
            },
            Payload::ToolCallCompleted(p) => {
                if p.result_preview.chars().count() > MAX_RESULT_PREVIEW_CHARS {
                    return Err(Error::invalid(
                        "payload.result_preview",
                        format!("has more than {MAX_RESULT_PREVIEW_CHARS} characters"),
                    ));
                }
                let is_hex = p.result_sha256.len() == 64
                    && p.result_sha256
                        .bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                if !is_hex {
                    return Err(Error::invalid(
                        "payload.result_sha256",
                        "must be 64 lowercase hex characters",
                    ));
                }
                Ok(())
            }
            Payload::UsageReported(p) => validate_usage(&p.usage, "payload.usage"),
            Payload::InputAppended(p) => validate_input(&p.input, "payload.input"),
            Payload::StatusReported(p) if p.message.is_empty() => Err(Error::invalid(
                "payload.message",
                "must have at least 1 character",
            )),
            Payload::ProgressReported(p) => {
                if p.step.is_empty() {
                    return Err(Error::invalid(
                        "payload.step",
                        "must have at least 1 character",
                    ));
                }
                if p.total == Some(0) {
                    return Err(Error::invalid("payload.total", "must be greater than 0"));
                }
                if let (Some(current), Some(total)) = (p.current, p.total)
                    && current > total
                {
                    return Err(Error::invalid(
                        "payload.current",
                        format!("is {current}, more than total {total}"),
                    ));
                }
                Ok(())
            }
            Payload::Custom(p) => {
                let valid = p
                    .name
                    .split_once('.')
                    .is_some_and(|(head, tail)| !head.is_empty() && !tail.is_empty());
                if valid {
                    Ok(())
                } else {
                    Err(Error::invalid(
                        "payload.name",
                        format!("must match ^[^.]+\\..+$, got {:?}", p.name),
                    ))
                }
            }
            Payload::Unknown(p) => {
                if !is_valid_kind(&p.kind) {
                    Err(Error::invalid(
                        "kind",
                        format!("{:?} is not a valid kind", p.kind),
                    ))
                } else if KNOWN_KINDS.contains(&p.kind.as_str()) {
                    Err(Error::invalid(
                        P,
                        format!("{:?} is a known kind; build its payload type", p.kind),
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Reads a payload object on its own (as an API receives it): its `kind` field picks the type.
    /// Unknown kinds are wrapped as the envelope reader does.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        match value.get("kind") {
            Some(Value::String(kind)) if is_valid_kind(kind) => Self::from_json(kind, value),
            Some(Value::String(kind)) => Err(Error::invalid(
                "payload.kind",
                format!("{kind:?} is not a valid kind"),
            )),
            _ => Err(Error::invalid(
                "payload.kind",
                "is required and must be a string",
            )),
        }
    }

    /// [`from_value`](Self::from_value) with a choice for unknown kinds: with
    /// [`UnknownKinds::Refuse`], a well-formed kind outside [`KNOWN_KINDS`] is
    /// [`Error::InvalidInput`] on `payload.kind` whose reason lists the known kinds; everything
    /// else reads as `from_value` reads it.
    pub fn from_value_with(value: &Value, unknown: UnknownKinds) -> Result<Self, Error> {
        if unknown == UnknownKinds::Refuse
            && let Some(Value::String(kind)) = value.get("kind")
            && is_valid_kind(kind)
            && !is_known_kind(kind)
        {
            return Err(Error::invalid(
                "payload.kind",
                format!(
                    "is {kind:?}, which is not a kind of the event model; use one of {}",
                    KNOWN_KINDS.join(", ")
                ),
            ));
        }
        Self::from_value(value)
    }

    /// Reads the payload of an envelope whose kind is `kind`.
    pub(crate) fn from_json(kind: &str, value: &Value) -> Result<Self, Error> {
        const P: &str = "payload";
        let f = Fields::of(value, P)?;
        if !KNOWN_KINDS.contains(&kind) {
            return unknown_payload(kind, &f, value);
        }
        match f.raw("kind") {
            Some(Value::String(k)) if k == kind => {}
            Some(Value::String(k)) => {
                return Err(Error::invalid(
                    "payload.kind",
                    format!("{k:?} differs from the envelope kind {kind:?}"),
                ));
            }
            _ => {
                return Err(Error::invalid(
                    "payload.kind",
                    "is required and must be a string",
                ));
            }
        }
        let text = |f: &Fields<'_>| -> Result<MessageText, Error> {
            Ok(MessageText {
                message_id: f.string("message_id")?,
                text: f.string("text")?,
            })
        };
        let payload = match kind {
            "run.started" => Payload::RunStarted(RunStarted {
                invocable: f.string("invocable")?,
                kind_of_invocable: InvocableKind::parse(&f, "kind_of_invocable")?,
                input: read_input(&f, "input")?,
            }),
            "run.completed" => Payload::RunCompleted(RunCompleted {
                output: read_input(&f, "output")?,
                usage: read_usage(&f, "usage")?,
            }),
            "run.failed" => Payload::RunFailed(RunFailed {
                error_code: ErrorCode::parse(&f, "error_code")?,
                message: f.string("message")?,
                retryable: f.boolean("retryable")?,
            }),
            "run.paused" => Payload::RunPaused(RunPaused {
                reason: f.opt_string("reason")?,
            }),
            "run.resumed" => Payload::RunResumed(RunResumed {
                reason: f.opt_string("reason")?,
                value: match f.get("value") {
                    Some(_) => Some(read_input(&f, "value")?),
                    None => None,
                },
            }),
            "run.cancelled" => Payload::RunCancelled(RunCancelled {
                reason: f.opt_string("reason")?,
            }),
            "run.interrupted" => Payload::RunInterrupted(RunInterrupted {
                interrupt_id: f.string("interrupt_id")?,
                reason: InterruptReason::parse(&f, "reason")?,
                payload: f.object("payload")?,
                thread_id: f.opt_string("thread_id")?,
                expected_resume: f.opt_string("expected_resume")?,
            }),
            "control.requested" => Payload::ControlRequested(ControlRequested {
                verb: ControlVerb::parse(&f, "verb")?,
                reason: f.opt_string("reason")?,
            }),
            "control.observed" => Payload::ControlObserved(ControlObserved {
                verb: ControlVerb::parse(&f, "verb")?,
                safe_point: SafePoint::parse(&f, "safe_point")?,
            }),
            "text.delta" => Payload::TextDelta(text(&f)?),
            "thought.delta" => Payload::ThoughtDelta(text(&f)?),
            "message.completed" => Payload::MessageCompleted(text(&f)?),
            "tool.call.started" => Payload::ToolCallStarted(ToolCallStarted {
                call_id: f.string("call_id")?,
                tool: f.string("tool")?,
                args: f.object("args")?,
            }),
            "tool.call.completed" => Payload::ToolCallCompleted(ToolCallCompleted {
                call_id: f.string("call_id")?,
                tool: f.string("tool")?,
                result_preview: f.string("result_preview")?,
                result_size: f.uint("result_size")?,
                result_sha256: f.string("result_sha256")?,
                artifact_id: f.opt_string("artifact_id")?,
                error: f.opt_string("error")?,
            }),
            "node.updated" => Payload::NodeUpdated(NodeUpdated {
                node: f.string("node")?,
                state_patch: f.object("state_patch")?,
            }),
            "artifact.created" => Payload::ArtifactCreated(ArtifactCreated {
                artifact_id: f.string("artifact_id")?,
                media_type: f.string("media_type")?,
                uri: f.string("uri")?,
                size: f.uint("size")?,
            }),
            "usage.reported" => Payload::UsageReported(UsageReported {
                model: f.string("model")?,
                usage: read_usage(&f, "usage")?,
            }),
            "input.appended" => Payload::InputAppended(InputAppended {
                input: read_input(&f, "input")?,
                source: f.string("source")?,
            }),
            "status.reported" => Payload::StatusReported(StatusReported {
                message: f.string("message")?,
            }),
            "progress.reported" => Payload::ProgressReported(ProgressReported {
                step: f.string("step")?,
                current: f.opt_uint("current")?,
                total: f.opt_uint("total")?,
            }),
            "custom" => Payload::Custom(Custom {
                name: f.string("name")?,
                data: f.object("data")?,
            }),
            other => return Err(Error::invalid("kind", format!("unhandled kind {other:?}"))),
        };
        payload.validate()?;
        Ok(payload)
    }
}

/// The seed's fallback for kinds it does not know: an already wrapped `{kind, raw_payload}` reads
/// as itself; any other object is wrapped; a `payload.kind` that names another kind is an error.
fn unknown_payload(kind: &str, f: &Fields<'_>, value: &Value) -> Result<Payload, Error> {
    let Value::Object(map) = value else {
        return Err(Error::invalid("payload", "must be an object"));
    };
    match f.raw("kind") {
        Some(Value::String(k)) if k != kind => {
            return Err(Error::invalid(
                "payload.kind",
                format!("{k:?} differs from the envelope kind {kind:?}"),
            ));
        }
        _ => {}
    }
    let already_wrapped = map.len() == 2
        && matches!(map.get("kind"), Some(Value::String(k)) if k == kind)
        && matches!(map.get("raw_payload"), Some(Value::Object(_)));
    let raw_payload = match (already_wrapped, map.get("raw_payload")) {
        (true, Some(Value::Object(raw))) => raw.clone(),
        _ => map.clone(),
    };
    let payload = Payload::Unknown(UnknownPayload {
        kind: kind.to_string(),
        raw_payload,
    });
    payload.validate()?;
    Ok(payload)
}

fn read_input(f: &Fields<'_>, key: &str) -> Result<Input, Error> {
    let path = f.path(key);
    f.array(key)?
        .iter()
        .enumerate()
        .map(|(i, block)| Block::from_json(block, &format!("{path}[{i}]")))
        .collect()
}

fn read_usage(f: &Fields<'_>, key: &str) -> Result<Usage, Error> {
    let path = f.path(key);
    let u = Fields::of(f.required(key)?, &path)?;
    let usage = Usage {
        input_tokens: u.uint("input_tokens")?,
        output_tokens: u.uint("output_tokens")?,
        usd: u.opt_float("usd")?,
    };
    validate_usage(&usage, &path)?;
    Ok(usage)
}

fn validate_usage(usage: &Usage, path: &str) -> Result<(), Error> {
    if let Some(usd) = usage.usd {
        let field = format!("{path}.usd");
        check_finite(usd, &field)?;
        if usd < 0.0 {
            return Err(Error::invalid(field, "must be >= 0"));
        }
    }
    Ok(())
}

fn validate_input(input: &Input, path: &str) -> Result<(), Error> {
    input
        .iter()
        .enumerate()
        .try_for_each(|(i, block)| block.validate(&format!("{path}[{i}]")))
}
