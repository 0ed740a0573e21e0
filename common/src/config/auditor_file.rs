//! `[auditor]` in `auditor.toml`, as written (raw, `deny_unknown_fields`). The auditor
//! resolves it (`auditor-worker/src/config.rs`); `loopgate up` writes it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::sandbox_mode::SandboxMode;

/// `[auditor]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditorSection {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_wait_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bwrap: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_scope: Option<bool>,
    /// File holding the pool's Ed25519 signing key (64 hex digits, its seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_file: Option<PathBuf>,
    /// Env var holding the pool's Ed25519 signing key (preferred: a check cannot read another
    /// process's environment from the sandbox, while files of the host stay readable there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key_env: Option<String>,
    /// Sign reports although acceptance checks run outside bubblewrap (no user namespaces, or
    /// `sandbox = "off"`): without it such an auditor refuses to start with a signing key.
    /// Every report then says so in its gaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unsandboxed_signing: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
}
