use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const HOW_TO_GET_REDIS: &str = "no Redis for the tests: set REDIS_URL=redis://127.0.0.1:6379, or put \
`redis-server` on the PATH (Debian: `apt-get install redis-server`), or build with \
`--features switchyard-conformance/testcontainers` and run a Docker engine";

/// The Redis every test of this binary shares. See the module docs for how it is found.
///
/// # Panics
/// When no Redis can be found or started: the test fails with instructions, it is never skipped.
pub fn redis_url() -> String {
    static SHARED: OnceLock<Result<String, String>> = OnceLock::new();
    SHARED
        .get_or_init(find_or_start_redis)
        .clone()
        .unwrap_or_else(|why| panic!("{HOW_TO_GET_REDIS}\n({why})"))
}

fn find_or_start_redis() -> Result<String, String> {
    if let Ok(url) = std::env::var("REDIS_URL")
        && !url.is_empty()
    {
        return Ok(url);
    }
    let spawn_error = match RedisServer::start() {
        Ok(server) => {
            let url = server.url();
            // The shared server lives as long as the test binary; its watchdog stops it at exit.
            std::mem::forget(server);
            return Ok(url);
        }
        Err(e) => e,
    };
    container::start().map_err(|container_error| {
        format!("redis-server: {spawn_error}; container: {container_error}")
    })
}

/// A `redis-server` process owned by a test, on a free port of 127.0.0.1, with its data in a
/// temporary directory. It is killed when this value drops, and by a watchdog when the test binary
/// exits in any way (so a panicking or killed test leaves no server behind).
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    extra_args: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with persistence off.
    pub fn start() -> Result<Self, String> {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments, e.g. `["--appendonly", "yes"]`.
    pub fn start_with(extra_args: &[&str]) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("switchyard-redis-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let mut server = RedisServer {
            port: 0,
            dir,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        let data_dir = server.dir.path().to_path_buf();
        let mut last_error = String::new();
        // A free port can be taken between probing and binding; try a few.
        for _ in 0..5 {
            server.port = super::free_port().map_err(|e| format!("free port: {e}"))?;
            match server.spawn(&data_dir) {
                Ok(()) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    fn spawn(&mut self, data_dir: &Path) -> Result<(), String> {
        let mut cmd = Command::new("redis-server");
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(data_dir)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        spawn_watchdog(child.id());
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!("redis-server exited at start: {status}"));
            }
            if redis_cmd(&self.url(), &["PING"]).is_ok_and(|r| r == "PONG") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err("redis-server did not answer PING within 10 s".into())
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data directory (AOF and RDB files live here across restarts).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Kills the server with SIGKILL, as a crash would. Its data directory stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// True while the server process runs.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the server again on the same port and data directory (after [`RedisServer::kill`]).
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let dir = self.dir.path().to_path_buf();
        // The port was ours a moment ago; retry briefly while the kernel releases it.
        let mut last = String::new();
        for _ in 0..50 {
            match self.spawn(&dir) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(last)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Kills `pid` once this process is gone, whatever way it ends.
fn spawn_watchdog(pid: u32) {
    let me = std::process::id();
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 1; done; kill -9 {pid} 2>/dev/null; exit 0"
    );
    let _ = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// Sends one command to the Redis at `url` over a fresh connection and returns the reply as text
/// (simple strings, integers and bulk strings; arrays joined by newlines). For harness checks and
/// fault injection in tests, not for adapters.
pub fn redis_cmd(url: &str, args: &[&str]) -> Result<String, String> {
    let addr = url
        .trim_start_matches("redis://")
        .rsplit_once('@')
        .map_or_else(|| url.trim_start_matches("redis://"), |(_, a)| a)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut stream =
        TcpStream::connect_timeout(&sock, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut frame = format!("*{}\r\n", args.len());
    for a in args {
        frame.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream
        .write_all(frame.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    read_reply(&mut reader)
}

fn read_reply(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let line = line.trim_end_matches("\r\n");
    let (tag, rest) = line.split_at(line.len().min(1));
    match tag {
        "+" | ":" => Ok(rest.to_string()),
        "-" => Err(rest.to_string()),
        "$" => {
            let len: i64 = rest.parse().map_err(|e| format!("bad bulk length: {e}"))?;
            if len < 0 {
                return Ok(String::new());
            }
            let mut buf = vec![0u8; len as usize + 2];
            reader.read_exact(&mut buf).map_err(|e| e.to_string())?;
            buf.truncate(len as usize);
            Ok(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" => {
            let n: i64 = rest.parse().map_err(|e| format!("bad array length: {e}"))?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(reader)?);
            }
            Ok(items.join("\n"))
        }
        other => Err(format!("unexpected reply type {other:?}")),
    }
}

#[cfg(feature = "testcontainers")]
mod container {
    use testcontainers::core::{IntoContainerPort, WaitFor};
    use testcontainers::runners::SyncRunner;
    use testcontainers::{Container, GenericImage};

    /// Starts `redis:7.2` and keeps it for the life of the test binary.
    pub(super) fn start() -> Result<String, String> {
        let container: Container<GenericImage> = GenericImage::new("redis", "7.2")
            .with_exposed_port(6379.tcp())
            .with_wait_for(WaitFor::message_on_stdout("Ready to accept connections"))
            .start()
            .map_err(|e| e.to_string())?;
        let host = container.get_host().map_err(|e| e.to_string())?;
        let port = container
            .get_host_port_ipv4(6379.tcp())
            .map_err(|e| e.to_string())?;
        let url = format!("redis://{host}:{port}");
        std::mem::forget(container);
        Ok(url)
    }
}

#[cfg(not(feature = "testcontainers"))]
mod container {
    pub(super) fn start() -> Result<String, String> {
        Err("the `testcontainers` feature is off".into())
    }
}
