//! A bus on a stack's NATS as one of its per-role users (deploy/nats/loopgate-users.conf), for
//! tests that act with a role's credentials: what it may publish, read and write.

use std::time::Duration;

use loopgate_transport::{Bus, BusOptions};

use crate::Stack;

impl Stack {
    /// A bus on this stack's NATS as `user` (`manager`, `executor` or `auditor`), with that
    /// user's permissions from deploy/nats/loopgate-users.conf: for a stack started with
    /// per-role users (`StackOptions::hardened` or `secured`).
    pub async fn connect_as(&self, user: &str) -> anyhow::Result<Bus> {
        let passwords = self
            .passwords
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("a stack without per-role users"))?;
        let options = BusOptions {
            request_timeout: Duration::from_secs(5),
            user: Some(user.to_string()),
            password: Some(passwords.of(user).to_string()),
            ..BusOptions::default()
        };
        Ok(Bus::connect(&self.nats.url(), "loopgate", options).await?)
    }
}
