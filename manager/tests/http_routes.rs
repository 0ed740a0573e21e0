//! The live router against real NATS and Redis: every operation its OpenAPI document lists is
//! routed (never the unknown-route 404 or a 405, and with ids that exist never a 404 at all),
//! the document served is the one generated from the routes, and every rejection (unknown route,
//! wrong method, unreadable body, missing token) answers in the JSON error format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use loopgate_manager::config::{self, EnvOverrides};
use loopgate_manager::run_store::{CasOutcome, CasWrite, RunStore};
use loopgate_manager::Engine;
use loopgate_manager::{openapi_document, router, ApiState};
use loopgate_models::ChatClient;
use loopgate_snapshot::SnapshotStore;
use loopgate_telemetry::metrics::Metrics;
use loopgate_telemetry::otel::{init_telemetry, TelemetrySettings};
use loopgate_test_support::{NatsServer, RedisServer};
use loopgate_transport::runtime::CapabilityBoard;
use loopgate_transport::{Bus, BusOptions};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "route-walk-token";
const FILE: &[u8] = b"print('hi')\n";

/// The manager's HTTP API on a free loopback port; the results loop does not run, so runs stay
/// where the API puts them.
async fn serve(nats: &NatsServer, redis: &RedisServer, token: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("manager.toml");
    let token_line = if token.is_some() {
        "token_env = \"LG_ROUTE_WALK_TOKEN\"\n"
    } else {
        ""
    };
    std::fs::write(
        &cfg,
        format!(
            "[nats]\nurl = \"{}\"\n[redis]\nurl = \"{}\"\n[http]\naddr = \"127.0.0.1:0\"\n{token_line}\n\
             [models.mgr]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"none\"\n",
            nats.url(),
            redis.url()
        ),
    )
    .unwrap();
    let env = |key: &str| (key == "LG_ROUTE_WALK_TOKEN").then(|| TOKEN.to_string());
    let settings = config::load(Some(&cfg), EnvOverrides::default(), &env).unwrap();
    let telemetry =
        init_telemetry(&TelemetrySettings::from_env("route-walk", "warn", &|_| None).unwrap())
            .unwrap();
    let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default())
        .await
        .unwrap();
    bus.ensure_topology().await.unwrap();
    let store = RunStore::connect(&redis.url(), Duration::from_secs(5))
        .await
        .unwrap();
    let mut models = BTreeMap::new();
    for (name, profile) in &settings.models {
        models.insert(name.clone(), ChatClient::from_profile(profile).unwrap());
    }
    let capabilities = CapabilityBoard::listen(&bus, CancellationToken::new())
        .await
        .unwrap();
    let state = ApiState {
        capabilities,
        snapshots: SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout())
            .await
            .unwrap(),
        evidence: SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout())
            .await
            .unwrap(),
        engine: Engine::new(bus, store, settings.retention, Metrics::new()),
        models: Arc::new(models),
        token: settings.token.clone(),
        allowed_hosts: settings.allowed_hosts.clone(),
        telemetry: Arc::new(telemetry),
        auditor_keys: settings.auditor_keys.clone(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(Arc::new(state), settings.max_body_bytes);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

struct Client {
    base: String,
    token: Option<&'static str>,
    http: reqwest::Client,
}

impl Client {
    async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> reqwest::Response {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(10));
        if let Some(token) = self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        req.send().await.unwrap()
    }

    /// Status, headers and the JSON body (Null when the body is not JSON).
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let r = self.send(method, path, body).await;
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

fn error_code(body: &Value) -> Option<&str> {
    body["error"]["code"].as_str()
}

async fn walk(nats: &NatsServer, redis: &RedisServer, token: Option<&'static str>) {
    let client = Client {
        base: serve(nats, redis, token).await,
        token,
        http: reqwest::Client::new(),
    };
    let (status, doc) = client.call("GET", "/openapi.json", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        doc,
        serde_json::to_value(openapi_document(token.is_some())).unwrap()
    );

    let submit = json!({
        "task": {"goal": "g", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "mgr"}},
        "workspace": {"files": [{"path": "hello.py", "content_b64": base64::engine::general_purpose::STANDARD.encode(FILE)}]}
    });
    let (status, run) = client.call("POST", "/v1/runs", Some(&submit)).await;
    assert_eq!(status, 201, "{run}");
    let run_id = run["id"].as_str().unwrap().to_string();
    let snapshot = run["base_snapshot"].as_str().unwrap().to_string();
    let blob = loopgate_protocol::snapshot::sha256_hex(FILE);
    let screenshot = seed_screenshot(
        nats,
        redis,
        &run_id,
        &snapshot,
        &png_like("walk"),
        true,
        None,
    )
    .await;

    let mut operations = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            operations.push((method.to_uppercase(), path.clone()));
        }
    }
    // Cancel last, so the routes before it see a live run.
    operations.sort_by_key(|(_, path)| path.ends_with("/cancel"));
    assert_eq!(operations.len(), 34);
    for (method, template) in &operations {
        let digest = if template.contains("/screenshots/") {
            &screenshot
        } else {
            &blob
        };
        let path = if template.starts_with("/v1/snapshots/") {
            template.replace("{id}", &snapshot)
        } else {
            template.replace("{id}", &run_id)
        }
        .replace("{sha256}", digest)
        .replace("{from}", &snapshot)
        .replace("{to}", &snapshot)
        .replace("{file}", "app.js");
        let body = match (method.as_str(), template.as_str()) {
            ("POST", "/v1/runs") => Some(submit.clone()),
            ("POST", p) if p.ends_with("/answer") => Some(json!({"text": "yes"})),
            ("POST", _) => Some(json!({})),
            _ => None,
        };
        let r = client.send(method, &path, body.as_ref()).await;
        let status = r.status().as_u16();
        let json_error = r
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .is_some_and(|ct| ct == "application/json");
        // Events answer a stream that does not end while the run lives: headers are enough.
        let body: Value = if template.ends_with("/events") {
            Value::Null
        } else {
            r.json().await.unwrap_or(Value::Null)
        };
        assert!(
            ![404, 405].contains(&status),
            "{method} {path}: {status} {body}"
        );
        if status >= 400 {
            assert!(
                json_error && error_code(&body).is_some(),
                "{method} {path}: {status} {body}"
            );
        }
    }

    // Rejections the router itself makes answer in the JSON error format too.
    let wrong_method = client.send("DELETE", "/v1/runs", None).await;
    assert_eq!(wrong_method.status().as_u16(), 405);
    assert!(wrong_method.headers().contains_key(reqwest::header::ALLOW));
    let cases: Vec<(&str, String, Option<Value>, u16, &str)> = vec![
        ("GET", "/v1/nothing-here".into(), None, 404, "unknown_route"),
        (
            "PUT",
            format!("/v1/runs/{run_id}"),
            None,
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            format!("/v1/runs/{run_id}/answer"),
            Some(json!({"text": 1})),
            400,
            "invalid_request",
        ),
        (
            "POST",
            format!("/v1/runs/{run_id}/answer"),
            None,
            400,
            "invalid_request",
        ),
        (
            "POST",
            format!("/v1/runs/{run_id}/resume"),
            Some(json!({"budget": [3]})),
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/runs?offset=-1".into(),
            None,
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/runs?state=bogus".into(),
            None,
            400,
            "invalid_state",
        ),
        ("GET", "/v1/runs/not-a-uuid".into(), None, 404, "not_found"),
    ];
    for (method, path, body, status, code) in cases {
        let got = client.call(method, &path, body.as_ref()).await;
        assert_eq!(
            (got.0, error_code(&got.1)),
            (status, Some(code)),
            "{method} {path}"
        );
    }

    if token.is_some() {
        let anonymous = Client {
            base: client.base.clone(),
            token: None,
            http: reqwest::Client::new(),
        };
        let got = anonymous
            .call("GET", &format!("/v1/runs/{run_id}"), None)
            .await;
        assert_eq!((got.0, error_code(&got.1)), (401, Some("unauthorized")));
        for public in ["/healthz", "/readyz", "/openapi.json", "/metrics"] {
            assert_eq!(
                anonymous.send("GET", public, None).await.status().as_u16(),
                200,
                "{public}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_operation_is_routed_with_and_without_a_token() {
    let nats = NatsServer::start().await.unwrap();
    let redis = RedisServer::start().await.unwrap();
    walk(&nats, &redis, None).await;
    walk(&nats, &redis, Some(TOKEN)).await;
}

/// Bytes that start as a PNG does (the route checks the signature, not the picture).
fn png_like(tag: &str) -> Vec<u8> {
    [b"\x89PNG\r\n\x1a\n".as_slice(), tag.as_bytes()].concat()
}

/// Name `png` as a screenshot in a new evidence record of run `id` (recorded at `size` bytes,
/// its own length by default), and put it in the evidence bucket when `stored`, as an
/// accepted audit report would have. Returns its digest.
async fn seed_screenshot(
    nats: &NatsServer,
    redis: &RedisServer,
    id: &str,
    snapshot: &str,
    png: &[u8],
    stored: bool,
    size: Option<u64>,
) -> String {
    let digest = loopgate_protocol::snapshot::sha256_hex(png);
    if stored {
        let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default())
            .await
            .unwrap();
        let put = SnapshotStore::evidence_from_jetstream(bus.jetstream(), bus.request_timeout())
            .await
            .unwrap()
            .put_bytes(png)
            .await
            .unwrap();
        assert_eq!(put, digest);
    }
    let store = RunStore::connect(&redis.url(), Duration::from_secs(5))
        .await
        .unwrap();
    let current = store.load(id).await.unwrap().unwrap();
    let check = format!("browse-{}", &digest[..8]);
    let evidence = json!({
        "artifact_version": snapshot, "check_id": check, "verdict": "pass", "produced_at": 1,
        "log_digest": null, "exit_code": 0, "duration_ms": 5, "output_excerpt": "ok",
        "screenshots": [{"digest": digest, "media_type": "image/png", "path": "shots/a.png",
            "size_bytes": size.unwrap_or(png.len() as u64)}],
    });
    let write = CasWrite {
        expected_version: current.version,
        record: current.record,
        evidence: vec![(format!("{snapshot}:{check}"), evidence.to_string())],
        now_ms: 1,
        ..CasWrite::default()
    };
    assert!(matches!(
        store.compare_and_set(id, write).await.unwrap(),
        CasOutcome::Applied { .. }
    ));
    digest
}

/// `GET /v1/runs/{id}/screenshots/{sha256}` serves a PNG only as the run's evidence names it:
/// the bytes as `image/png` behind the token; 404 for a digest the run's evidence does not
/// name (another run's, a workspace blob's, an unknown one, or not a digest at all: no path
/// traversal reaches the store) and for one whose blob is gone; 500 `integrity` for a blob
/// overwritten in the bucket or not of the recorded size, `too_large` over the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_are_served_only_as_a_runs_evidence_names_them() {
    let nats = NatsServer::start().await.unwrap();
    let redis = RedisServer::start().await.unwrap();
    let client = Client {
        base: serve(&nats, &redis, Some(TOKEN)).await,
        token: Some(TOKEN),
        http: reqwest::Client::new(),
    };
    let submit = json!({
        "task": {"goal": "g", "acceptance": [{"id": "a", "check": "true"}], "roles": {"manager": "mgr"}},
        "workspace": {"files": [{"path": "hello.py", "content_b64": base64::engine::general_purpose::STANDARD.encode(FILE)}]}
    });
    let mut runs = Vec::new();
    for _ in 0..2 {
        let (status, run) = client.call("POST", "/v1/runs", Some(&submit)).await;
        assert_eq!(status, 201, "{run}");
        runs.push((
            run["id"].as_str().unwrap().to_string(),
            run["base_snapshot"].as_str().unwrap().to_string(),
        ));
    }
    let (id, snapshot) = runs[0].clone();
    let seed = |png: Vec<u8>, stored: bool, size: Option<u64>| {
        let (nats, redis, id, snapshot) = (&nats, &redis, id.clone(), snapshot.clone());
        async move { seed_screenshot(nats, redis, &id, &snapshot, &png, stored, size).await }
    };
    let good_png = png_like("good");
    let good = seed(good_png.clone(), true, None).await;
    let missing = seed(png_like("missing"), false, None).await;
    let tampered = seed(png_like("tampered"), true, None).await;
    let wrong_size = seed(png_like("wrong size"), true, Some(3)).await;
    let huge = seed(png_like("huge"), false, Some(9 * 1024 * 1024)).await;
    let not_png = seed(b"GIF89a, not a PNG".to_vec(), true, None).await;
    let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default())
        .await
        .unwrap();
    let bucket = bus
        .jetstream()
        .get_object_store(loopgate_protocol::subjects::EVIDENCE_BUCKET)
        .await
        .unwrap();
    let mut other: &[u8] = b"\x89PNG\r\n\x1a\nswapped";
    bucket
        .put(format!("blob/{tampered}").as_str(), &mut other)
        .await
        .unwrap();

    let path = |run: &str, digest: &str| format!("/v1/runs/{run}/screenshots/{digest}");
    let r = client.send("GET", &path(&id, &good), None).await;
    assert_eq!(r.status().as_u16(), 200);
    let header = |name: reqwest::header::HeaderName| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    assert_eq!(
        header(reqwest::header::CONTENT_TYPE).as_deref(),
        Some("image/png")
    );
    assert_eq!(
        header(reqwest::header::X_CONTENT_TYPE_OPTIONS).as_deref(),
        Some("nosniff")
    );
    assert_eq!(
        header(reqwest::header::CACHE_CONTROL).as_deref(),
        Some("no-store")
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), good_png.as_slice());

    let workspace_blob = loopgate_protocol::snapshot::sha256_hex(FILE);
    let unknown = loopgate_protocol::snapshot::sha256_hex(b"never stored");
    let other_run = runs[1].0.clone();
    let cases: Vec<(String, u16, &str)> = vec![
        (path(&other_run, &good), 404, "not_found"),
        (path(&id, &workspace_blob), 404, "not_found"),
        (path(&id, &unknown), 404, "not_found"),
        (path(&id, &good.to_uppercase()), 404, "not_found"),
        (path(&id, "..%2F..%2Fblobs%2Fx"), 404, "not_found"),
        (
            path(
                &id,
                &format!("..%2F..%2F..%2Fv1%2Fblobs%2F{workspace_blob}"),
            ),
            404,
            "not_found",
        ),
        (path(&id, &missing), 404, "not_found"),
        (
            path("00000000-0000-4000-8000-000000000000", &good),
            404,
            "not_found",
        ),
        (path(&id, &tampered), 500, "integrity"),
        (path(&id, &wrong_size), 500, "integrity"),
        (path(&id, &not_png), 500, "integrity"),
        (path(&id, &huge), 500, "too_large"),
    ];
    for (p, status, code) in cases {
        let got = client.call("GET", &p, None).await;
        assert_eq!((got.0, error_code(&got.1)), (status, Some(code)), "{p}");
    }

    let anonymous = Client {
        base: client.base.clone(),
        token: None,
        http: reqwest::Client::new(),
    };
    let got = anonymous.call("GET", &path(&id, &good), None).await;
    assert_eq!((got.0, error_code(&got.1)), (401, Some("unauthorized")));
}

