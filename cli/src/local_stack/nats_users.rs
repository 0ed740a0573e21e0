//! Per-role NATS users for the local stack: the server gets deploy/nats/loopgate-users.conf
//! (the same permissions a deployment uses) and each daemon its own user. Passwords are
//! generated per `loopgate up` and only ever travel in environment variables: nats-server
//! resolves `$LOOPGATE_NATS_<ROLE>_PASSWORD` from its environment, and each daemon reads its
//! own from `LOOPGATE_NATS_PASSWORD` (its config names that variable, never the value).

use std::io::Read;

/// The permissions file, the one source shared with the deployment and the tests.
pub const USERS_CONF: &str = include_str!("../../../deploy/nats/loopgate-users.conf");
/// The variable each daemon reads its NATS password from.
pub const NATS_PASSWORD_ENV: &str = "LOOPGATE_NATS_PASSWORD";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Manager,
    Executor,
    Auditor,
}

impl Role {
    /// The NATS user name (as in loopgate-users.conf).
    pub fn user(self) -> &'static str {
        match self {
            Role::Manager => "manager",
            Role::Executor => "executor",
            Role::Auditor => "auditor",
        }
    }

    /// The variable nats-server reads this role's password from.
    pub fn server_env(self) -> &'static str {
        match self {
            Role::Manager => "LOOPGATE_NATS_MANAGER_PASSWORD",
            Role::Executor => "LOOPGATE_NATS_EXECUTOR_PASSWORD",
            Role::Auditor => "LOOPGATE_NATS_AUDITOR_PASSWORD",
        }
    }
}

/// One random password per role. `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsPasswords {
    manager: String,
    executor: String,
    auditor: String,
}

impl std::fmt::Debug for NatsPasswords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NatsPasswords(<redacted>)")
    }
}

pub(super) fn random_hex(bytes: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

impl NatsPasswords {
    pub fn generate() -> std::io::Result<NatsPasswords> {
        Ok(NatsPasswords {
            manager: random_hex(24)?,
            executor: random_hex(24)?,
            auditor: random_hex(24)?,
        })
    }

    /// Fixed passwords (tests).
    pub fn fixed(manager: &str, executor: &str, auditor: &str) -> NatsPasswords {
        NatsPasswords {
            manager: manager.into(),
            executor: executor.into(),
            auditor: auditor.into(),
        }
    }

    pub fn of(&self, role: Role) -> &str {
        match role {
            Role::Manager => &self.manager,
            Role::Executor => &self.executor,
            Role::Auditor => &self.auditor,
        }
    }

    /// Environment for nats-server: every role's password under its variable.
    pub fn server_env(&self) -> Vec<(&'static str, String)> {
        [Role::Manager, Role::Executor, Role::Auditor]
            .into_iter()
            .map(|role| (role.server_env(), self.of(role).to_string()))
            .collect()
    }
}

/// `nats.conf` for the local stack: the users and permissions; listen address, ports,
/// JetStream and the store directory come from the command line.
pub fn nats_conf_text() -> String {
    format!("# Written by `loopgate up`; passwords come from the environment.\n{USERS_CONF}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn passwords_are_random_per_role_and_never_printed() {
        let passwords = NatsPasswords::generate().unwrap();
        let values: Vec<&str> = [Role::Manager, Role::Executor, Role::Auditor]
            .iter()
            .map(|r| passwords.of(*r))
            .collect();
        assert!(values.iter().all(|v| v.len() == 48));
        assert!(values[0] != values[1] && values[1] != values[2]);
        assert!(!format!("{passwords:?}").contains(values[0]));
        let env = passwords.server_env();
        assert_eq!(
            env[2],
            ("LOOPGATE_NATS_AUDITOR_PASSWORD", values[2].to_string())
        );
    }

    #[test]
    fn config_names_every_role_and_no_password() {
        let text = nats_conf_text();
        for role in [Role::Manager, Role::Executor, Role::Auditor] {
            assert!(text.contains(&format!("user: {}", role.user())), "{role:?}");
            assert!(
                text.contains(&format!("${}", role.server_env())),
                "{role:?}"
            );
        }
    }
}
