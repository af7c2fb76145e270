//! PostgreSQL for tests: a private server started with `initdb` and `pg_ctl`, or `POSTGRES_URL`,
//! or a container; per-test schemas and databases; a few synchronous SQL helpers.

use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const HOW_TO_GET_POSTGRES: &str = "no PostgreSQL for the tests: install Debian's `postgresql` \
package (`apt-get install postgresql`; the harness finds initdb and pg_ctl on the PATH or in \
/usr/lib/postgresql/*/bin and starts a private server), or set \
POSTGRES_URL=postgres://user:password@host:5432/database (a user that may CREATE DATABASE), or \
build with `--features switchyard-conformance/testcontainers` and run a Docker engine";

/// The PostgreSQL every test of this binary shares, as a `postgres://` URL of a user that may
/// create databases and schemas.
///
/// `POSTGRES_URL` if set (an explicit choice wins, as `REDIS_URL` does); otherwise a private
/// server this binary starts with `initdb` and `pg_ctl` (fsync off; stopped and its directory
/// removed when the binary exits); otherwise, with the `testcontainers` feature and a Docker
/// engine, a `postgres:16` container.
///
/// # Panics
/// When no PostgreSQL can be found or started: the test fails with instructions, it is never
/// skipped.
pub fn postgres_url() -> String {
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(find_or_start_postgres)
        .clone()
        .unwrap_or_else(|why| panic!("{HOW_TO_GET_POSTGRES}\n({why})"))
}

fn find_or_start_postgres() -> Result<String, String> {
    if let Ok(url) = std::env::var("POSTGRES_URL")
        && !url.is_empty()
    {
        return Ok(url);
    }
    let spawn_error = match PostgresServer::start() {
        Ok(server) => {
            let url = server.url();
            // The shared server lives as long as the test binary; its watchdog stops it at exit
            // and removes its directory.
            std::mem::forget(server);
            return Ok(url);
        }
        Err(e) => e,
    };
    container::start().map_err(|container_error| {
        format!("initdb/pg_ctl: {spawn_error}; container: {container_error}")
    })
}

/// A fresh schema name for one test, `swt_<tag>_<random>` (lowercase, so it needs no quoting).
/// Adapters create their schema when they open, so this is all a test needs for isolation on
/// the shared server.
pub fn unique_schema(tag: &str) -> String {
    let tag: String = tag
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    format!("swt_{tag}_{:016x}", rand::random::<u64>())
}

/// Creates a fresh database on the server of `url` and returns the URL naming it. For tests
/// that need a whole database (the default schema, several adapters side by side); a schema
/// ([`unique_schema`]) is cheaper when one will do.
///
/// # Panics
/// When the database cannot be created.
pub fn fresh_database(url: &str, tag: &str) -> String {
    let name = unique_schema(tag);
    postgres_exec(url, &format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("cannot create a test database on {url}: {e}"));
    with_database(url, &name)
}

/// `url` naming the database `database` instead of its own.
pub fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (before_query, query) = match rest.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or_default();
    match query {
        Some(query) => format!("{scheme}://{authority}/{database}?{query}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

/// Runs `sql` (one or more statements, simple protocol) on a fresh connection to `url`. For
/// test setup and fault injection (`pg_terminate_backend`), not for adapters.
pub fn postgres_exec(url: &str, sql: &str) -> Result<(), String> {
    postgres_query(url, sql).map(drop)
}

/// Runs `sql` on a fresh connection to `url` and returns every row of its results as text
/// (`None` for NULL).
pub fn postgres_query(url: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    use sqlx::{Connection, Row};
    let url = url.to_string();
    let sql = sql.to_string();
    block_on(move || async move {
        let mut conn = sqlx::PgConnection::connect(&url)
            .await
            .map_err(|e| e.to_string())?;
        let rows = sqlx::raw_sql(&sql)
            .fetch_all(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let _ = conn.close().await;
        // The simple protocol sends every value as text.
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        row.try_get_unchecked::<Option<String>, _>(i)
                            .map_err(|e| e.to_string())
                    })
                    .collect()
            })
            .collect()
    })
}

/// Runs the future `make` returns to completion on a runtime of its own, on another thread, so
/// the synchronous helpers work inside and outside a tokio runtime.
fn block_on<T, F>(make: impl FnOnce() -> F + Send + 'static) -> Result<T, String>
where
    T: Send + 'static,
    F: Future<Output = Result<T, String>>,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(make())
    })
    .join()
    .map_err(|_| "the helper thread panicked".to_string())?
}

/// A private PostgreSQL owned by a test: `initdb` in a temporary directory, `pg_ctl start` on a
/// free port of 127.0.0.1 (and a unix socket in that directory). A test can stop, kill (SIGKILL
/// of the server and all its backends, as a crash would) and restart it on the same data.
///
/// Running as root, the server runs as the `postgres` system user (`initdb` refuses root), which
/// owns the directory. The server is killed and the directory removed when this value drops,
/// and by a watchdog when the test binary exits in any way.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: tempfile::TempDir,
    bin: PathBuf,
    run_as: Option<String>,
    fsync: bool,
    pid: Option<u32>,
}

impl PostgresServer {
    /// Starts a server with fsync off: fast, and durable across a killed server process but
    /// not across a machine crash (enough for every test but power-loss ones).
    pub fn start() -> Result<Self, String> {
        Self::start_with(false)
    }

    /// Starts a server with fsync on, for fault tests that check what a crash keeps.
    pub fn start_durable() -> Result<Self, String> {
        Self::start_with(true)
    }

