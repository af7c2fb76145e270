//! Stream tickets (ADR 0260): `EventSource` cannot send `Authorization`, so the console trades its
//! bearer secret for a short-lived ticket with `POST /v1/stream-tickets` and puts only the ticket
//! in the stream's URL.
//!
//! A ticket opens the stream of one run (run id, session and namespace as given when it was
//! issued), with the scope of the token that asked for it, for [`TICKET_TTL`]. It is not spent on
//! use: the browser reconnects by itself with `Last-Event-ID` and the same URL, and that must work
//! within the ticket's life. An expired ticket, a ticket of another run, or one whose token has
//! left the token file is refused like a missing token (401), and the page asks for a new one.
//! Tickets live in the gateway's memory only, hashed; a restart forgets them (the page then asks
//! again), and their number is capped so a token holder cannot grow the map without bound.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::Response;
use rand::RngCore as _;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::AppState;
use super::admit::Scope;
use super::error::{ApiError, ok_json};
use super::input::{Fields, object, run_context};

/// How long a ticket opens streams.
pub const TICKET_TTL: Duration = Duration::from_secs(60);

/// The most live tickets one gateway keeps; past it, issuing answers 503 until some expire.
pub const MAX_TICKETS: usize = 10_000;

/// The query parameter that carries a ticket on the stream route.
pub const TICKET_PARAM: &str = "ticket";

/// What a ticket allows: one run's stream, as the token named here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token that asked; looked up again on use, so a token removed from the file (SIGHUP)
    /// takes its tickets with it.
    pub token: String,
    pub run_id: String,
    pub session: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Debug)]
struct Live {
    grant: Grant,
    expires: Instant,
}

/// The live tickets, keyed by the SHA-256 of the ticket (the ticket itself is never stored).
#[derive(Debug, Default)]
pub struct Tickets {
    live: Mutex<HashMap<[u8; 32], Live>>,
}

fn key(ticket: &str) -> [u8; 32] {
    Sha256::digest(ticket.as_bytes()).into()
}

impl Tickets {
    /// A new ticket for `grant`, or `None` when [`MAX_TICKETS`] are live.
    pub fn issue(&self, grant: Grant, now: Instant) -> Option<String> {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let ticket = hex::encode(bytes);
        let mut live = match self.live.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        live.retain(|_, t| t.expires > now);
        if live.len() >= MAX_TICKETS {
            return None;
        }
        let expires = now.checked_add(TICKET_TTL)?;
        live.insert(key(&ticket), Live { grant, expires });
        Some(ticket)
    }

    /// The grant of a live ticket.
    pub fn check(&self, ticket: &str, now: Instant) -> Option<Grant> {
        let live = match self.live.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        live.get(&key(ticket))
            .filter(|t| t.expires > now)
            .map(|t| t.grant.clone())
    }
}

/// `POST /v1/stream-tickets` `{"run_id", "session"?, "namespace"?}` → `{"ticket", "expires_in"}`.
/// Any token with `read` on the run's namespace may ask (admission checks it like a read of the
/// run). Without `--auth` streams need no ticket, and this answers 404 `no_auth`.
#[utoipa::path(
    post,
    path = "/v1/stream-tickets",
    tag = "runs",
    request_body(content = Object, content_type = "application/json", description = "`run_id`, `session`?, `namespace`?"),
    responses(
        (status = 201, description = "`ticket` and `expires_in`", body = Object),
        (status = "4XX", description = "Refused", body = crate::gateway::openapi::ErrorBody),
        (status = "5XX", description = "Backend failure", body = crate::gateway::openapi::ErrorBody),
    )
)]
pub async fn issue(
    State(state): State<AppState>,
    scope: Option<Extension<Scope>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(object(&body, false)?, &["run_id", "session", "namespace"])?;
    let run_id = f
        .id("run_id")?
        .ok_or_else(|| ApiError::bad_request("run_id", "`run_id` is required"))?;
    let session = f.id("session")?;
    let namespace = f.id("namespace")?;
    run_context(&run_id, session.as_deref(), namespace.as_deref())?;
    let Some(Extension(Scope(token))) = scope else {
        return Err(ApiError::not_found(
            "no_auth",
            "this gateway runs without --auth: open the stream without a ticket",
        ));
    };
    let grant = Grant {
        token: token.name.clone(),
        run_id,
        session,
        namespace,
    };
    let Some(ticket) = state.tickets.issue(grant, Instant::now()) else {
        return Err(ApiError::busy(
            "too_many_tickets",
            format!("{MAX_TICKETS} stream tickets are live; retry when some have expired"),
            TICKET_TTL.as_secs(),
        ));
    };
    Ok(ok_json(
        StatusCode::CREATED,
        json!({ "ticket": ticket, "expires_in": TICKET_TTL.as_secs() }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(run: &str) -> Grant {
        Grant {
            token: "a".into(),
            run_id: run.into(),
            session: None,
            namespace: Some("ns".into()),
        }
    }

    #[test]
    fn tickets_expire_and_are_unguessable() {
        let tickets = Tickets::default();
        let now = Instant::now();
        let one = tickets.issue(grant("r1"), now).expect("issued");
        let two = tickets.issue(grant("r1"), now).expect("issued");
        assert_ne!(one, two);
        assert_eq!(one.len(), 64);
        assert_eq!(tickets.check(&one, now), Some(grant("r1")));
        // Reusable within its life (the browser reconnects with the same URL).
        assert_eq!(tickets.check(&one, now), Some(grant("r1")));
        assert_eq!(tickets.check("not-a-ticket", now), None);
        let later = now + TICKET_TTL;
        assert_eq!(tickets.check(&one, later), None);
        // Issuing prunes the expired ones.
        tickets.issue(grant("r2"), later).expect("issued");
        assert_eq!(tickets.live.lock().map(|l| l.len()).unwrap_or(0), 1);
    }
}
