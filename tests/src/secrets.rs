//! A stack with known secrets (for tests that grep every output for them): NATS with the
//! project's per-role users (deploy/nats/loopgate-users.conf, each daemon connecting as its
//! role), a Redis that requires a password (its URL carries it, as a Kubernetes Secret's
//! does), and model profiles that need an API key.

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
}
