//! Starts the real servers this crate manages and talks to them over the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use loopgate_test_support::{http_get, wait_until, NatsCluster, NatsServer, RedisServer};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Connects to NATS by hand: reads INFO, sends CONNECT + PING, expects PONG.
async fn nats_ping(url: &str) -> anyhow::Result<String> {
    let addr = url.trim_start_matches("nats://");
    let stream = TcpStream::connect(addr).await?;
    let mut reader = BufReader::new(stream);
    let mut info = String::new();
    reader.read_line(&mut info).await?;
    anyhow::ensure!(info.starts_with("INFO "), "unexpected greeting {info:?}");
    reader
        .get_mut()
        .write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\n")
        .await?;
    let mut reply = String::new();
    reader.read_line(&mut reply).await?;
    Ok(reply)
}

async fn redis_command(url: &str, command: &[&str]) -> anyhow::Result<String> {
    let addr = url.trim_start_matches("redis://");
    let mut stream = TcpStream::connect(addr).await?;
    let mut resp = format!("*{}\r\n", command.len());
    for part in command {
        resp.push_str(&format!("${}\r\n{}\r\n", part.len(), part));
    }
    stream.write_all(resp.as_bytes()).await?;
    let mut buf = vec![0u8; 256];
    let n = stream.read(&mut buf).await?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test]
async fn nats_server_starts_with_jetstream_and_answers_ping() -> anyhow::Result<()> {
    let nats = NatsServer::start().await?;
    assert!(nats.url().starts_with("nats://127.0.0.1:"));
    assert_eq!(nats_ping(&nats.url()).await?, "PONG\r\n");
    let jsz = http_get(
        &format!("{}/jsz", nats.monitor_url()),
        Duration::from_secs(5),
    )
    .await?;
    assert_eq!(jsz.status, 200);
    assert!(
        jsz.body.contains(nats.store_dir().to_str().unwrap()),
        "{}",
        jsz.body
    );
    Ok(())
}

#[tokio::test]
async fn nats_server_restarts_on_same_port_and_dies_on_drop() -> anyhow::Result<()> {
    let mut nats = NatsServer::start().await?;
    let url = nats.url();
    let pid = nats.process_mut().pid();
    nats.kill();
    assert!(nats_ping(&url).await.is_err());
    nats.restart().await?;
    assert_eq!(nats.url(), url);
    assert_eq!(nats_ping(&url).await?, "PONG\r\n");
    assert_ne!(nats.process_mut().pid(), pid);
    let pid = nats.process_mut().pid();
    drop(nats);
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    Ok(())
}

#[tokio::test]
async fn nats_server_with_config_enforces_users() -> anyhow::Result<()> {
    let conf = r#"
        accounts {
          APP: { jetstream: enabled, users: [ { user: "app", password: "s3cret" } ] }
        }
        no_auth_user: ""
    "#;
    let nats = NatsServer::start_with_config(conf).await?;
    let info = {
        let stream = TcpStream::connect(nats.url().trim_start_matches("nats://")).await?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await?;
        line
    };
    assert!(info.contains("\"auth_required\":true"), "{info}");
    Ok(())
}

#[tokio::test]
async fn redis_server_starts_and_stores_values() -> anyhow::Result<()> {
    let redis = RedisServer::start().await?;
    assert!(redis.url().starts_with("redis://127.0.0.1:"));
    assert_eq!(redis_command(&redis.url(), &["PING"]).await?, "+PONG\r\n");
    assert_eq!(
        redis_command(&redis.url(), &["SET", "k", "v"]).await?,
        "+OK\r\n"
    );
    assert_eq!(
        redis_command(&redis.url(), &["GET", "k"]).await?,
        "$1\r\nv\r\n"
    );
    Ok(())
}

#[tokio::test]
async fn many_servers_start_concurrently_on_distinct_ports() -> anyhow::Result<()> {
    let (a, b, c, d) = tokio::try_join!(
        NatsServer::start(),
        NatsServer::start(),
        RedisServer::start(),
        RedisServer::start()
    )?;
    let urls = [a.url(), b.url(), c.url(), d.url()];
    for (i, u) in urls.iter().enumerate() {
        assert!(!urls[i + 1..].contains(u), "duplicate {u}");
    }
    // All four answer.
    let pinged = std::sync::atomic::AtomicUsize::new(0);
    wait_until(Duration::from_secs(10), || async {
        let ok = nats_ping(&a.url()).await.is_ok()
            && nats_ping(&b.url()).await.is_ok()
            && redis_command(&c.url(), &["PING"]).await.is_ok()
            && redis_command(&d.url(), &["PING"]).await.is_ok();
        pinged.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ok
    })
    .await?;
    assert!(pinged.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    Ok(())
}

#[path = "suite/mod.rs"]
mod suite;

#[tokio::test]
async fn persistent_redis_keeps_acknowledged_writes_across_kill_9() -> anyhow::Result<()> {
    let mut redis = RedisServer::start_persistent().await?;
    assert_eq!(
        redis_command(&redis.url(), &["SET", "k", "v1"]).await?,
        "+OK\r\n"
    );
    redis.kill();
    redis.restart().await?;
    assert_eq!(
        redis_command(&redis.url(), &["GET", "k"]).await?,
        "$2\r\nv1\r\n"
    );
    // Without persistence the same kill loses it (the test can fail).
    let mut plain = RedisServer::start().await?;
    redis_command(&plain.url(), &["SET", "k", "v1"]).await?;
    plain.kill();
    plain.restart().await?;
    assert_eq!(redis_command(&plain.url(), &["GET", "k"]).await?, "$-1\r\n");
    Ok(())
}

#[tokio::test]
async fn nats_cluster_elects_a_leader_and_survives_a_killed_node() -> anyhow::Result<()> {
    let mut cluster = NatsCluster::start(3).await?;
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.url().split(',').count(), 3);
    let leader = cluster.meta_leader().await.expect("a meta leader");
    let routez = http_get(
        &format!("{}/routez", cluster.node(0).monitor_url()),
        Duration::from_secs(5),
    )
    .await?;
    let routes: serde_json::Value = serde_json::from_str(&routez.body)?;
    assert!(
        routes["num_routes"].as_u64().unwrap_or(0) >= 2,
        "{}",
        routez.body
    );
    cluster.kill(leader);
    // The two others elect a new leader.
    wait_until(Duration::from_secs(30), || async {
        matches!(cluster.meta_leader().await, Some(l) if l != leader)
    })
    .await?;
    cluster.restart(leader).await?;
    for i in 0..3 {
        assert_eq!(nats_ping(&cluster.node(i).url()).await?, "PONG\r\n");
    }
    Ok(())
}
