//! The route table: every documented route once, as its handler (whose `#[utoipa::path]`
//! attribute gives the method, the path and the OpenAPI operation), the right it needs and what it
//! touches for the scope check. The router, the OpenAPI document (ADR 0305), admission (ADR 0181)
//! and the generated-request tests are all built from [`ROUTES`], so a route cannot be served
//! without a rule, nor have a rule and be missing from the document (ADR 0369).
//!
//! A `/v1` route that reaches admission without an entry here (added to the router some other
//! way) is refused: fail closed.

use std::collections::HashMap;

use axum::http::Method;
use utoipa::OpenApi as _;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use crate::auth::Right;
use crate::{
    AppState, dead_letters, openapi, queues, ready, runs, schedules, stream, tasks, tickets,
    webhooks,
};
use crate::{run_control, worker, workers};

/// What a route touches, for the scope check of the principal that calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Touches {
    /// Nothing scoped (`/healthz`, `/readyz`, `/openapi.json`, `/metrics`).
    Nothing,
    /// Runs of the namespaces named by `?namespace=` (none: the default namespace).
    NamespaceInQuery,
    /// Runs of the namespace named by the JSON body's `"namespace"` (none, or a body that does
    /// not parse: the default namespace; the handler answers the bad body).
    NamespaceInBody,
    /// The queue named by this path parameter: its tasks, dead letters and reservations, or the
    /// workers of that automation type.
    QueueInPath(&'static str),
    /// The queue listing: any reader, filtered to the principal's queues by the handler.
    QueueList,
    /// Every queue: schedules submit to the queue their document names, which a GET or DELETE
    /// does not show, so only a principal covering every queue manages them (ADR 0308).
    AllQueues,
    /// The workers of `?automation_type=`, or of every type without it.
    WorkersInQuery,
    /// Every namespace and every queue: a webhook subscription delivers ends of the
    /// namespaces and queues it names, which a listing shows to anyone who may manage them.
    Everything,
}

/// One route of the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    /// The handler as `routes!` registers it: method, path and OpenAPI operation.
    pub register: fn() -> UtoipaMethodRouter<AppState>,
    /// The right a principal needs; `None`: open to everyone.
    pub right: Option<Right>,
    pub touches: Touches,
    /// An SSE stream: counted against the stream caps, opened with a stream ticket instead of
    /// credentials if need be (ADR 0260), and cut when its principal is revoked.
    pub stream: bool,
}

const fn open(register: fn() -> UtoipaMethodRouter<AppState>) -> Route {
    Route {
        register,
        right: None,
        touches: Touches::Nothing,
        stream: false,
    }
}

const fn read(register: fn() -> UtoipaMethodRouter<AppState>, touches: Touches) -> Route {
    Route {
        register,
        right: Some(Right::Read),
        touches,
        stream: false,
    }
}

const fn write(register: fn() -> UtoipaMethodRouter<AppState>, touches: Touches) -> Route {
    Route {
        register,
        right: Some(Right::Write),
        touches,
        stream: false,
    }
}

const QUEUE: Touches = Touches::QueueInPath("queue");
const AUTOMATION_TYPE: Touches = Touches::QueueInPath("automation_type");

