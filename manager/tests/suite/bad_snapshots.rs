//! The manager binary against snapshots an executor planted in the bucket: an object whose
//! metadata records 10^12 bytes and a paged manifest of 10^7 entries are answered with an
//! error naming the problem (`500 too_large`), counted as security refusals, and the manager
//! keeps serving: its other routes still answer and the process is still running.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use loopgate_protocol::subjects::SNAPSHOT_BUCKET;
use loopgate_snapshot::{blob_object_name, manifest_object_name, FreezeRules, SnapshotStore};
use loopgate_test_support::{
    free_port, plant_paged_manifest, record_size, ChildGuard, NatsServer, RedisServer, PAGE_ENTRIES,
};
use loopgate_transport::{Bus, BusOptions};
use serde_json::Value;

use crate::bounded;

const TERA: usize = 1_000_000_000_000;

struct Manager {
    child: ChildGuard,
    http: String,
    client: reqwest::Client,
}

impl Manager {
    /// The manager binary on a free port, with `[snapshot] max_manifest_entries` set.
    async fn start(nats: &NatsServer, redis: &RedisServer, dir: &std::path::Path) -> Result<Self> {
        let port = free_port()?;
        let cfg = dir.join("manager.toml");
        std::fs::write(
            &cfg,
            format!(
                "[nats]\nurl = \"{}\"\n[redis]\nurl = \"{}\"\n[http]\naddr = \"127.0.0.1:{port}\"\n\
                 [snapshot]\nmax_manifest_entries = 10000\n\
                 [models.mgr]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"none\"\n",
                nats.url(),
                redis.url()
            ),
        )?;
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_loopgate-manager"));
        command
            .arg("--config")
            .arg(&cfg)
            .env("LOOPGATE_LOG", "info")
            .env_remove("LOOPGATE_NATS_URL")
            .env_remove("LOOPGATE_REDIS_URL")
            .env_remove("LOOPGATE_HTTP_ADDR");
        let child = ChildGuard::spawn("manager", command)?;
        let manager = Manager {
            child,
            http: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .build()?,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = manager.client.get(manager.url("/readyz")).send().await {
                if r.status().is_success() {
                    return Ok(manager);
                }
            }
            ensure!(
                tokio::time::Instant::now() < deadline,
                "manager not ready:\n{}",
                manager.child.log_tail(4000)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.http)
    }

    /// Status and JSON body of a GET; a failed request (the manager gone) is an error that
    /// carries its log.
    async fn get(&mut self, path: &str) -> Result<(u16, Value)> {
        let reply = self.client.get(self.url(path)).send().await;
        let reply = match reply {
            Ok(reply) => reply,
            Err(err) => {
                let exit = self.child.wait_exit(Duration::from_secs(5)).await.ok();
                anyhow::bail!(
                    "GET {path} got no answer ({err}); manager exit status {exit:?}:\n{}",
                    self.child.log_tail(4000)
                )
            }
        };
        let status = reply.status().as_u16();
        Ok((status, reply.json().await.unwrap_or(Value::Null)))
    }

    /// `loopgate_security_refused_messages_total{kind="snapshot",reason}` on /metrics.
    async fn refused(&self, reason: &str) -> Result<u64> {
        let text = self
            .client
            .get(self.url("/metrics"))
            .send()
            .await?
            .text()
            .await?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with("loopgate_security_refused_messages_total{"))
            .filter(|l| l.contains("kind=\"snapshot\"") && l.contains(reason))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum())
    }
}

fn assert_too_large(path: &str, status: u16, body: &Value, names: &str) {
    assert_eq!(status, 500, "{path}: {body}");
    assert_eq!(body["error"]["code"], "too_large", "{path}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(names), "{path}: {message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bucket_metadata_gets_an_error_and_the_manager_keeps_serving() -> Result<()> {
    bounded(async {
        let nats = NatsServer::start().await?;
        let redis = RedisServer::start().await?;
        let bus = Bus::connect(
            &nats.url(),
            "loopgate",
            BusOptions {
                request_timeout: Duration::from_secs(5),
                ..BusOptions::default()
            },
        )
        .await?;
        bus.ensure_topology().await?;
        let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let js = bus.jetstream();

        // What an executor can write to the bucket: a snapshot whose manifest head records
        // 10^12 bytes, a blob recording as much, and an index of 10^7 entries (9766 pages
        // listed, ten stored).
        let dir = tempfile::tempdir()?;
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws)?;
        std::fs::write(ws.join("a.txt"), b"a\n")?;
        let lying = store.freeze(&ws, &FreezeRules::default()).await?;
        std::fs::write(ws.join("b.txt"), b"b\n")?;
        let honest = store.freeze(&ws, &FreezeRules::default()).await?;
        record_size(js, SNAPSHOT_BUCKET, &manifest_object_name(&lying.id), TERA).await?;
        let blob = honest
            .manifest
            .entries
            .iter()
            .find(|e| e.path == "b.txt")
            .context("b.txt")?
            .sha256
            .clone();
        record_size(js, SNAPSHOT_BUCKET, &blob_object_name(&blob), TERA).await?;
        let listed = 10_000_000 / PAGE_ENTRIES + 1;
        let huge = plant_paged_manifest(js, SNAPSHOT_BUCKET, listed, 11, 1).await?;

        let mut manager = Manager::start(&nats, &redis, dir.path()).await?;
        let cases = [
            (format!("/v1/snapshots/{}", lying.id), "1000000000000 bytes"),
            (
                format!("/v1/snapshots/{}/diff/{}", lying.id, honest.id),
                "1000000000000 bytes",
            ),
            (format!("/v1/blobs/{blob}"), "1000000000000 bytes"),
            (format!("/v1/snapshots/{huge}"), "max_manifest_entries"),
            (
                format!("/v1/snapshots/{}/diff/{huge}", honest.id),
                "max_manifest_entries",
            ),
        ];
        for (path, names) in &cases {
            let (status, body) = manager.get(path).await?;
            assert_too_large(path, status, &body, names);
        }

        // The integrity check lists the lying blob as a violation instead of reading it.
        let (status, report) = manager
            .get(&format!("/v1/snapshots/{}/integrity", honest.id))
            .await?;
        assert_eq!(status, 200, "{report}");
        let violations = report["violations"].as_array().cloned().unwrap_or_default();
        assert_eq!(violations.len(), 1, "{report}");
        assert_eq!(violations[0]["path"], "b.txt");
        assert_eq!(violations[0]["kind"], "mismatch");
        assert!(violations[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("1000000000000 bytes")));

        // Still serving: the process runs, other routes answer, honest snapshots read.
        assert!(
            manager.child.is_running(),
            "{}",
            manager.child.log_tail(4000)
        );
        let (status, runs) = manager.get("/v1/runs").await?;
        assert_eq!(status, 200, "{runs}");
        let (status, manifest) = manager.get(&format!("/v1/snapshots/{}", honest.id)).await?;
        assert_eq!(status, 200, "{manifest}");
        assert_eq!(manifest["entries"].as_array().map(Vec::len), Some(2));
        assert!(manager.refused("snapshot_object_too_large").await? >= 3);
        assert!(manager.refused("snapshot_too_many_entries").await? >= 2);
        let log = manager.child.log_text();
        assert!(
            log.contains("snapshot_refused") && log.contains("snapshot_too_many_entries"),
            "the refusal is logged as a security event:\n{log}"
        );
        Ok(())
    })
    .await
}