    fn start_with(fsync: bool) -> Result<Self, String> {
        let bin = find_bin_dir()?;
        let run_as = if running_as_root() {
            Some("postgres".to_string())
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("switchyard-pg-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let mut server = PostgresServer {
            port: 0,
            dir,
            bin,
            run_as,
            fsync,
            pid: None,
        };
        if let Some(user) = &server.run_as {
            let (uid, gid) = system_user(user)?;
            std::os::unix::fs::chown(server.dir.path(), Some(uid), Some(gid)).map_err(|e| {
                format!("cannot give {} to {user}: {e}", server.dir.path().display())
            })?;
        }
        let data = server.data_dir();
        let out = server.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        if !out.status.success() {
            return Err(format!("initdb failed: {}", output_text(&out)));
        }
        let mut last_error = String::new();
        // A free port can be taken between probing and binding; try a few.
        for _ in 0..5 {
            server.port = super::free_port().map_err(|e| format!("free port: {e}"))?;
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Runs one of the server's programs, as the server's user.
    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<Output, String> {
        let program = self.bin.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(&program);
                cmd
            }
            None => Command::new(&program),
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=400",
            self.port,
            self.dir.path().display()
        );
        if !self.fsync {
            options.push_str(" -F");
        }
        let data = self.data_dir();
        let log = self.dir.path().join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "start".as_ref(),
            ],
        )?;
        if !out.status.success() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            return Err(format!(
                "pg_ctl start failed: {}; server log: {}",
                output_text(&out),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ));
        }
        let pid = std::fs::read_to_string(data.join("postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next()?.trim().parse::<u32>().ok())
            .ok_or("pg_ctl started a server but postmaster.pid has no pid")?;
        self.pid = Some(pid);
        spawn_watchdog(pid, self.dir.path());
        Ok(())
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, a superuser).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory (it stays across kills and restarts).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The postmaster's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Stops the server cleanly (`pg_ctl stop -m fast`: open transactions are rolled back,
    /// connections closed). Its data stays.
    pub fn stop(&mut self) {
        if self.pid.is_none() {
            return;
        }
        let data = self.data_dir();
        let _ = self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        if self.is_running() {
            self.kill();
        }
        self.pid = None;
    }

    /// Kills the server and every backend with SIGKILL, as a crash would. Its data stays;
    /// [`PostgresServer::restart`] recovers it.
    pub fn kill(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        // pg_ctl starts the postmaster in a session of its own: its process group holds every
        // backend, and all of them must go, or the restart finds the shared memory in use.
        let _ = Command::new("sh")
            .args([
                "-c",
                &format!("kill -9 -- -{pid} 2>/dev/null; kill -9 {pid} 2>/dev/null"),
            ])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// True while the server process runs.
    pub fn is_running(&self) -> bool {
        self.pid.is_some_and(alive)
    }

    /// Starts the server again on the same port and data directory (after a stop or a kill;
    /// a running server is killed first). After a kill the server recovers from its WAL.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let mut last = String::new();
        // The port was ours a moment ago; retry briefly while the kernel releases it.
        for _ in 0..20 {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last)
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn output_text(out: &Output) -> String {
    format!(
        "{} {}",
        String::from_utf8_lossy(&out.stdout).trim(),
        String::from_utf8_lossy(&out.stderr).trim()
    )
}

/// Where `initdb` and `pg_ctl` are: the directory of the ones on the PATH, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian keeps them off the PATH).
fn find_bin_dir() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file());
    if let Some(dir) = on_path {
        return Ok(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| {
            "initdb is not on the PATH and /usr/lib/postgresql does not exist".to_string()
        })?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "no initdb on the PATH nor in /usr/lib/postgresql/*/bin".to_string())
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective user).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The uid and gid of a system user, from `/etc/passwd`.
fn system_user(user: &str) -> Result<(u32, u32), String> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&user))
                .then(|| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))?
        })
        .ok_or_else(|| {
            format!(
                "running as root, the server must run as the `{user}` user (initdb refuses root), \
                 and there is none: install Debian's postgresql package, or `useradd -r {user}`, \
                 or run the tests as another user"
            )
        })
}

fn alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Once this process is gone, whatever way it ends: kills the server's process group and
/// removes its directory (a cluster is tens of megabytes; none may pile up in /tmp).
fn spawn_watchdog(pid: u32, dir: &Path) {
    let me = std::process::id();
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 1; done; \
         kill -9 -- -{pid} 2>/dev/null; kill -9 {pid} 2>/dev/null; sleep 1; rm -rf '{}'; exit 0",
        dir.display()
    );
    let _ = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

#[cfg(feature = "testcontainers")]
mod container {
    use std::time::{Duration, Instant};

    use testcontainers::core::{IntoContainerPort, WaitFor};
    use testcontainers::runners::SyncRunner;
    use testcontainers::{Container, GenericImage, ImageExt};

    /// Starts `postgres:16` and keeps it for the life of the test binary.
    pub(super) fn start() -> Result<String, String> {
        let container: Container<GenericImage> = GenericImage::new("postgres", "16")
            .with_exposed_port(5432.tcp())
            .with_wait_for(WaitFor::message_on_stderr(
                "database system is ready to accept connections",
            ))
            .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust")
            .start()
            .map_err(|e| e.to_string())?;
        let host = container.get_host().map_err(|e| e.to_string())?;
        let port = container
            .get_host_port_ipv4(5432.tcp())
            .map_err(|e| e.to_string())?;
        let url = format!("postgres://postgres@{host}:{port}/postgres");
        std::mem::forget(container);
        // The image restarts the server once after its first-run setup; wait for the real one.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match super::postgres_exec(&url, "SELECT 1") {
                Ok(()) => return Ok(url),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
}

#[cfg(not(feature = "testcontainers"))]
mod container {
    pub(super) fn start() -> Result<String, String> {
        Err("the `testcontainers` feature is off".into())
    }
}