/// `GET /v1/models` lists, per role, the profile names live workers announce: heartbeats
/// published on the real bus (an executor's on `heartbeat.capabilities`, an auditor's on
/// `heartbeat.auditor`) show up, marked when the manager has the name too, and go once
/// withdrawn; `models` stays the manager's own profiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_the_profiles_live_workers_announce_per_role() {
    let nats = NatsServer::start().await.unwrap();
    let redis = RedisServer::start().await.unwrap();
    let client = Client {
        base: serve(&nats, &redis, None).await,
        token: None,
        http: reqwest::Client::new(),
    };
    let (status, body) = client.call("GET", "/v1/models", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["models"][0]["name"], "mgr");
    assert_eq!(body["roles"]["manager"][0]["name"], "mgr");
    assert_eq!(body["roles"]["executor"], json!([]));
    assert_eq!(body["roles"]["auditor"], json!([]));

    let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default())
        .await
        .unwrap();
    let beat = |worker: &str, caps: &[&str], profiles: &[&str]| json!({"worker_id": worker, "capabilities": caps, "profiles": profiles, "ttl_ms": 60_000});
    let executor = beat("exec-1", &["cli"], &["exec", "mgr"]);
    // Claims the executor role in its body: the subject decides.
    let mut auditor = beat("audit-1", &[], &["judge"]);
    auditor["role"] = json!("executor");
    let subjects = bus.subjects().clone();
    let want_executor = json!([
        {"name": "exec", "workers": 1, "manager_profile": false},
        {"name": "mgr", "workers": 1, "manager_profile": true},
    ]);
    let want_auditor = json!([{"name": "judge", "workers": 1, "manager_profile": false}]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Core NATS: a beat sent before the board's subscription is live is lost, so resend.
        bus.publish_core_json(&subjects.capability_heartbeat(), &executor)
            .await
            .unwrap();
        bus.publish_core_json(&subjects.auditor_heartbeat(), &auditor)
            .await
            .unwrap();
        bus.flush().await.unwrap();
        let (_, body) = client.call("GET", "/v1/models", None).await;
        if body["roles"]["executor"] == want_executor && body["roles"]["auditor"] == want_auditor {
            assert_eq!(body["models"].as_array().unwrap().len(), 1, "{body}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "announced profiles never listed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Withdrawn (empty capabilities and profiles): gone at once.
    bus.publish_core_json(&subjects.capability_heartbeat(), &beat("exec-1", &[], &[]))
        .await
        .unwrap();
    bus.flush().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = client.call("GET", "/v1/models", None).await;
        if body["roles"]["executor"] == json!([]) {
            assert_eq!(body["roles"]["auditor"], want_auditor, "{body}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "withdrawn profiles still listed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
