//! Content blocks: the parts of an [`Input`](super::Input).

use base64::Engine as _;
use serde::Serialize;
use serde_json::Value;

use super::lax::{Fields, JsonObject, type_name};
use crate::Error;

/// Largest decoded size of an inline image or audio block: 1 MiB.
pub const MAX_INLINE_BYTES: usize = 1024 * 1024;

/// One content block, tagged by `type` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An inline image; `data_b64` decodes to at most [`MAX_INLINE_BYTES`].
    Image {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64 of the bytes.
        data_b64: String,
    },
    /// Inline audio; `data_b64` decodes to at most [`MAX_INLINE_BYTES`].
    Audio {
        /// MIME type.
        media_type: String,
        /// Base64 of the bytes.
        data_b64: String,
    },
    /// A reference to content elsewhere.
    Resource {
        /// Where it lives.
        uri: String,
        /// MIME type, if known.
        media_type: Option<String>,
    },
    /// Any JSON value.
    Data {
        /// The value.
        data: Value,
    },
    /// A block of a `type` this version does not know. It re-serializes verbatim.
    #[serde(untagged)]
    Unknown(JsonObject),
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text { text: text.into() }
    }

    pub(crate) fn from_json(value: &Value, path: &str) -> Result<Self, Error> {
        let fields = Fields::of(value, path)?;
        let Some(Value::String(tag)) = fields.raw("type") else {
            return Err(Error::invalid(
                fields.path("type"),
                match fields.raw("type") {
                    None => "is required".to_string(),
                    Some(v) => format!("must be a string, got {}", type_name(v)),
                },
            ));
        };
        let block = match tag.as_str() {
            "text" => Block::Text {
                text: fields.string("text")?,
            },
            "image" => Block::Image {
                media_type: fields.string("media_type")?,
                data_b64: fields.string("data_b64")?,
            },
            "audio" => Block::Audio {
                media_type: fields.string("media_type")?,
                data_b64: fields.string("data_b64")?,
            },
            "resource" => Block::Resource {
                uri: fields.string("uri")?,
                media_type: fields.opt_string("media_type")?,
            },
            "data" => Block::Data {
                data: fields
                    .raw("data")
                    .cloned()
                    .ok_or_else(|| Error::invalid(fields.path("data"), "is required"))?,
            },
            _ => match value {
                Value::Object(map) => Block::Unknown(map.clone()),
                _ => unreachable_object(path)?,
            },
        };
        block.validate(path)?;
        Ok(block)
    }

    pub(crate) fn validate(&self, path: &str) -> Result<(), Error> {
        match self {
            Block::Image { data_b64, .. } | Block::Audio { data_b64, .. } => {
                let field = format!("{path}.data_b64");
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data_b64.as_bytes())
                    .map_err(|e| Error::invalid(&field, format!("is not valid base64: {e}")))?;
                if bytes.len() > MAX_INLINE_BYTES {
                    return Err(Error::invalid(
                        field,
                        format!(
                            "decodes to {} bytes, more than the {MAX_INLINE_BYTES} allowed",
                            bytes.len()
                        ),
                    ));
                }
                Ok(())
            }
            Block::Unknown(map) => match map.get("type") {
                Some(Value::String(t)) if !KNOWN_BLOCK_TYPES.contains(&t.as_str()) => Ok(()),
                _ => Err(Error::invalid(
                    format!("{path}.type"),
                    "an unknown block needs a string `type` that is not a known block type",
                )),
            },
            Block::Text { .. } | Block::Resource { .. } | Block::Data { .. } => Ok(()),
        }
    }
}

pub(crate) const KNOWN_BLOCK_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "data"];

fn unreachable_object(path: &str) -> Result<Block, Error> {
    Err(Error::invalid(path, "must be an object"))
}
