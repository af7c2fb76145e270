//! Reading requests: JSON bodies, ids, query strings. Every failure is an [`ApiError`] that names
//! the field; nothing here panics on input.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use switchyard_kit::core::{Error, RunContext};

use super::error::ApiError;

/// The longest id (run, session, namespace, queue, task) the gateway accepts, in bytes.
pub use switchyard_kit::core::keys::MAX_ID_BYTES;

/// The longest duration a client may ask for (`stale_after_secs`, `ttl_seconds`): ten years,
/// the service's bound.
pub use switchyard_service::MAX_DURATION_SECS;

/// Checks an id: non-empty, at most [`MAX_ID_BYTES`], no control characters (400 naming the
/// field). The rule is the core's `keys::check_id`, which a schedule's target queue is checked
/// with too: one rule, so nothing can write under a name no route accepts.
pub fn check_id(field: &str, id: &str) -> Result<(), ApiError> {
    switchyard_kit::core::keys::check_id(field, id).map_err(|e| match e {
        Error::InvalidInput { reason, .. } => {
            ApiError::bad_request(field, format!("`{field}` {reason}"))
        }
        other => other.into(),
    })
}

/// A body that must be a JSON object; an empty body is `{}` when `empty_ok`.
pub fn object(body: &Bytes, empty_ok: bool) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return if empty_ok {
            Ok(Map::new())
        } else {
            Err(ApiError::bad_request(
                "body",
                "a JSON object body is required",
            ))
        };
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "body",
            "the body must be a JSON object",
        )),
        Err(e) => Err(ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "malformed_json",
            format!("the body is not valid JSON: {e}"),
        )
        .with_field("body")),
    }
}

/// A JSON object body read into `T` (a request type with `#[serde(deny_unknown_fields)]`), refused
/// with the gateway's JSON errors: 400 `bad_request` for a missing or non-object body, 400
/// `malformed_json` for JSON that does not parse, 422 `invalid_input` naming the field for an
/// unknown field, a missing one or a value of the wrong type. With `EMPTY_OK` an empty body
/// reads as `{}`. A body over the limit keeps the 413 of the layers below.
#[derive(Debug)]
pub struct JsonBody<T, const EMPTY_OK: bool = false>(pub T);

impl<S, T, const EMPTY_OK: bool> FromRequest<S> for JsonBody<T, EMPTY_OK>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let map = object(&body, EMPTY_OK).map_err(IntoResponse::into_response)?;
        typed(map)
            .map(JsonBody)
            .map_err(IntoResponse::into_response)
    }
}

/// Reads a body object into `T`; a failure is a 422 naming the field it happened at.
pub fn typed<T: DeserializeOwned>(map: Map<String, Value>) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // The path of an unknown field is the field's own; a missing field is reported at the
        // object that lacks it, and serde names it in the message: the client is told the field.
        let missing = inner
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next());
        let named = missing.is_some() || inner.starts_with("unknown field `");
        let field = match (missing, path.as_str()) {
            (Some(name), "." | "") => name.to_string(),
            (Some(name), parent) => format!("{parent}.{name}"),
            (None, at) => at.to_string(),
        };
        let shown = if field.is_empty() || field == "." {
            "body"
        } else {
            field.as_str()
        };
        let message = if named {
            inner
        } else {
            format!("`{shown}`: {inner}")
        };
        ApiError::invalid(shown, message)
    })
}

/// Typed access to a body object's fields, refusing fields it does not know.
pub struct Fields {
    map: Map<String, Value>,
}

impl Fields {
    /// Refuses any field outside `allowed` (a typo would otherwise be silently ignored).
    pub fn new(map: Map<String, Value>, allowed: &[&str]) -> Result<Self, ApiError> {
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::invalid(
                unknown.clone(),
                format!("unknown field `{unknown}`; expected one of {allowed:?}"),
            ));
        }
        Ok(Self { map })
    }

    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name).filter(|v| !v.is_null())
    }

    pub fn string(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        match self.take(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::invalid(
                name,
                format!("`{name}` must be a string"),
            )),
        }
    }

    /// A string field that is an id.
    pub fn id(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        let value = self.string(name)?;
        if let Some(id) = &value {
            id_field(name, id)?;
        }
        Ok(value)
    }
}

