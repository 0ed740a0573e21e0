//! A stack with known secrets (for tests that grep every output for them): NATS with the
//! project's per-role users (deploy/nats/loopgate-users.conf, each daemon connecting as its
//! role), a Redis that requires a password (its URL carries it, as a Kubernetes Secret's
//! does), and model profiles that need an API key.

use loopgate_snapshot::SnapshotStore;
use loopgate_transport::{Bus, BusOptions};

/// The server side of deploy/nats/: the users file the deployments include.
pub(crate) const USERS_CONF: &str = include_str!("../../deploy/nats/loopgate-users.conf");

/// The env var each daemon reads its NATS password from (`[nats] password_env`).
pub(crate) const NATS_PASSWORD_ENV: &str = "LOOPGATE_TEST_NATS_PASSWORD";
/// The env var the model profiles read their API key from (`api_key_env`).
pub const MODEL_KEY_ENV: &str = "LOOPGATE_TEST_MODEL_KEY";

/// The secret values of one stack; all distinct, long and random.
#[derive(Debug, Clone)]
pub struct StackSecrets {
    pub nats_manager: String,
    pub nats_executor: String,
    pub nats_auditor: String,
    pub redis: String,
    pub model_key: String,
}

impl StackSecrets {
    pub fn random() -> StackSecrets {
        let word = |tag: &str| format!("{tag}-{}", uuid::Uuid::new_v4().simple());
        StackSecrets {
            nats_manager: word("natsmgr"),
            nats_executor: word("natsexec"),
            nats_auditor: word("natsaudit"),
            redis: word("redispw"),
            model_key: word("sk-model"),
        }
    }

    /// Every secret with its name, for assertion messages.
    pub fn all(&self) -> [(&'static str, &str); 5] {
        [
            ("NATS manager password", &self.nats_manager),
            ("NATS executor password", &self.nats_executor),
            ("NATS auditor password", &self.nats_auditor),
            ("Redis password", &self.redis),
            ("model API key", &self.model_key),
        ]
    }

    /// The names of the secrets found in `text`.
    pub fn found_in(&self, text: &str) -> Vec<&'static str> {
        self.all()
            .into_iter()
            .filter(|(_, value)| text.contains(value))
            .map(|(name, _)| name)
            .collect()
    }

    /// nats-server's config: the users file with its password variables defined.
    pub(crate) fn nats_conf(&self) -> String {
        format!(
            "LOOPGATE_NATS_MANAGER_PASSWORD: \"{}\"\nLOOPGATE_NATS_EXECUTOR_PASSWORD: \"{}\"\n\
             LOOPGATE_NATS_AUDITOR_PASSWORD: \"{}\"\n{USERS_CONF}",
            self.nats_manager, self.nats_executor, self.nats_auditor
        )
    }

    /// Streams, buckets and the `audit` durable, created as the manager (their owner) creates
    /// them: with per-role users the workers may only look them up, and they may start first.
    pub(crate) async fn create_topology(&self, url: &str) -> anyhow::Result<()> {
        let options = BusOptions {
            user: Some("manager".into()),
            password: Some(self.nats_manager.clone()),
            ..BusOptions::default()
        };
        let bus = Bus::connect(url, "loopgate", options).await?;
        bus.ensure_topology().await?;
        SnapshotStore::new(&bus).await?;
        SnapshotStore::evidence(&bus).await?;
        Ok(())
    }

    /// The `[nats]` keys after `url` for a daemon of `role`.
    pub(crate) fn nats_keys(role: &str) -> String {
        format!("user = \"{role}\"\npassword_env = \"{NATS_PASSWORD_ENV}\"\n")
    }

    /// The environment a daemon of `role` gets: its NATS password and the model key.
    pub(crate) fn env_for(&self, role: &str) -> Vec<(String, String)> {
        let password = match role {
            "manager" => &self.nats_manager,
            "executor" => &self.nats_executor,
            _ => &self.nats_auditor,
        };
        vec![
            (NATS_PASSWORD_ENV.to_string(), password.clone()),
            (MODEL_KEY_ENV.to_string(), self.model_key.clone()),
        ]
    }
}
