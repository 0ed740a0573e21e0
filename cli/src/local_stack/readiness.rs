//! Readiness probes for the services `loopgate up` starts: each answers "ready now?" within a
//! short timeout, and callers poll them until a deadline.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

async fn connect(addr: SocketAddr) -> Option<TcpStream> {
    timeout(PROBE_TIMEOUT, TcpStream::connect(addr))
        .await
        .ok()?
        .ok()
}

/// Is something already accepting connections on `addr`?
pub async fn port_in_use(addr: SocketAddr) -> bool {
    connect(addr).await.is_some()
}

/// Reads one CRLF-terminated line, within the probe timeout.
async fn first_line(stream: TcpStream) -> Option<String> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    timeout(PROBE_TIMEOUT, reader.read_line(&mut line))
        .await
        .ok()?
        .ok()?;
    Some(line)
}

/// nats-server greets every client with `INFO {...}`.
pub async fn nats_ready(port: u16) -> bool {
    let Some(stream) = connect(loopback(port)).await else {
        return false;
    };
    first_line(stream)
        .await
        .is_some_and(|line| line.starts_with("INFO "))
}

/// redis-server accepts `AUTH password` and answers `PING` with `+PONG` once it has loaded its
/// data (`-LOADING` before; `-WRONGPASS` for another password). `password` is hex: it needs no
/// quoting in the inline command.
pub async fn redis_ready(port: u16, password: &str) -> bool {
    let Some(mut stream) = connect(loopback(port)).await else {
        return false;
    };
    let command = format!("AUTH {password}\r\nPING\r\n");
    if timeout(PROBE_TIMEOUT, stream.write_all(command.as_bytes()))
        .await
        .map_or(true, |r| r.is_err())
    {
        return false;
    }
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        match timeout(PROBE_TIMEOUT, reader.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => replies.push(line),
            _ => return false,
        }
    }
    replies[0].starts_with("+OK") && replies[1].starts_with("+PONG")
}

/// A replica is ready once `INFO replication` says its link to the primary is up (it has
/// loaded the primary's data).
pub async fn redis_replica_synced(port: u16, password: &str) -> bool {
    let Some(mut stream) = connect(loopback(port)).await else {
        return false;
    };
    let command = format!("AUTH {password}\r\nINFO replication\r\n");
    if timeout(PROBE_TIMEOUT, stream.write_all(command.as_bytes()))
        .await
        .map_or(true, |r| r.is_err())
    {
        return false;
    }
    let mut reader = BufReader::new(stream);
    let mut auth = String::new();
    if !matches!(timeout(PROBE_TIMEOUT, reader.read_line(&mut auth)).await, Ok(Ok(n)) if n > 0)
        || !auth.starts_with("+OK")
    {
        return false;
    }
    let mut header = String::new();
    if !matches!(timeout(PROBE_TIMEOUT, reader.read_line(&mut header)).await, Ok(Ok(n)) if n > 0) {
        return false;
    }
    let Some(len) = header
        .strip_prefix('$')
        .and_then(|n| n.trim().parse::<usize>().ok())
    else {
        return false;
    };
    let mut body = vec![0u8; len];
    if !matches!(
        timeout(PROBE_TIMEOUT, reader.read_exact(&mut body)).await,
        Ok(Ok(_))
    ) {
        return false;
    }
    String::from_utf8_lossy(&body)
        .lines()
        .any(|l| l.trim() == "master_link_status:up")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A one-connection server that answers with `reply` (after reading a line if `read_first`).
    async fn fake_server(reply: &'static [u8], read_first: bool) -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            if read_first {
                let mut buf = [0u8; 64];
                let _ = socket.read(&mut buf).await;
            }
            let _ = socket.write_all(reply).await;
        });
        port
    }

    #[tokio::test]
    async fn probes_recognize_their_servers() {
        let nats = fake_server(b"INFO {\"server_id\":\"x\"}\r\n", false).await;
        assert!(nats_ready(nats).await);
        let not_nats = fake_server(b"+PONG\r\n", false).await;
        assert!(!nats_ready(not_nats).await);
        let redis = fake_server(b"+OK\r\n+PONG\r\n", true).await;
        assert!(redis_ready(redis, "pw").await);
        let loading = fake_server(
            b"+OK\r\n-LOADING Redis is loading the dataset in memory\r\n",
            true,
        )
        .await;
        assert!(!redis_ready(loading, "pw").await);
        let wrong = fake_server(b"-WRONGPASS invalid password\r\n+PONG\r\n", true).await;
        assert!(!redis_ready(wrong, "pw").await);
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let closed_port = listener.local_addr().unwrap().port();
        assert!(port_in_use(loopback(closed_port)).await);
        drop(listener);
        assert!(!redis_ready(closed_port, "pw").await);
        assert!(!port_in_use(loopback(closed_port)).await);
    }

    #[tokio::test]
    async fn a_replica_is_ready_once_its_link_is_up() {
        let cases: [(&'static [u8], bool); 4] = [
            (
                b"+OK\r\n$50\r\n# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n\r\n",
                true,
            ),
            (
                b"+OK\r\n$52\r\n# Replication\r\nrole:slave\r\nmaster_link_status:down\r\n\r\n",
                false,
            ),
            (b"-WRONGPASS invalid password\r\n$0\r\n\r\n", false),
            (b"+OK\r\n$100\r\nmaster_link_status:up\r\n", false),
        ];
        for (reply, ready) in cases {
            let port = fake_server(reply, true).await;
            assert_eq!(
                redis_replica_synced(port, "pw").await,
                ready,
                "{}",
                String::from_utf8_lossy(reply)
            );
        }
    }
}
