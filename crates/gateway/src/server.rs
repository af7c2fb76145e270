//! The listener (ADR 0183): plain TCP or TLS (rustls), at most `max_connections` open connections
//! (past it a new one gets a 503 and is closed), a header-read timeout (which also closes a silent
//! new socket), an idle timeout for keep-alive connections, and an accept loop that backs off when
//! the process is out of file descriptors instead of spinning.
//!
//! Two more bounds keep probes and other clients served when one peer floods the port with
//! silent sockets (ADR 0354): connections that have not yet sent a complete request head count
//! against their peer's address (`max_pending_per_ip`; past it that peer's oldest such connection
//! is closed), and `health_connections` more connections past `max_connections` serve `/healthz`
//! and `/readyz` only.
//!
//! hyper-util's connection builder is driven directly rather than through `axum::serve`, which
//! offers none of these.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
use tokio::sync::{Notify, Semaphore, watch};
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

/// HTTPS for [`Gateway::serve`](crate::Gateway::serve): a certificate chain and its private
/// key, loaded once (HTTP/1.1 over TLS 1.2 or 1.3, rustls with the ring provider).
#[derive(Clone)]
pub struct Tls(TlsAcceptor);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The acceptor holds the private key: nothing of it is printed.
        f.write_str("Tls(..)")
    }
}

impl Tls {
    /// Loads a PEM certificate chain and the PEM private key that fits it. A missing file, a
    /// file without a certificate, or a key that does not fit is [`Error::Config`] naming
    /// `--tls-cert` or `--tls-key` and the file.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls> {
        tls_acceptor(cert, key).map(Tls)
    }
}

/// Loads a PEM certificate chain and private key for the listener.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
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

/// In the extensions of a request that came on a connection accepted past `max_connections`, from
/// the `health_connections` reserve: only `/healthz` and `/readyz` are served on it (the edge
/// answers anything else 503 `too_many_connections`).
#[derive(Debug, Clone, Copy)]
pub struct HealthOnly;

/// The address a peer's connections are counted under: the IP, with an IPv6 address cut to its
/// /64 (one host is usually handed a whole /64, and IPv4-mapped addresses are their IPv4 one).
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
        v4 => v4,
    }
}

/// The connections of each peer that have not yet sent a complete request head, oldest first.
/// A new one past the peer's limit closes the oldest: the flood then only churns its own sockets,
/// while a real client's connection, which sends its head at once, is served. Only peers with
/// such connections have an entry, so the table is bounded by the open connections.
#[derive(Debug)]
struct Pending {
    per_ip: usize,
    next: AtomicU64,
    peers: Mutex<Peers>,
}

/// Each peer's connections without a request head: their ids and eviction signals, oldest first.
type Peers = HashMap<IpAddr, VecDeque<(u64, Arc<Notify>)>>;

impl Pending {
    fn new(per_ip: usize) -> Arc<Pending> {
        Arc::new(Pending {
            per_ip: per_ip.max(1),
            next: AtomicU64::new(0),
            peers: Mutex::new(HashMap::new()),
        })
    }

    fn peers(&self) -> std::sync::MutexGuard<'_, Peers> {
        match self.peers.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Counts a new connection of `ip` as waiting for its first head.
    fn enter(self: &Arc<Self>, ip: IpAddr) -> Arc<Waiting> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evict = Arc::new(Notify::new());
        let key = peer_key(ip);
        let mut peers = self.peers();
        let queue = peers.entry(key).or_default();
        queue.push_back((id, evict.clone()));
        if queue.len() > self.per_ip
            && let Some((_, oldest)) = queue.pop_front()
        {
            tracing::debug!(peer = %key, "limits.max_pending_per_ip reached: closing the peer's oldest connection without a request");
            // A stored permit: the connection sees it even if it is not waiting on it yet.
            oldest.notify_one();
        }
        Arc::new(Waiting {
            pending: self.clone(),
            key,
            id,
            evict,
            done: AtomicBool::new(false),
        })
    }
}

