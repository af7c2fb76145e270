//! The event model as OpenAPI schemas (feature `openapi`, ADR 0373), so the gateway's
//! `/openapi.json` tells a client every payload kind and its fields.
//!
//! Each kind's fields come from its payload struct's derived `ToSchema`; this module only adds
//! what serde's `#[serde(tag = "kind")]` adds on the wire, the `kind` property, and names one
//! schema per kind (`RunStartedPayload`, … — `text.delta`, `thought.delta` and
//! `message.completed` share a struct but get a schema each). [`Payload`] is their `oneOf` with a
//! `kind` discriminator. [`Block`] and [`Event`] serialize by hand-written rules (an untagged
//! unknown variant; a custom `Serialize`), so their schemas are built here beside them and held
//! to the serialized values by this module's tests.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, Discriminator, KnownFormat, ObjectBuilder, OneOfBuilder, Ref,
    Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::{PartialSchema, ToSchema};

use super::content::KNOWN_BLOCK_TYPES;
use super::{
    ArtifactCreated, Block, ControlObserved, ControlRequested, Custom, Event, InputAppended,
    KNOWN_KINDS, MessageText, NodeUpdated, Payload, ProgressReported, RunCancelled, RunCompleted,
    RunFailed, RunInterrupted, RunPaused, RunResumed, RunStarted, SchemaVersion, StatusReported,
    ToolCallCompleted, ToolCallStarted, UnknownPayload, UsageReported,
};

type Schemas = Vec<(String, RefOr<Schema>)>;

/// One payload kind: its wire name, the name of its schema, and its struct's derived schema and
/// the schemas that one references.
struct Kind {
    kind: &'static str,
    name: &'static str,
    fields: fn() -> RefOr<Schema>,
    references: fn(&mut Schemas),
}

const fn kind<T: ToSchema>(kind: &'static str, name: &'static str) -> Kind {
    Kind {
        kind,
        name,
        fields: T::schema,
        references: T::schemas,
    }
}

/// Every kind of [`KNOWN_KINDS`], in its order (a test holds the two lists together), with the
/// struct [`Payload`]'s variant of that kind carries.
const KINDS: [Kind; KNOWN_KINDS.len()] = [
    kind::<RunStarted>("run.started", "RunStartedPayload"),
    kind::<RunCompleted>("run.completed", "RunCompletedPayload"),
    kind::<RunFailed>("run.failed", "RunFailedPayload"),
    kind::<RunPaused>("run.paused", "RunPausedPayload"),
    kind::<RunResumed>("run.resumed", "RunResumedPayload"),
    kind::<RunCancelled>("run.cancelled", "RunCancelledPayload"),
    kind::<RunInterrupted>("run.interrupted", "RunInterruptedPayload"),
    kind::<ControlRequested>("control.requested", "ControlRequestedPayload"),
    kind::<ControlObserved>("control.observed", "ControlObservedPayload"),
    kind::<MessageText>("text.delta", "TextDeltaPayload"),
    kind::<MessageText>("thought.delta", "ThoughtDeltaPayload"),
    kind::<MessageText>("message.completed", "MessageCompletedPayload"),
    kind::<ToolCallStarted>("tool.call.started", "ToolCallStartedPayload"),
    kind::<ToolCallCompleted>("tool.call.completed", "ToolCallCompletedPayload"),
    kind::<NodeUpdated>("node.updated", "NodeUpdatedPayload"),
    kind::<ArtifactCreated>("artifact.created", "ArtifactCreatedPayload"),
    kind::<UsageReported>("usage.reported", "UsageReportedPayload"),
    kind::<InputAppended>("input.appended", "InputAppendedPayload"),
    kind::<StatusReported>("status.reported", "StatusReportedPayload"),
    kind::<ProgressReported>("progress.reported", "ProgressReportedPayload"),
    kind::<Custom>("custom", "CustomPayload"),
];

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn nullable_string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::Array(vec![Type::String, Type::Null]))
}

/// A string that is exactly `value`.
fn literal(value: &str) -> ObjectBuilder {
    string().enum_values(Some([value]))
}

/// The schema of one kind: its struct's fields plus `kind`, required and first.
fn kind_schema(k: &Kind) -> RefOr<Schema> {
    let tag = literal(k.kind).description(Some(format!("Always `{}`", k.kind)));
    let description = format!("The payload of a `{}` event", k.kind);
    match (k.fields)() {
        RefOr::T(Schema::Object(mut object)) => {
            object.properties.insert("kind".into(), tag.into());
            object.required.insert(0, "kind".into());
            object.description = Some(description);
            RefOr::T(Schema::Object(object))
        }
        // Every payload struct derives an object schema; should one ever not, the kind still
        // applies to it.
        other => AllOfBuilder::new()
            .item(other)
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("kind", tag)
                    .required("kind"),
            )
            .description(Some(description))
            .into(),
    }
}

