//! The manager's HTTP API at its edges, against real NATS and Redis (issue 38 item 10):
//! - a loopback API without a token answers only its own host names: a name that resolves to
//!   127.0.0.1 (DNS rebinding), a forged `Host` and a cross-site `Origin` are refused as
//!   security events, while the CLI's requests, the console's own pages and the probes pass;
//! - N clients following a run's events share the manager's Redis connection: the server's
//!   `CLIENT LIST` stays bounded however many streams are open.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use base64::Engine as _;
use loopgate_manager::config::{self, EnvOverrides};
use loopgate_manager::run_store::RunStore;
use loopgate_manager::{router, ApiState, Engine};
use loopgate_models::ChatClient;
use loopgate_snapshot::SnapshotStore;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::otel::{init_telemetry, Telemetry, TelemetrySettings};
use loopgate_test_support::{NatsServer, RedisServer};
use loopgate_transport::runtime::CapabilityBoard;
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::bounded;

/// One telemetry (and so one global meter provider) for the whole test binary: the tests run
/// in parallel, and a second initialisation would leave the first test's counters unexported.
fn telemetry() -> Arc<Telemetry> {
    static TELEMETRY: OnceLock<Arc<Telemetry>> = OnceLock::new();
    TELEMETRY
        .get_or_init(|| {
            let settings = TelemetrySettings::from_env("http-edges", "warn", &|_| None).unwrap();
            Arc::new(init_telemetry(&settings).unwrap())
        })
        .clone()
}

/// The manager's API on a free loopback port with no token (what `loopgate up` runs); the
/// results loop does not run. Returns the base URL and the bound address.
async fn serve(nats: &NatsServer, redis: &RedisServer) -> Result<(String, std::net::SocketAddr)> {
    let text = format!(
        "[nats]\nurl = \"{}\"\n[redis]\nurl = \"{}\"\n[http]\naddr = \"127.0.0.1:0\"\n\
         [models.mgr]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"none\"\n",
        nats.url(),
        redis.url()
    );
    let file = config::parse_file(&text, "manager.toml")?;
    let settings = config::resolve(file, EnvOverrides::default(), &|_| None)?;
    ensure!(settings.token.is_none() && settings.allowed_hosts == Some(vec![]));
    let telemetry = telemetry();
    let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
    bus.ensure_topology().await?;
    let store = RunStore::connect(&redis.url(), Duration::from_secs(5)).await?;
    let capabilities = CapabilityBoard::listen(&bus, CancellationToken::new()).await?;
    let mut models = BTreeMap::new();
    for (name, profile) in &settings.models {
        models.insert(name.clone(), ChatClient::from_profile(profile)?);
    }
    let state = ApiState {
        capabilities,
        snapshots: SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?,
        evidence: SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout())
            .await?,
        engine: Engine::new(bus, store, settings.retention, Metrics::new()),
        models: Arc::new(models),
        token: None,
        allowed_hosts: settings.allowed_hosts.clone(),
        telemetry,
        auditor_keys: settings.auditor_keys.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = router(Arc::new(state), settings.max_body_bytes);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((format!("http://{addr}"), addr))
}

async fn submit(http: &reqwest::Client, base: &str) -> Result<String> {
    let body = json!({
        "task": {"goal": "g", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "mgr"}},
        "workspace": {"files": [{"path": "hello.py",
            "content_b64": base64::engine::general_purpose::STANDARD.encode(b"print(1)\n")}]}
    });
    let run: Value = http
        .post(format!("{base}/v1/runs"))
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(run["id"].as_str().context("run id")?.to_string())
}

