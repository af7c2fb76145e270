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
//! again), and their number is capped twice: per token ([`Tickets::issue`] answers 429 past
//! `limits.max_tickets_per_token`), so one token cannot take the gateway's whole table and lock
//! every other tenant out, and in all ([`MAX_TICKETS`]), so the table's memory is bounded whatever
//! the number of tokens (ADR 0354).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::Response;
use rand::RngCore as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::AppState;
use super::admit::Scope;
use super::auth::Principal;
use super::error::{ApiError, ok_typed};
use super::input::{JsonBody, id_field, run_context};

/// How long a ticket opens streams.
pub const TICKET_TTL: Duration = Duration::from_secs(60);

/// The most live tickets one gateway keeps; past it, issuing answers 503 until some expire.
pub const MAX_TICKETS: usize = 10_000;

/// Live tickets one token may hold when the config says nothing (`limits.max_tickets_per_token`).
pub const DEFAULT_TICKETS_PER_TOKEN: usize = 100;

/// The query parameter that carries a ticket on the stream route.
pub const TICKET_PARAM: &str = "ticket";

/// What a ticket allows: one run's stream, as the principal named here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The name of the principal that asked: its quota, and the logs.
    pub token: String,
    /// The principal that asked; the authenticator is asked about it again on use, so a token
    /// removed from the file or given a new secret (SIGHUP) takes its tickets with it.
    pub principal: Arc<Principal>,
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
#[derive(Debug)]
pub struct Tickets {
    live: Mutex<HashMap<[u8; 32], Live>>,
    /// Live tickets one token may hold.
    per_token: AtomicUsize,
}

impl Default for Tickets {
    fn default() -> Self {
        Tickets {
            live: Mutex::default(),
            per_token: AtomicUsize::new(DEFAULT_TICKETS_PER_TOKEN),
        }
    }
}

/// Why no ticket was issued.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// [`MAX_TICKETS`] are live, across all tokens.
    Full,
    /// The token holds `limit` live tickets; its oldest expires in `retry_after` seconds.
    Quota { limit: usize, retry_after: u64 },
}

fn key(ticket: &str) -> [u8; 32] {
    Sha256::digest(ticket.as_bytes()).into()
}

impl Tickets {
    /// Sets how many live tickets one token may hold (`limits.max_tickets_per_token`).
    pub fn limit_per_token(&self, limit: usize) {
        self.per_token.store(limit.max(1), Ordering::Relaxed);
    }

    /// A new ticket for `grant`, unless its token holds its quota or [`MAX_TICKETS`] are live.
    pub fn issue(&self, grant: Grant, now: Instant) -> Result<String, Refused> {
        let mut live = match self.live.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        live.retain(|_, t| t.expires > now);
        // The table holds at most MAX_TICKETS, so counting the token's own is a short scan (and
        // the pruning above already visits every entry).
        let limit = self.per_token.load(Ordering::Relaxed);
        let mut held = 0usize;
        let mut oldest: Option<Instant> = None;
        for t in live.values().filter(|t| t.grant.token == grant.token) {
            held += 1;
            oldest = Some(oldest.map_or(t.expires, |o| o.min(t.expires)));
        }
        if held >= limit {
            let wait = oldest.map_or(TICKET_TTL, |o| o.saturating_duration_since(now));
            // Whole seconds, rounded up, at least one: an HTTP `Retry-After`.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            return Err(Refused::Quota {
                limit,
                retry_after: secs.max(1),
            });
        }
        if live.len() >= MAX_TICKETS {
            return Err(Refused::Full);
        }
        let expires = now.checked_add(TICKET_TTL).ok_or(Refused::Full)?;
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let ticket = hex::encode(bytes);
        live.insert(key(&ticket), Live { grant, expires });
        Ok(ticket)
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

/// A ticket request (`POST /v1/stream-tickets`): the run whose stream it opens, addressed as
/// the stream route addresses it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TicketRequest {
    /// The run.
    pub run_id: String,
    /// The run's session, if it has one.
    #[serde(default)]
    pub session: Option<String>,
    /// The run's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// An issued ticket: pass it as `?ticket=` on the run's stream instead of `Authorization`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ticket {
    /// The ticket (64 hex digits).
    pub ticket: String,
    /// Seconds it opens the stream for, reconnects included.
    pub expires_in: u64,
}

/// `POST /v1/stream-tickets` `{"run_id", "session"?, "namespace"?}` → `{"ticket", "expires_in"}`.
/// Any token with `read` on the run's namespace may ask (admission checks it like a read of the
/// run). Without `--auth` streams need no ticket, and this answers 404 `no_auth`.
#[utoipa::path(
    post,
    path = "/v1/stream-tickets",
    tag = "runs",
    request_body(content = TicketRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Issued", body = Ticket),
        crate::openapi::Failures,
    )
)]
pub async fn issue(
    State(state): State<AppState>,
    scope: Option<Extension<Scope>>,
    JsonBody(request): JsonBody<TicketRequest>,
) -> Result<Response, ApiError> {
    let TicketRequest {
        run_id,
        session,
        namespace,
    } = request;
    id_field("run_id", &run_id)?;
    for (name, id) in [("session", &session), ("namespace", &namespace)] {
        if let Some(id) = id {
            id_field(name, id)?;
        }
    }
    run_context(&run_id, session.as_deref(), namespace.as_deref())?;
    let Some(Extension(Scope(token))) = scope else {
        return Err(ApiError::not_found(
            "no_auth",
            "this gateway runs without --auth: open the stream without a ticket",
        ));
    };
    let grant = Grant {
        token: token.name().to_string(),
        principal: token.clone(),
        run_id,
        session,
        namespace,
    };
    let ticket = match state.tickets.issue(grant, Instant::now()) {
        Ok(ticket) => ticket,
        Err(Refused::Quota { limit, retry_after }) => {
            return Err(ApiError::too_many(
                "ticket_quota_exceeded",
                format!(
                    "token {:?} holds {limit} live stream tickets (limits.max_tickets_per_token); \
                     reuse one (a ticket opens its run's stream, reconnects included, for {} s) \
                     or retry in {retry_after} s",
                    token.name(),
                    TICKET_TTL.as_secs()
                ),
                retry_after,
            )
            .with("limit", limit));
        }
        Err(Refused::Full) => {
            return Err(ApiError::busy(
                "too_many_tickets",
                format!("{MAX_TICKETS} stream tickets are live; retry when some have expired"),
                TICKET_TTL.as_secs(),
            ));
        }
    };
    Ok(ok_typed(
        StatusCode::CREATED,
        Ticket {
            ticket,
            expires_in: TICKET_TTL.as_secs(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(run: &str) -> Grant {
        grant_of("a", run)
    }

    fn grant_of(token: &str, run: &str) -> Grant {
        Grant {
            token: token.into(),
            principal: Arc::new(Principal::new(token)),
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

    #[test]
    fn one_token_at_its_quota_leaves_the_others_theirs() {
        let tickets = Tickets::default();
        tickets.limit_per_token(3);
        let now = Instant::now();
        for _ in 0..3 {
            tickets.issue(grant_of("a", "r"), now).expect("issued");
        }
        let later = now + Duration::from_millis(1500);
        assert_eq!(
            tickets.issue(grant_of("a", "r"), later),
            Err(Refused::Quota {
                limit: 3,
                retry_after: 59
            })
        );
        tickets
            .issue(grant_of("b", "r"), later)
            .expect("b has its own quota");
        // The oldest of a's tickets expires: a may ask again.
        tickets
            .issue(grant_of("a", "r"), now + TICKET_TTL)
            .expect("issued once the old ones expired");
    }
}