/// One connection's place in [`Pending`], left when its first head is complete or it closes.
#[derive(Debug)]
struct Waiting {
    pending: Arc<Pending>,
    key: IpAddr,
    id: u64,
    evict: Arc<Notify>,
    done: AtomicBool,
}

impl Waiting {
    fn leave(&self) {
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut peers = self.pending.peers();
        if let Some(queue) = peers.get_mut(&self.key) {
            queue.retain(|(id, _)| *id != self.id);
            if queue.is_empty() {
                peers.remove(&self.key);
            }
        }
    }

    fn left(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// Resolves when a newer connection of the same peer pushed this one out.
    async fn evicted(&self) {
        self.evict.notified().await;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Serves `app` on `listener` until `stop` turns true, then lets open connections finish (each is
/// told to close after its current request) and returns when all are closed.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    tls: Option<Tls>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let health_slots = Arc::new(Semaphore::new(limits.health_connections));
    let pending = Pending::new(limits.max_pending_per_ip);
    let timeouts = Timeouts {
        header: Duration::from_secs(limits.header_read_secs),
        idle: Duration::from_secs(limits.idle_secs),
    };
    let tls = tls.map(|Tls(acceptor)| acceptor);
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|closing| *closing) => break,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::from_millis(5);
                (stream, peer)
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
        let (slot, health_only) = match slots.clone().try_acquire_owned() {
            Ok(slot) => (slot, false),
            Err(_) => match health_slots.clone().try_acquire_owned() {
                Ok(slot) => (slot, true),
                Err(_) => {
                    tracing::warn!("limits.max_connections reached: refusing a connection");
                    if tls.is_none() {
                        tokio::spawn(refuse(stream));
                    }
                    continue;
                }
            },
        };
        let waiting = pending.enter(peer.ip());
        let conn = Conn {
            app: app.clone(),
            timeouts,
            stop: stop.clone(),
            waiting,
            health_only,
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, conn).await,
                Some(tls) => {
                    let handshake = tokio::time::timeout(timeouts.header, tls.accept(stream));
                    let waiting = conn.waiting.clone();
                    tokio::select! {
                        done = handshake => match done {
                            Ok(Ok(stream)) => serve_connection(stream, conn).await,
                            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        },
                        () = waiting.evicted() => {}
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
    let spare = u32::try_from(limits.health_connections).unwrap_or(u32::MAX);
    let _ = health_slots.acquire_many(spare).await;
}

/// What a connection's task needs besides its socket.
struct Conn {
    app: Router,
    timeouts: Timeouts,
    stop: watch::Receiver<bool>,
    /// Its place among its peer's connections without a request head yet.
    waiting: Arc<Waiting>,
    /// Accepted from the `health_connections` reserve.
    health_only: bool,
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

async fn serve_connection<I>(io: I, conn: Conn)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Conn {
        app,
        timeouts,
        mut stop,
        waiting,
        health_only,
    } = conn;
    let activity = Activity::new();
    let service = {
        let activity = activity.clone();
        let waiting = waiting.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = activity.begin();
            // A complete head: the connection no longer counts against its peer's pending ones.
            waiting.leave();
            let app = app.clone();
            let mut request = request.map(Body::new);
            if health_only {
                request.extensions_mut().insert(HealthOnly);
            }
            async move {
                let response = match app.oneshot(request).await {
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
        // A reserve connection answers one probe and closes, giving its place back.
        .keep_alive(!health_only);
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
            () = waiting.evicted(), if !waiting.left() => {
                // A newer connection of the same peer pushed this one out before it sent a
                // request head: nothing is in progress on it.
                if activity.in_flight.load(Ordering::SeqCst) == 0 {
                    tracing::debug!("closing a connection that sent no request head (max_pending_per_ip)");
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