/// Every documented route.
pub(crate) const ROUTES: &[Route] = &[
    open(|| routes!(crate::healthz)),
    open(|| routes!(ready::readyz)),
    open(|| routes!(openapi::document)),
    Route {
        register: || routes!(crate::render_metrics),
        // Open instead when the builder says `metrics_public`.
        right: Some(Right::Metrics),
        touches: Touches::Nothing,
        stream: false,
    },
    // Runs.
    write(|| routes!(runs::start), Touches::NamespaceInBody),
    read(|| routes!(runs::list), Touches::NamespaceInQuery),
    read(|| routes!(runs::read), Touches::NamespaceInQuery),
    write(|| routes!(runs::append), Touches::NamespaceInQuery),
    write(|| routes!(runs::resume), Touches::NamespaceInQuery),
    // Waiting for a session (ADR 0394): looking may start the run, so it is a write.
    write(|| routes!(runs::turn), Touches::NamespaceInQuery),
    write(|| routes!(runs::leave_line), Touches::NamespaceInQuery),
    read(|| routes!(run_control::line), Touches::NamespaceInQuery),
    // Run control (ADR 0396).
    write(|| routes!(run_control::cancel), Touches::NamespaceInQuery),
    Route {
        register: || routes!(run_control::signals),
        right: Some(Right::Read),
        touches: Touches::NamespaceInQuery,
        stream: true,
    },
    Route {
        register: || routes!(stream::stream),
        right: Some(Right::Read),
        touches: Touches::NamespaceInQuery,
        stream: true,
    },
    // Asking for a ticket reads nothing yet, so it needs `read` like the stream it opens, and
    // is checked against the namespace the body names.
    read(|| routes!(tickets::issue), Touches::NamespaceInBody),
    // Queues.
    read(|| routes!(queues::list), Touches::QueueList),
    read(|| routes!(queues::stats), QUEUE),
    write(|| routes!(queues::submit), QUEUE),
    read(|| routes!(queues::peek), QUEUE),
    write(|| routes!(queues::pause), QUEUE),
    write(|| routes!(queues::resume), QUEUE),
    write(|| routes!(queues::set_rate_limit), QUEUE),
    write(|| routes!(queues::clear_rate_limit), QUEUE),
    // Control of a task (ADR 0380).
    read(|| routes!(tasks::get), QUEUE),
    write(|| routes!(tasks::cancel), QUEUE),
    write(|| routes!(tasks::cancel_many), QUEUE),
    Route {
        register: || routes!(tasks::events),
        right: Some(Right::Read),
        touches: QUEUE,
        stream: true,
    },
    // A page of the same log as JSON: a plain read, not a stream (ADR 0384).
    read(|| routes!(tasks::events_page), QUEUE),
    read(|| routes!(tasks::retention), QUEUE),
    write(|| routes!(tasks::set_retention), QUEUE),
    read(|| routes!(dead_letters::dead_letters), QUEUE),
    write(|| routes!(dead_letters::requeue), QUEUE),
    write(replay, QUEUE),
    // The worker API.
    write(|| routes!(worker::reserve), QUEUE),
    write(|| routes!(worker::ack), QUEUE),
    write(|| routes!(worker::ack_many), QUEUE),
    write(|| routes!(worker::nack), QUEUE),
    write(|| routes!(worker::fail), QUEUE),
    write(|| routes!(worker::extend), QUEUE),
    write(|| routes!(worker::progress), QUEUE),
    read(|| routes!(worker::in_flight), QUEUE),
    // Schedules.
    read(|| routes!(schedules::list), Touches::AllQueues),
    write(|| routes!(schedules::put), Touches::AllQueues),
    read(|| routes!(schedules::get), Touches::AllQueues),
    write(|| routes!(schedules::delete), Touches::AllQueues),
    // The worker registry: a worker's own routes are scoped by its automation type, as the
    // listing is.
    read(|| routes!(queues::workers), Touches::WorkersInQuery),
    write(|| routes!(workers::register), AUTOMATION_TYPE),
    write(|| routes!(workers::deregister), AUTOMATION_TYPE),
    write(|| routes!(workers::heartbeat), AUTOMATION_TYPE),
    // Webhooks (ADR 0395): even reading them needs `write`, since a listing shows where the
    // gateway's events go.
    write(|| routes!(webhooks::create), Touches::Everything),
    write(|| routes!(webhooks::list), Touches::Everything),
    write(|| routes!(webhooks::get), Touches::Everything),
    write(|| routes!(webhooks::delete), Touches::Everything),
    write(|| routes!(webhooks::deliveries), Touches::Everything),
];

/// The replay alias stays registered until its removal (ADR 0307).
#[allow(deprecated)]
fn replay() -> UtoipaMethodRouter<AppState> {
    routes!(dead_letters::replay)
}

/// A route of the table with the method and path its handler's attribute declares.
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    pub method: Method,
    pub path: String,
    pub route: Route,
}

/// The method and path of each route, in table order. An entry whose handler does not declare
/// exactly one operation (two handlers in one `routes!`) has no rule: admission refuses it, and
/// the table's tests fail.
pub(crate) fn declared() -> Vec<Declared> {
    ROUTES
        .iter()
        .filter_map(|route| {
            let (_, paths, _) = (route.register)();
            let mut operations = paths
                .paths
                .iter()
                .flat_map(|(path, item)| methods(item).map(move |m| (m, path.clone())));
            let (method, path) = operations.next()?;
            operations.next().is_none().then_some(Declared {
                method,
                path,
                route: *route,
            })
        })
        .collect()
}

fn methods(item: &utoipa::openapi::PathItem) -> impl Iterator<Item = Method> + '_ {
    [
        (Method::GET, item.get.is_some()),
        (Method::PUT, item.put.is_some()),
        (Method::POST, item.post.is_some()),
        (Method::DELETE, item.delete.is_some()),
        (Method::PATCH, item.patch.is_some()),
        (Method::OPTIONS, item.options.is_some()),
        (Method::HEAD, item.head.is_some()),
        (Method::TRACE, item.trace.is_some()),
    ]
    .into_iter()
    .filter_map(|(method, declared)| declared.then_some(method))
}

/// Every route of the table, registered with the router and described in `/openapi.json` by the
/// same `routes!` (ADR 0305).
pub(crate) fn api_routes() -> OpenApiRouter<AppState> {
    ROUTES.iter().fold(
        OpenApiRouter::with_openapi(openapi::ApiDoc::openapi()),
        |router, route| router.routes((route.register)()),
    )
}

/// The admission rules of the table, by method and route template.
#[derive(Debug)]
pub(crate) struct Rules(HashMap<(Method, String), Route>);

impl Rules {
    pub fn new() -> Rules {
        Rules(
            declared()
                .into_iter()
                .map(|d| ((d.method, d.path), d.route))
                .collect(),
        )
    }