/// Checks an id read from a body's field `name` (422 naming the field, where a path's id is 400).
pub fn id_field(name: &str, id: &str) -> Result<(), ApiError> {
    check_id(name, id).map_err(|_| {
        ApiError::invalid(
            name,
            format!("`{name}` must be 1..={MAX_ID_BYTES} bytes without control characters"),
        )
    })
}

/// Renames the field of an `InvalidInput` (e.g. `payload.input[0]` → `events[2].input[0]`).
pub fn refield(error: Error, from: &str, to: &str) -> ApiError {
    match error {
        Error::InvalidInput { field, reason } => {
            let field = match field.strip_prefix(from) {
                Some(rest) => format!("{to}{rest}"),
                None => field,
            };
            let field = field.trim_start_matches('.').to_string();
            let shown = if field.is_empty() { "body" } else { &field };
            ApiError::invalid(shown, format!("invalid input: `{shown}` {reason}"))
        }
        other => other.into(),
    }
}

/// The run context of `run_id` addressed by the `session` and `namespace` query parameters.
pub fn run_context(
    run_id: &str,
    session: Option<&str>,
    namespace: Option<&str>,
) -> Result<RunContext, ApiError> {
    check_id("run_id", run_id)?;
    let mut ctx = RunContext::new(run_id);
    if let Some(session) = session {
        check_id("session", session)?;
        ctx = ctx.with_session(session);
    }
    if let Some(namespace) = namespace {
        check_id("namespace", namespace)?;
        ctx = ctx
            .with_namespace(namespace)
            .map_err(|e| ApiError::bad_request("namespace", e.to_string()))?;
    }
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for good in ["run-1", "a:b{c}%2F/ é✓", "x"] {
            assert!(check_id("run_id", good).is_ok(), "{good:?}");
        }
        let long = "x".repeat(MAX_ID_BYTES + 1);
        for bad in ["", "a\nb", "a\0b", "a\rb", long.as_str()] {
            let err = check_id("run_id", bad).expect_err(bad);
            assert_eq!(err.status().as_u16(), 400);
        }
    }

    #[test]
    fn bodies() {
        assert!(object(&Bytes::from_static(b""), true).is_ok());
        assert_eq!(
            object(&Bytes::from_static(b""), false)
                .expect_err("empty")
                .status()
                .as_u16(),
            400
        );
        assert_eq!(
            object(&Bytes::from_static(b"{\"a\":"), true)
                .expect_err("malformed")
                .status()
                .as_u16(),
            400
        );
        assert_eq!(
            object(&Bytes::from_static(b"[1]"), true)
                .expect_err("array")
                .status()
                .as_u16(),
            400
        );
        let fields = Fields::new(
            object(&Bytes::from_static(b"{\"nope\":1}"), true).expect("object"),
            &["yes"],
        );
        assert_eq!(fields.err().map(|e| e.status().as_u16()), Some(422));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Probe {
        name: String,
        limit: Option<u64>,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        depth: u64,
    }

    fn probe(body: &str) -> Result<Probe, ApiError> {
        typed(object(&Bytes::from(body.to_string()), true)?)
    }

    #[test]
    fn typed_bodies_name_the_field() {
        assert!(probe(r#"{"name": "a", "limit": 3}"#).is_ok());
        for (body, field) in [
            (r#"{"name": "a", "nope": 1}"#, "nope"),
            (r#"{"limit": 1}"#, "name"),
            (r#"{"name": 1}"#, "name"),
            (r#"{"name": "a", "limit": -1}"#, "limit"),
            (r#"{"name": "a", "inner": {"depth": "x"}}"#, "inner.depth"),
            (
                r#"{"name": "a", "inner": {"depth": 1, "wide": 2}}"#,
                "inner.wide",
            ),
        ] {
            let e = probe(body).expect_err(body);
            assert_eq!(e.status().as_u16(), 422, "{body}");
            let shown = format!("{e:?}");
            assert!(
                shown.contains(&format!("field: Some({field:?})")),
                "{body}: {shown}"
            );
        }
    }

    #[test]
    fn refield_renames_payload_paths() {
        let e = refield(
            Error::invalid("payload.input[0].text", "must be a string"),
            "payload",
            "events[2]",
        );
        assert_eq!(e.status().as_u16(), 422);
        let body = format!("{e:?}");
        assert!(body.contains("events[2].input[0].text"), "{body}");
        let e = refield(Error::invalid("payload.invocable", "x"), "payload", "");
        assert!(format!("{e:?}").contains("field: Some(\"invocable\")"));
    }
}
