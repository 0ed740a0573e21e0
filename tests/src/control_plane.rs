//! A control plane alone: nats-server, redis-server and one manager on free loopback ports, no
//! workers, for tests of the manager's HTTP API. Optionally with a bearer token.

use std::time::Duration;

use anyhow::bail;
use loopgate_test_support::{ChildGuard, NatsServer, RedisServer};
use serde_json::Value;

use crate::daemons::{start_manager, Profile};

/// The env var the manager's config names for its token (`[http] token_env`).
const TOKEN_ENV: &str = "LOOPGATE_TEST_API_TOKEN";

pub struct ControlPlane {
    pub nats: NatsServer,
    pub redis: RedisServer,
    pub manager: ChildGuard,
    /// `http://127.0.0.1:PORT`
    pub http: String,
    /// The bearer token the manager requires, if any.
    pub token: Option<String>,
    pub dir: tempfile::TempDir,
    client: reqwest::Client,
}

impl ControlPlane {
    pub async fn start(profiles: &[Profile], token: Option<&str>) -> anyhow::Result<ControlPlane> {
        let nats = NatsServer::start().await?;
        let redis = RedisServer::start().await?;
        let dir = tempfile::tempdir()?;
        let token_env = match token {
            Some(_) => format!("token_env = \"{TOKEN_ENV}\"\n"),
            None => String::new(),
        };
        let models: Vec<String> = profiles.iter().map(|p| p.toml(None)).collect();
        let cfg = dir.path().join("manager.toml");
        let config = |port: u16| -> anyhow::Result<std::path::PathBuf> {
            std::fs::write(
                &cfg,
                format!(
                    "[nats]\nurl = \"{}\"\n[redis]\nurl = \"{}\"\n[http]\naddr = \"127.0.0.1:{port}\"\n{token_env}\n{}",
                    nats.url(),
                    redis.url(),
                    models.join("\n")
                ),
            )?;
            Ok(cfg.clone())
        };
        let env: Vec<(String, String)> = token
            .map(|t| (TOKEN_ENV.to_string(), t.to_string()))
            .into_iter()
            .collect();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let (manager, http) = start_manager("manager", &client, &env, config).await?;
        Ok(ControlPlane {
            nats,
            redis,
            manager,
            http,
            token: token.map(str::to_string),
            dir,
            client,
        })
    }

    /// POST a JSON body (with the token, if any): the status and the JSON answer.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let mut req = self.client.post(format!("{}{path}", self.http)).json(body);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let r = req.send().await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// Submit a run; its JSON view.
    pub async fn submit(&self, body: &Value) -> anyhow::Result<Value> {
        let (status, run) = self.post("/v1/runs", body).await?;
        if status != 201 {
            bail!(
                "submit failed: {status} {run}\n{}",
                self.manager.log_tail(4000)
            );
        }
        Ok(run)
    }
}
