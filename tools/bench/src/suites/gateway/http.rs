//! A few lines of HTTP/1.1 over a tokio socket: keep-alive requests with `Content-Length` or
//! chunked answers, and the head of an SSE stream whose frames the caller reads itself.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::measure::{Sample, err};

/// One keep-alive HTTP/1.1 connection.
pub(super) struct Http {
    pub(super) io: BufReader<TcpStream>,
}

impl Http {
    pub(super) async fn connect(port: u16) -> std::io::Result<Self> {
        let s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.set_nodelay(true)?;
        // A small buffer: SSE clients are many and their frames are short.
        Ok(Self {
            io: BufReader::with_capacity(2048, s),
        })
    }

    /// A connection for the client task `who`, or the sample that records why there is none.
    pub(super) async fn open(port: u16, who: &str) -> Result<Self, Sample> {
        Self::connect(port).await.map_err(|e| Sample {
            errors: 1,
            first_error: Some(format!("{who} connect: {e}")),
            ..Sample::default()
        })
    }

    /// `n` connections shared by closed-loop workers, or the sample that records the failure.
    pub(super) async fn pool(port: u16, n: usize) -> Result<Vec<tokio::sync::Mutex<Self>>, Sample> {
        let mut conns = Vec::with_capacity(n);
        for _ in 0..n {
            conns.push(tokio::sync::Mutex::new(Self::open(port, "client").await?));
        }
        Ok(conns)
    }

    pub(super) async fn send_head(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<()> {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if let Some(b) = body {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        self.io.get_mut().write_all(&bytes).await
    }

    /// Reads a response head; returns the status and the body length (`None`: chunked).
    pub(super) async fn read_head(&mut self) -> std::io::Result<(u16, Option<usize>)> {
        let mut line = String::new();
        if self.io.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut len = Some(0);
        loop {
            line.clear();
            if self.io.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                return Ok((status, len));
            }
            let lower = l.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = Some(v.trim().parse().map_err(std::io::Error::other)?);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                len = None;
            }
        }
    }

    pub(super) async fn read_body(&mut self, len: Option<usize>) -> std::io::Result<Vec<u8>> {
        match len {
            Some(n) => {
                let mut body = vec![0; n];
                self.io.read_exact(&mut body).await?;
                Ok(body)
            }
            None => {
                let mut body = Vec::new();
                let mut line = String::new();
                loop {
                    line.clear();
                    self.io.read_line(&mut line).await?;
                    let n =
                        usize::from_str_radix(line.trim(), 16).map_err(std::io::Error::other)?;
                    let mut chunk = vec![0; n + 2];
                    self.io.read_exact(&mut chunk).await?;
                    chunk.truncate(n);
                    body.extend(chunk);
                    if n == 0 {
                        return Ok(body);
                    }
                }
            }
        }
    }

    pub(super) async fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        self.send_head(method, path, body).await?;
        let (status, len) = self.read_head().await?;
        let body = self.read_body(len).await?;
        Ok((status, body))
    }

    /// Sends a `GET` and reads the response head (an SSE stream's body follows).
    pub(super) async fn open_stream(
        &mut self,
        path: &str,
    ) -> std::io::Result<(u16, Option<usize>)> {
        self.send_head("GET", path, None).await?;
        self.read_head().await
    }

    /// `POST` with a JSON body; any status but 2xx is an error naming the body.
    pub(super) async fn post(&mut self, path: &str, body: &Value) -> Result<(), String> {
        self.post_ok(path, body).await.map(drop)
    }

    /// `POST` with a JSON body; the 2xx answer's JSON body, any other status an error naming it.
    pub(super) async fn post_json(&mut self, path: &str, body: &Value) -> Result<Value, String> {
        let (status, body) = self.post_ok(path, body).await?;
        serde_json::from_slice(&body).map_err(|e| format!("{status} answered with {e}"))
    }

    /// `POST` with a JSON body: the 2xx status and its body, any other status an error naming
    /// the body.
    async fn post_ok(&mut self, path: &str, body: &Value) -> Result<(u16, Vec<u8>), String> {
        let bytes = serde_json::to_vec(body).map_err(err)?;
        let (status, body) = self
            .request("POST", path, Some(&bytes))
            .await
            .map_err(err)?;
        if (200..300).contains(&status) {
            Ok((status, body))
        } else {
            Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
        }
    }
}
