#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{FaultProxy, ProxyFault};

/// An upstream that echoes every byte, tagged with `tag` first on each connection.
async fn echo_server(tag: &'static [u8]) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if s.write_all(tag).await.is_err() {
                    return;
                }
                let mut buf = [0u8; 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, task)
}

/// Connects through `proxy` and reads the upstream's tag.
async fn connect(proxy: &FaultProxy, tag_len: usize) -> TcpStream {
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut tag = vec![0u8; tag_len];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut tag))
        .await
        .unwrap()
        .unwrap();
    s
}

/// Writes `msg`, reads it back, within `within`.
async fn round_trip(s: &mut TcpStream, msg: &[u8], within: Duration) -> Option<Vec<u8>> {
    s.write_all(msg).await.ok()?;
    let mut back = vec![0u8; msg.len()];
    match tokio::time::timeout(within, s.read_exact(&mut back)).await {
        Ok(Ok(_)) => Some(back),
        _ => None,
    }
}

const QUIET: Duration = Duration::from_millis(300);
const PATIENCE: Duration = Duration::from_secs(5);

#[tokio::test]
async fn passes_bytes_both_ways() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    assert_eq!(
        round_trip(&mut s, b"ping", PATIENCE).await.as_deref(),
        Some(&b"ping"[..])
    );
    assert_eq!(proxy.fault(), ProxyFault::Pass);
    assert_eq!(proxy.accepted(), 1);
}

#[tokio::test]
async fn delay_holds_every_chunk() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    proxy.delay(Duration::from_millis(200));
    let started = Instant::now();
    assert!(round_trip(&mut s, b"x", PATIENCE).await.is_some());
    // Once each way.
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    proxy.heal();
    let started = Instant::now();
    assert!(round_trip(&mut s, b"y", PATIENCE).await.is_some());
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn drop_forwards_nothing_until_healed_and_loses_nothing() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    proxy.drop_traffic();
    assert_eq!(round_trip(&mut s, b"held", QUIET).await, None);
    // A new connection waits too: not even the upstream's greeting comes through.
    let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut byte = [0u8; 1];
    assert!(tokio::time::timeout(QUIET, fresh.read_exact(&mut byte))
        .await
        .is_err());
    proxy.heal();
    let mut back = [0u8; 4];
    tokio::time::timeout(PATIENCE, s.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&back, b"held");
    tokio::time::timeout(PATIENCE, fresh.read_exact(&mut byte))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&byte, b"A");
}

#[tokio::test]
async fn reset_closes_open_connections_but_not_later_ones() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    proxy.reset();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(PATIENCE, s.read(&mut buf))
        .await
        .unwrap();
    match read {
        Ok(0) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("read {n} bytes from a reset connection"),
    }
    let mut again = connect(&proxy, 1).await;
    assert!(round_trip(&mut again, b"ok", PATIENCE).await.is_some());
}

#[tokio::test]
async fn reset_during_a_partition_ends_held_connections() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    proxy.drop_traffic();
    proxy.reset();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(PATIENCE, s.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    crate::wait_until(PATIENCE, || async { proxy.open_connections() == 0 })
        .await
        .unwrap();
}

#[tokio::test]
async fn blackhole_heals_by_itself() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = connect(&proxy, 1).await;
    let started = Instant::now();
    proxy.blackhole_for(Duration::from_millis(500));
    assert_eq!(proxy.fault(), ProxyFault::Drop);
    let mut back = [0u8; 3];
    s.write_all(b"abc").await.unwrap();
    tokio::time::timeout(PATIENCE, s.read_exact(&mut back))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&back, b"abc");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(proxy.fault(), ProxyFault::Pass);
}

#[tokio::test]
async fn a_later_fault_outlives_an_earlier_blackhole() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    proxy.blackhole_for(Duration::from_millis(100));
    proxy.drop_traffic();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut byte = [0u8; 1];
    // Well past the blackhole: still dropped.
    assert!(
        tokio::time::timeout(Duration::from_millis(600), s.read_exact(&mut byte))
            .await
            .is_err()
    );
    assert_eq!(proxy.fault(), ProxyFault::Drop);
}

#[tokio::test]
async fn moves_new_connections_to_another_upstream() {
    let (first, _a) = echo_server(b"1").await;
    let (second, _b) = echo_server(b"2").await;
    let proxy = FaultProxy::start(first).await.unwrap();
    let mut old = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut tag = [0u8; 1];
    old.read_exact(&mut tag).await.unwrap();
    assert_eq!(&tag, b"1");
    proxy.set_upstream(second);
    let mut new = TcpStream::connect(proxy.addr()).await.unwrap();
    new.read_exact(&mut tag).await.unwrap();
    assert_eq!(&tag, b"2");
    assert!(round_trip(&mut old, b"still", PATIENCE).await.is_some());
}

#[tokio::test]
async fn an_unreachable_upstream_closes_the_client() {
    let (up, server) = echo_server(b"A").await;
    server.abort();
    // The listener is dropped with its task.
    crate::wait_until(PATIENCE, || async { TcpStream::connect(up).await.is_err() })
        .await
        .unwrap();
    let proxy = FaultProxy::start(up).await.unwrap();
    let mut s = TcpStream::connect(proxy.addr()).await.unwrap();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, s.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let (up, _server) = echo_server(b"A").await;
    let proxy = FaultProxy::start(up).await.unwrap();
    let addr = proxy.addr();
    let mut s = connect(&proxy, 1).await;
    drop(proxy);
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, s.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(TcpStream::connect(addr).await.is_err());
}