    /// The rule of a request's route; `HEAD` is answered by the `GET` route. A method the path
    /// does not serve still passes admission before the router answers it 405 (axum's route
    /// layers run for it), and is admitted as the path's other routes are, so the 401 and 403 it
    /// gets stay those of the path: see [`wrong_method`].
    pub fn get(&self, method: &Method, route: &str) -> Option<Route> {
        let method = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        if let Some(rule) = self.0.get(&(method.clone(), route.to_string())) {
            return Some(*rule);
        }
        let served: Vec<(&Method, &Route)> = self
            .0
            .iter()
            .filter(|((_, path), _)| path == route)
            .map(|((m, _), rule)| (m, rule))
            .collect();
        wrong_method(method, &served)
    }
}

/// The rule for a method that a path with these routes does not serve (the router answers 405):
/// it touches what the path's `GET` route (else any of its routes) touches, and needs the right
/// its method implies (`write` for a change), unless the path's routes need a right of their own
/// (`/metrics`, the ticket route, the open routes), which it needs then. Nothing is streamed.
fn wrong_method(method: &Method, served: &[(&Method, &Route)]) -> Option<Route> {
    let by_method = |m: &Method| {
        if m == Method::GET {
            Right::Read
        } else {
            Right::Write
        }
    };
    let base = served
        .iter()
        .find(|(m, _)| **m == Method::GET)
        .or_else(|| served.first())?
        .1;
    let own = served
        .iter()
        .find(|(m, rule)| rule.right != Some(by_method(m)))
        .map(|(_, rule)| rule.right);
    Some(Route {
        right: own.unwrap_or(Some(by_method(method))),
        stream: false,
        ..*base
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_declares_one_operation_and_its_parameters() {
        let declared = declared();
        assert_eq!(
            declared.len(),
            ROUTES.len(),
            "an entry has not one operation"
        );
        let mut seen = std::collections::BTreeSet::new();
        for d in &declared {
            assert!(
                seen.insert((d.method.to_string(), d.path.clone())),
                "{} {} is in the table twice",
                d.method,
                d.path
            );
            if let Touches::QueueInPath(param) = d.route.touches {
                assert!(
                    d.path.contains(&format!("{{{param}}}")),
                    "{} {} has no {{{param}}}",
                    d.method,
                    d.path
                );
            }
            // Only the ops routes are open, and every `/v1` route is scoped.
            assert_eq!(
                d.route.right.is_none(),
                !d.path.starts_with("/v1") && d.path != "/metrics"
            );
            assert_eq!(
                d.route.touches == Touches::Nothing,
                !d.path.starts_with("/v1"),
                "{} {}",
                d.method,
                d.path
            );
            // A write by method needs `write`, except asking for a stream ticket; and a read by
            // method needs only `read`, except webhooks (a listing shows where the events go,
            // ADR 0395).
            let both_ways = d.path == "/v1/stream-tickets";
            if d.path.starts_with("/v1/webhooks") {
                assert_eq!(d.route.right, Some(Right::Write), "{} {}", d.method, d.path);
            } else if d.path.starts_with("/v1") && !both_ways {
                let write = d.method != Method::GET;
                assert_eq!(
                    d.route.right == Some(Right::Write),
                    write,
                    "{} {}",
                    d.method,
                    d.path
                );
            }
        }
    }

    /// A method a path does not serve is admitted as before the table: the right its method
    /// implies on the `/v1` routes, the path's own right elsewhere and on the ticket route, and
    /// the scope of the path.
    #[test]
    fn a_method_the_path_does_not_serve_keeps_the_path_rule() {
        let rules = Rules::new();
        let rule = |method: Method, path: &str| {
            rules
                .get(&method, path)
                .map(|r| (r.right, r.touches, r.stream))
        };
        assert_eq!(
            rule(Method::DELETE, "/metrics"),
            Some((Some(Right::Metrics), Touches::Nothing, false))
        );
        assert_eq!(
            rule(Method::PUT, "/v1/stream-tickets"),
            Some((Some(Right::Read), Touches::NamespaceInBody, false))
        );
        assert_eq!(
            rule(Method::DELETE, "/v1/runs/{run_id}"),
            Some((Some(Right::Write), Touches::NamespaceInQuery, false))
        );
        assert_eq!(
            rule(Method::DELETE, "/v1/runs"),
            Some((Some(Right::Write), Touches::NamespaceInQuery, false))
        );
        assert_eq!(
            rule(Method::POST, "/v1/runs/{run_id}/stream"),
            Some((Some(Right::Write), Touches::NamespaceInQuery, false))
        );
        assert_eq!(
            rule(Method::POST, "/v1/queues/{queue}/in-flight"),
            Some((Some(Right::Write), QUEUE, false))
        );
        assert_eq!(
            rule(Method::POST, "/healthz"),
            Some((None, Touches::Nothing, false))
        );
        assert_eq!(
            rule(Method::HEAD, "/v1/runs/{run_id}/stream"),
            Some((Some(Right::Read), Touches::NamespaceInQuery, true))
        );
        assert_eq!(rule(Method::GET, "/v1/nope"), None);
    }
}
