//! A private `redis-server` for a run without `--url`: a free port, no persistence, enough
//! clients for the subscriber cases; killed when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) struct PrivateRedis {
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl PrivateRedis {
    pub fn start() -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("switchyard-bench-redis-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let mut last = String::new();
        // A free port can be taken between probing and binding; try a few.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("free port: {e}"))?
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--maxclients", "20000"])
                .arg("--dir")
                .arg(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run redis-server (is it on PATH?): {e}"))?;
            let mut child = child;
            if wait_ready(&mut child, port) {
                return Ok(PrivateRedis {
                    port,
                    child,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            last = format!("redis-server on port {port} did not answer PING");
        }
        Err(last)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

fn wait_ready(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 16];
            if s.write_all(b"PING\r\n").is_ok()
                && s.read(&mut buf)
                    .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
