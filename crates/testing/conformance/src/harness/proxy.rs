//! A TCP proxy that loses replies: the command ran on the server, its reply never reaches the
//! client, and the client's connection is closed. This is the window in which fred re-sends
//! in-flight commands on a new connection, which a `CLIENT KILL` hardly ever lands in.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;

/// Decides, for one proxied connection, whether a chunk of the server's replies is lost (which
/// also closes the connection).
pub type LoseReply = Box<dyn FnMut(&[u8]) -> bool + Send>;

/// Starts a proxy in front of `upstream` (`host:port`) and returns its `redis://` URL. For each
/// connection it accepts it calls `per_connection` (at accept time) for that connection's
/// [`LoseReply`]; every chunk the server sends is passed to it before it is forwarded.
pub fn reply_losing_proxy(
    upstream: &str,
    per_connection: impl Fn() -> LoseReply + Send + Sync + 'static,
) -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let upstream = upstream.to_string();
    let per_connection = Arc::new(per_connection);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(&upstream) else {
                continue;
            };
            let lose = per_connection();
            let (Ok(mut c_read), Ok(mut s_write)) = (client.try_clone(), server.try_clone()) else {
                continue;
            };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c_read, &mut s_write);
                let _ = s_write.shutdown(Shutdown::Both);
            });
            std::thread::spawn(move || forward_replies(server, client, lose));
        }
    });
    Ok(format!("redis://{addr}"))
}

fn forward_replies(mut server: TcpStream, mut client: TcpStream, mut lose: LoseReply) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if lose(&buf[..n]) || client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
