//! The listener (ADR 0183): plain TCP or TLS (rustls), at most `max_connections` open connections
//! (past it a new one gets a 503 and is closed), a header-read timeout (which also closes a silent
//! new socket), an idle timeout for keep-alive connections, and an accept loop that backs off when
//! the process is out of file descriptors instead of spinning.
//!
//! hyper-util's connection builder is driven directly rather than through `axum::serve`, which
//! offers none of these.

use std::convert::Infallible;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use switchyard_kit::Limits;
use switchyard_kit::core::{Error, Result};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tower::ServiceExt;

/// What a connection past `max_connections` reads before it is closed.
fn full_response() -> Vec<u8> {
    let body = r#"{"error":"too_many_connections","message":"the gateway is at limits.max_connections; retry later"}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// How often a connection's deadlines are looked at again.
const RECHECK: Duration = Duration::from_millis(500);

/// The slowest the accept loop retries after an error such as EMFILE.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Loads a PEM certificate chain and private key for the listener.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::config("--tls-cert", format!("{}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Error::config(
            "--tls-cert",
            format!("{}: no CERTIFICATE in the file", cert.display()),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::config("--tls-key", format!("{}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config("--tls-cert", e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Error::config("--tls-key", format!("does not fit the certificate: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `app` on `listener` until `stop` turns true, then lets open connections finish (each is
/// told to close after its current request) and returns when all are closed.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let timeouts = Timeouts {
        header: Duration::from_secs(limits.header_read_secs),
        idle: Duration::from_secs(limits.idle_secs),
    };
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|closing| *closing) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = Duration::from_millis(5);
                stream
            }
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                // EMFILE / ENFILE / ENOBUFS: wait for connections to close instead of spinning.
                tracing::error!(error = %e, retry_in = ?backoff, "accept failed");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = stop.wait_for(|closing| *closing) => break,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!("limits.max_connections reached: refusing a connection");
            if tls.is_none() {
                tokio::spawn(refuse(stream));
            }
            continue;
        };
        let app = app.clone();
        let tls = tls.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, app, timeouts, stop).await,
                Some(tls) => {
                    match tokio::time::timeout(timeouts.header, tls.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, app, timeouts, stop).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    // Every connection holds one slot until it closes.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&full_response()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Errors that concern one connection only: accept the next one at once.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset | Interrupted
    )
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
}

/// One connection's clock: requests in progress (a response counts until its body is dropped),
/// when that count last changed, and when the bytes of a not-yet-parsed request head started to
/// arrive (a new connection counts as waiting for a head from the start).
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    clock: Mutex<Clock>,
}

#[derive(Debug, Clone, Copy)]
struct Clock {
    changed: Instant,
    head_since: Option<Instant>,
}

impl Activity {
    fn new() -> Arc<Activity> {
        let now = Instant::now();
        Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            clock: Mutex::new(Clock {
                changed: now,
                head_since: Some(now),
            }),
        })
    }

    fn with_clock(&self, f: impl FnOnce(&mut Clock)) {
        if let Ok(mut clock) = self.clock.lock() {
            f(&mut clock);
        }
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.with_clock(|c| {
            c.changed = Instant::now();
            c.head_since = None;
        });
        InFlight(self.clone())
    }

    /// Bytes arrived: between requests, they start the next head.
    fn read_some(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            self.with_clock(|c| {
                c.head_since.get_or_insert_with(Instant::now);
            });
        }
    }

    /// Resolves when the connection should close: a head took longer than `header`, or nothing
    /// was in progress (and nothing arrived) for `idle`. The state changes under it (a request
    /// starts or ends, a head begins), so it looks again at least every [`RECHECK`].
    async fn expired(&self, t: Timeouts) {
        loop {
            let wait = if self.in_flight.load(Ordering::SeqCst) > 0 {
                RECHECK
            } else {
                let clock = self.clock.lock().map(|c| *c).ok();
                let deadline = clock.map(|c| match c.head_since {
                    Some(since) => since + t.header,
                    None => c.changed + t.idle,
                });
                match deadline.and_then(|d| d.checked_duration_since(Instant::now())) {
                    Some(left) if !left.is_zero() => left.min(RECHECK),
                    _ => return,
                }
            };
            tokio::time::sleep(wait).await;
        }
    }
}

struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.with_clock(|c| c.changed = Instant::now());
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive.
struct Watched<I> {
    io: I,
    activity: Arc<Activity>,
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.read_some();
        }
        polled
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

async fn serve_connection<I>(
    io: I,
    app: Router,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Activity::new();
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = activity.begin();
            let app = app.clone();
            async move {
                let response = match app.oneshot(request.map(Body::new)).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &in_flight;
                        frame
                    }))
                }))
            }
        })
    };
    let io = Watched {
        io,
        activity: activity.clone(),
    };
    // The head and idle deadlines are kept by `Activity` (hyper's own head timer would also run
    // while a kept-alive connection merely waits, merging the two settings).
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = activity.expired(timeouts) => {
                // Nothing is in progress: dropping the connection loses no response, and a
                // half-sent head cannot hold it open. (A request that began meanwhile keeps it.)
                if activity.in_flight.load(Ordering::SeqCst) == 0 {
                    tracing::debug!("closing a connection that sat idle or sent its head too slowly");
                    break;
                }
            }
            _ = stop.wait_for(|c| *c), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}
