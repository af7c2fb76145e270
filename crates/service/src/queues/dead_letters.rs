//! Dead letters: list each letter with its `ref` (its exact bytes), and requeue the oldest or the
//! chosen ones (ADR 0307).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{PriorityInput, Queues, at_most, body_json, page, tier_of};
use crate::{Error, Result};

/// The most dead letters one requeue by count may move.
pub const MAX_REPLAY: u64 = 1_000_000;

/// The name of a dead letter: its exact bytes, base64url without padding (ADR 0307).
pub fn letter_ref(body: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(body)
}

/// A dead letter as listed: the decoded body with its `ref` added (`{"raw": …, "ref"}` when the
/// body is not a JSON object).
pub fn letter_json(body: &[u8]) -> Value {
    let mut view = match body_json(body) {
        Value::Object(map) => map,
        _ => {
            let mut map = Map::new();
            map.insert(
                "raw".into(),
                Value::String(String::from_utf8_lossy(body).into_owned()),
            );
            map
        }
    };
    view.insert("ref".into(), Value::String(letter_ref(body)));
    Value::Object(view)
}

/// A queue's dead letters (`GET /v1/queues/{queue}/dead-letters`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterList {
    pub queue: String,
    /// Dead letters in all.
    pub total: u64,
    /// Oldest first: each the decoded body plus `ref`, its exact bytes in base64url without
    /// padding, which names it to `dead-letters/requeue`.
    pub dead_letters: Vec<Value>,
}

/// A requeue (`POST /v1/queues/{queue}/dead-letters/requeue`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequeueBody {
    /// Requeue the oldest `limit` dead letters (default: all). Not with `refs`.
    #[schema(maximum = 1000000)]
    pub limit: Option<u64>,
    /// Requeue exactly these letters, by the `ref` the listing gave (at most 1000). Not with
    /// `limit`.
    #[schema(max_items = 1000)]
    pub refs: Option<Vec<String>>,
    /// The tier they go to: `high`, `normal` (default), `low`, or the seed's integer.
    pub priority: Option<PriorityInput>,
}

/// What a requeue moved.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Requeued {
    pub queue: String,
    /// Dead letters moved back to the queue, with a fresh attempt count.
    pub requeued: u64,
    /// The refs given that named no dead letter (already requeued, cleared, or never there).
    pub missing: Vec<String>,
}

/// What the deprecated `…/dead-letters/replay` answers: a requeue, with `replayed` too.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Replayed {
    pub queue: String,
    pub replayed: u64,
    pub requeued: u64,
    pub missing: Vec<String>,
}

impl From<Requeued> for Replayed {
    fn from(r: Requeued) -> Self {
        Replayed {
            queue: r.queue,
            replayed: r.requeued,
            requeued: r.requeued,
            missing: r.missing,
        }
    }
}

/// The bodies `refs` name, or a 422 naming the first ref that is not one.
fn decode_refs(refs: &[String]) -> Result<Vec<Vec<u8>>> {
    if refs.len() > switchyard_core::fleet::MAX_BATCH {
        return Err(Error::invalid(
            "refs",
            "`refs` holds more than 1000 refs; requeue in several calls",
        ));
    }
    refs.iter()
        .enumerate()
        .map(|(i, r)| {
            URL_SAFE_NO_PAD.decode(r.as_bytes()).map_err(|_| {
                let field = format!("refs[{i}]");
                Error::invalid(
                    field.clone(),
                    format!(
                        "`{field}` is not a ref from the dead-letter listing (base64url without \
                         padding)"
                    ),
                )
            })
        })
        .collect()
}

impl Queues {
    /// `queue`'s oldest dead letters (default 20, at most 1000), each with its `ref`, and how
    /// many there are.
    pub async fn dead_letters(&self, queue: &str, limit: Option<usize>) -> Result<DeadLetterList> {
        let limit = page(limit, 20)?;
        let bodies = self.fleet.dlq_peek(queue, limit).await?;
        let total = self.fleet.dlq_length(queue).await?;
        Ok(DeadLetterList {
            queue: queue.to_string(),
            total,
            dead_letters: bodies.iter().map(|b| letter_json(b)).collect(),
        })
    }

    /// Moves dead letters back to `queue` atomically with a fresh attempt count: the oldest
    /// `limit` (default all), or exactly the letters `refs` names.
    pub async fn requeue(&self, queue: &str, body: RequeueBody) -> Result<Requeued> {
        let limit = at_most("limit", body.limit, MAX_REPLAY)?;
        let bodies = body.refs.as_deref().map(decode_refs).transpose()?;
        if limit.is_some() && bodies.is_some() {
            return Err(Error::invalid("refs", "give `limit` or `refs`, not both"));
        }
        let priority = tier_of(body.priority.as_ref())?;
        let answer = |requeued, missing| Requeued {
            queue: queue.to_string(),
            requeued,
            missing,
        };
        if let (Some(refs), Some(bodies)) = (body.refs, bodies) {
            if bodies.is_empty() {
                return Ok(answer(0, Vec::new()));
            }
            let moved = self
                .fleet
                .dlq_requeue_chosen(queue, &bodies, priority)
                .await?;
            let requeued = moved.iter().filter(|m| **m).count() as u64;
            let missing = refs
                .into_iter()
                .zip(moved.iter().chain(std::iter::repeat(&false)))
                .filter(|(_, m)| !**m)
                .map(|(r, _)| r)
                .collect();
            return Ok(answer(requeued, missing));
        }
        let n = match limit {
            Some(n) => n,
            None => self.fleet.dlq_length(queue).await?,
        };
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let requeued = if n == 0 {
            0
        } else {
            self.fleet.dlq_requeue(queue, n, priority).await?
        };
        Ok(answer(requeued, Vec::new()))
    }
}
