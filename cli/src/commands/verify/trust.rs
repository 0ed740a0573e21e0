//! Where `loopgate verify` gets the auditor public keys it trusts. Only keys the user holds
//! count: `--key FILE` (alias `--key-file`), else the files named by `LOOPGATE_TRUSTED_KEYS`
//! (`FILE[:FILE...]`), else the trust store `$XDG_CONFIG_HOME/loopgate/trusted-keys`
//! (`~/.config/loopgate/trusted-keys`) when it exists. Every file holds public keys, 64 hex
//! digits each, one per line or comma-separated, `#` comments. With none of them there is no
//! trust root: the key list a certificate carries is written by whoever made the certificate,
//! so a signature checked against it proves nothing, and verification fails ("no trusted
//! key").

use std::path::{Path, PathBuf};

use loopgate_protocol::report::signing::TrustedKeys;
use serde::Serialize;

use crate::errors::CliError;

/// The environment variable naming trusted key files, `:`-separated.
pub const TRUSTED_KEYS_ENV: &str = "LOOPGATE_TRUSTED_KEYS";
/// The trust store's path under the user's config directory.
const TRUST_STORE: &str = "loopgate/trusted-keys";

/// Where the keys checked against came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustRoot {
    /// `--key FILE`: keys the user holds.
    Pinned,
    /// `LOOPGATE_TRUSTED_KEYS`: key files the user named.
    Environment,
    /// The trust store file under the user's config directory.
    TrustStore,
    /// No key from the user: the key list of the server's certificate answer, checked only
    /// for consistency (never verified).
    Server,
    /// No key from the user: the key list inside an exported certificate file, checked only
    /// for consistency (never verified).
    Certificate,
}

impl TrustRoot {
    /// Whether the keys came from the user (a proof), not from the certificate.
    pub fn is_trusted(self) -> bool {
        matches!(
            self,
            TrustRoot::Pinned | TrustRoot::Environment | TrustRoot::TrustStore
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            TrustRoot::Pinned => "pinned with --key",
            TrustRoot::Environment => "the key files in LOOPGATE_TRUSTED_KEYS",
            TrustRoot::TrustStore => "the trust store (~/.config/loopgate/trusted-keys)",
            TrustRoot::Server => "none: only the server's own key list, which proves nothing",
            TrustRoot::Certificate => {
                "none: only the certificate's own key list, which anyone can write"
            }
        }
    }
}

/// The problem text when no key came from the user.
pub const NO_TRUSTED_KEY: &str = "no trusted key: give the auditor pool's public key with \
     --key FILE (or LOOPGATE_TRUSTED_KEYS=FILE[:FILE...], or the trust store \
     ~/.config/loopgate/trusted-keys; `loopgate up` keeps its keys in DIR/auditor-keys.pub). \
     The key list inside a certificate proves nothing: anyone can sign a forgery and list \
     their own key";

/// The user's trusted keys and where they came from; `None` when the user gave none.
pub fn user_keys(
    flags: &[PathBuf],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(TrustedKeys, TrustRoot)>, CliError> {
    if !flags.is_empty() {
        return Ok(Some((read_key_files(flags)?, TrustRoot::Pinned)));
    }
    if let Some(list) = env(TRUSTED_KEYS_ENV).filter(|v| !v.trim().is_empty()) {
        let files: Vec<PathBuf> = list
            .split(':')
            .filter(|p| !p.trim().is_empty())
            .map(PathBuf::from)
            .collect();
        return Ok(Some((read_key_files(&files)?, TrustRoot::Environment)));
    }
    match trust_store_path(env) {
        Some(store) if store.is_file() => Ok(Some((
            read_key_files(std::slice::from_ref(&store))?,
            TrustRoot::TrustStore,
        ))),
        _ => Ok(None),
    }
}

/// `$XDG_CONFIG_HOME/loopgate/trusted-keys`, else `$HOME/.config/loopgate/trusted-keys`.
fn trust_store_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let absolute = |v: String| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    let config = env("XDG_CONFIG_HOME")
        .and_then(absolute)
        .or_else(|| env("HOME").and_then(absolute).map(|h| h.join(".config")))?;
    Some(config.join(TRUST_STORE))
}

fn read_key_files(files: &[PathBuf]) -> Result<TrustedKeys, CliError> {
    let mut keys = Vec::new();
    for path in files {
        keys.extend(read_key_file(path)?.keys().iter().cloned());
    }
    Ok(TrustedKeys::new(keys))
}

fn read_key_file(path: &Path) -> Result<TrustedKeys, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadInput {
        path: path.to_path_buf(),
        source,
    })?;
    TrustedKeys::parse_list(&text).map_err(|e| CliError::InvalidFile {
        path: path.to_path_buf(),
        problem: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::report::signing::ReportSigningKey;
    use std::collections::BTreeMap;

    fn key_file(dir: &Path, name: &str, seed: u8) -> PathBuf {
        let path = dir.join(name);
        let key = ReportSigningKey::from_seed(&[seed; 32]);
        std::fs::write(&path, format!("# pool\n{}\n", key.public_key())).unwrap();
        path
    }

    fn ids(keys: &TrustedKeys) -> Vec<String> {
        keys.keys().iter().map(|k| k.key_id().to_string()).collect()
    }

    #[test]
    fn flags_then_env_then_trust_store_then_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = key_file(dir.path(), "a.pub", 1);
        let b = key_file(dir.path(), "b.pub", 2);
        let config = dir.path().join("config");
        std::fs::create_dir_all(config.join("loopgate")).unwrap();
        std::fs::copy(&b, config.join("loopgate/trusted-keys")).unwrap();
        let id = |seed: u8| {
            ReportSigningKey::from_seed(&[seed; 32])
                .key_id()
                .to_string()
        };
        let vars = BTreeMap::from([
            (TRUSTED_KEYS_ENV, format!("{}:{}", a.display(), b.display())),
            ("XDG_CONFIG_HOME", config.display().to_string()),
        ]);
        let env = |k: &str| vars.get(k).cloned();
        let (keys, root) = user_keys(std::slice::from_ref(&a), &env).unwrap().unwrap();
        assert_eq!((ids(&keys), root), (vec![id(1)], TrustRoot::Pinned));
        let (keys, root) = user_keys(&[], &env).unwrap().unwrap();
        assert_eq!(
            (ids(&keys), root),
            (vec![id(1), id(2)], TrustRoot::Environment)
        );
        let store_only = |k: &str| (k == "XDG_CONFIG_HOME").then(|| config.display().to_string());
        let (keys, root) = user_keys(&[], &store_only).unwrap().unwrap();
        assert_eq!((ids(&keys), root), (vec![id(2)], TrustRoot::TrustStore));
        let home = |k: &str| (k == "HOME").then(|| dir.path().display().to_string());
        assert!(user_keys(&[], &home).unwrap().is_none());
        assert!(user_keys(&[], &|_| None).unwrap().is_none());
        // A named file that is not a key list is an error, never "no key".
        let bad = dir.path().join("bad.pub");
        std::fs::write(&bad, "not a key\n").unwrap();
        assert!(user_keys(&[bad], &|_| None).is_err());
    }
}