/// `oneOf` the schema of every known kind, discriminated by `kind`.
impl PartialSchema for Payload {
    fn schema() -> RefOr<Schema> {
        let mapping = KINDS
            .iter()
            .map(|k| (k.kind, Ref::from_schema_name(k.name).ref_location));
        let mut one_of = OneOfBuilder::new()
            .description(Some(
                "An event payload: an object whose `kind` names one of the event model's kinds \
                 and whose other fields are that kind's",
            ))
            .discriminator(Some(Discriminator::with_mapping("kind", mapping)));
        for k in &KINDS {
            one_of = one_of.item(Ref::from_schema_name(k.name));
        }
        one_of.into()
    }
}

impl ToSchema for Payload {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Payload")
    }

    fn schemas(schemas: &mut Schemas) {
        for k in &KINDS {
            schemas.push((k.name.to_string(), kind_schema(k)));
            (k.references)(schemas);
        }
    }
}

/// A known block type with its fields (`(name, schema, required)`).
fn block(tag: &str, description: &str, fields: Vec<(&str, ObjectBuilder, bool)>) -> ObjectBuilder {
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .property("type", literal(tag))
        .required("type");
    for (name, schema, required) in fields {
        object = object.property(name, schema);
        if required {
            object = object.required(name);
        }
    }
    object
}

/// `anyOf` the five known block types and a block of any other `type`, which is kept verbatim
/// (so a malformed known block also matches that last branch: the gateway refuses it).
impl PartialSchema for Block {
    fn schema() -> RefOr<Schema> {
        let base64 = || {
            string()
                .description(Some("Base64 of the bytes (at most 1 MiB decoded)"))
                .content_encoding("base64")
        };
        let known = [
            block("text", "Plain text", vec![("text", string(), true)]),
            block(
                "image",
                "An inline image",
                vec![("media_type", string(), true), ("data_b64", base64(), true)],
            ),
            block(
                "audio",
                "Inline audio",
                vec![("media_type", string(), true), ("data_b64", base64(), true)],
            ),
            block(
                "resource",
                "A reference to content elsewhere",
                vec![
                    ("uri", string(), true),
                    ("media_type", nullable_string(), false),
                ],
            ),
            block(
                "data",
                "Any JSON value",
                vec![("data", ObjectBuilder::new(), true)],
            ),
        ];
        let mut any_of = AnyOfBuilder::new().description(Some(format!(
            "A content block, tagged by `type` ({}); a block of another type is kept as it was \
             sent",
            KNOWN_BLOCK_TYPES.join(", ")
        )));
        for schema in known {
            any_of = any_of.item(schema);
        }
        any_of
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .description(Some("A block of a type this version does not know"))
                    .property("type", string())
                    .required("type"),
            )
            .into()
    }
}

impl ToSchema for Block {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Block")
    }
}

/// A stored event as [`Event::to_json`] writes it; its payload is of a known kind, or of an
/// unknown kind kept as `{kind, raw_payload}`.
impl PartialSchema for Event {
    fn schema() -> RefOr<Schema> {
        let u64 = || {
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
        };
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some(
                "One stored event of a run's log: the store assigned `seq` and `ts`",
            ))
            .property("v", Ref::from_schema_name(SchemaVersion::name()))
            .property("kind", string().description(Some("The payload's kind")))
            .property("seq", u64().description(Some("Per run, dense, from 0")))
            .property("run_id", string())
            .property("session_id", nullable_string())
            .property("namespace", nullable_string())
            .property(
                "origin",
                string().description(Some("The invocable the caller addressed")),
            )
            .property(
                "ts",
                string()
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
                    .description(Some("When the store wrote it")),
            )
            .property(
                "payload",
                OneOfBuilder::new()
                    .item(Ref::from_schema_name(Payload::name()))
                    .item(Ref::from_schema_name(UnknownPayload::name())),
            )
            .required("v")
            .required("kind")
            .required("seq")
            .required("run_id")
            .required("session_id")
            .required("namespace")
            .required("origin")
            .required("ts")
            .required("payload")
            .into()
    }
}

impl ToSchema for Event {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Event")
    }

    fn schemas(schemas: &mut Schemas) {
        schemas.push((SchemaVersion::name().into(), SchemaVersion::schema()));
        schemas.push((Payload::name().into(), Payload::schema()));
        <Payload as ToSchema>::schemas(schemas);
        schemas.push((UnknownPayload::name().into(), UnknownPayload::schema()));
        <UnknownPayload as ToSchema>::schemas(schemas);
    }
}

#[cfg(test)]
mod tests;