async fn status_and_code(response: reqwest::Response) -> Result<(u16, String)> {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    Ok((
        status,
        body["error"]["code"].as_str().unwrap_or("").to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_api_without_a_token_answers_only_its_own_hosts() -> Result<()> {
    bounded(async {
        let nats = NatsServer::start().await?;
        let redis = RedisServer::start().await?;
        let (base, addr) = serve(&nats, &redis).await?;
        let http = reqwest::Client::new();
        let id = submit(&http, &base).await?;

        // DNS rebinding: a name the attacker controls resolves to the manager's address.
        let rebound = reqwest::Client::builder()
            .resolve("evil.example", addr)
            .build()?;
        let evil = format!("http://evil.example:{}", addr.port());
        for path in [
            "/v1/runs".to_string(),
            format!("/v1/runs/{id}"),
            "/metrics".into(),
            "/".into(),
        ] {
            let r = rebound.get(format!("{evil}{path}")).send().await?;
            assert_eq!(
                status_and_code(r).await?,
                (403, "host_not_allowed".into()),
                "{path}"
            );
        }
        let r = rebound
            .post(format!("{evil}/v1/runs/{id}/cancel"))
            .json(&json!({}))
            .send()
            .await?;
        assert_eq!(status_and_code(r).await?, (403, "host_not_allowed".into()));
        // A forged Host header on a loopback connection, the same.
        let r = http
            .get(format!("{base}/v1/runs"))
            .header(reqwest::header::HOST, "evil.example")
            .send()
            .await?;
        assert_eq!(status_and_code(r).await?, (403, "host_not_allowed".into()));
        // A cross-site page posting to 127.0.0.1 (its Host is right, its Origin is not).
        let r = http
            .post(format!("{base}/v1/runs/{id}/cancel"))
            .header(reqwest::header::ORIGIN, "http://evil.example")
            .json(&json!({}))
            .send()
            .await?;
        assert_eq!(
            status_and_code(r).await?,
            (403, "origin_not_allowed".into())
        );
        let run: Value = http
            .get(format!("{base}/v1/runs/{id}"))
            .send()
            .await?
            .json()
            .await?;
        assert_ne!(run["state"], "cancelled", "{run}");

        // What must keep working: the CLI (no Origin), the console (its own Origin),
        // `localhost`, and the probes whatever the Host (kubelets send the pod IP).
        let r = http.get(format!("{base}/v1/runs")).send().await?;
        assert_eq!(r.status().as_u16(), 200);
        let r = http
            .get(format!("{base}/v1/runs/{id}"))
            .header(reqwest::header::ORIGIN, &base)
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 200);
        let r = http
            .get(format!("http://localhost:{}/v1/runs", addr.port()))
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 200);
        for probe in ["/healthz", "/readyz"] {
            let r = rebound.get(format!("{evil}{probe}")).send().await?;
            assert_ne!(r.status().as_u16(), 403, "{probe}");
        }
        // Each refusal was counted as a security event.
        let page = http
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .text()
            .await?;
        let counted = |reason: &str| -> f64 {
            page.lines()
                .filter(|l| l.starts_with("loopgate_security_refused_messages_total{"))
                .filter(|l| {
                    l.contains("kind=\"http_request\"")
                        && l.contains(&format!("reason=\"{reason}\""))
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        assert_eq!(counted("host_not_allowed"), 6.0, "{page}");
        assert_eq!(counted("origin_not_allowed"), 1.0, "{page}");
        Ok(())
    })
    .await
}

/// The Redis server's client connections, as `CLIENT LIST` counts them.
async fn redis_clients(redis: &RedisServer) -> Result<usize> {
    let client = redis::Client::open(redis.url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await?;
    // This probe's own connection is one of them.
    Ok(list.lines().filter(|l| !l.trim().is_empty()).count() - 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_share_the_managers_redis_connection() -> Result<()> {
    const STREAMS: usize = 16;
    bounded(async {
        let nats = NatsServer::start().await?;
        let redis = RedisServer::start().await?;
        let (base, _) = serve(&nats, &redis).await?;
        let http = reqwest::Client::new();
        let id = submit(&http, &base).await?;
        let before = redis_clients(&redis).await?;
        let mut streams = Vec::new();
        for _ in 0..STREAMS {
            let mut r = http
                .get(format!("{base}/v1/runs/{id}/events"))
                .send()
                .await?
                .error_for_status()?;
            // The stream is live: the run's first log entry arrived.
            let first = tokio::time::timeout(Duration::from_secs(10), r.chunk())
                .await
                .context("no first event")??
                .context("stream closed")?;
            ensure!(String::from_utf8_lossy(&first).contains("event: log"));
            streams.push(r);
        }
        // Several polling rounds with every stream waiting for news.
        let mut most = 0;
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(400)).await;
            most = most.max(redis_clients(&redis).await?);
        }
        assert!(
            most <= before + 2,
            "{STREAMS} event streams took {most} Redis connections (before: {before})"
        );
        drop(streams);
        Ok(())
    })
    .await
}
