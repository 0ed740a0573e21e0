//! The local stack's audit-report key: a fresh Ed25519 key on every `loopgate up` (like the
//! NATS passwords), its secret only ever in the auditor's environment, its public key
//! appended to `DIR/auditor-keys.pub`. The manager trusts every key in that file, so the
//! certificates of runs completed under earlier starts keep verifying; their secrets are gone.
//! `loopgate verify RUN --key DIR/auditor-keys.pub` pins them.

use std::io::Write;
use std::path::Path;

use loopgate_protocol::report::signing::{ReportSigningKey, TrustedKeys};

use super::error::{io_err, StackError};
use crate::commands::keygen::generate_signing_key;

/// This start's key, and the public keys (hex, oldest first, this one last) the manager trusts.
pub fn start_key(keys_file: &Path) -> Result<(ReportSigningKey, Vec<String>), StackError> {
    let key = generate_signing_key().map_err(io_err("generating the auditor signing key"))?;
    let mut trusted = match std::fs::read_to_string(keys_file) {
        Ok(text)
            if text
                .lines()
                .any(|l| !l.split('#').next().unwrap_or("").trim().is_empty()) =>
        {
            TrustedKeys::parse_list(&text)
                .map_err(|e| StackError::Config(format!("{}: {e}", keys_file.display())))?
                .keys()
                .iter()
                .map(|k| k.to_hex())
                .collect()
        }
        Ok(_) => Vec::new(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_err(format!("reading {}", keys_file.display()))(e)),
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(keys_file)
        .map_err(io_err(format!("writing {}", keys_file.display())))?;
    if trusted.is_empty() {
        writeln!(
            file,
            "# Audit-report public keys of this loopgate up stack (one per start; the manager\n\
             # trusts them all). Verify a run with: loopgate verify RUN --key {}",
            keys_file.display()
        )
        .map_err(io_err(format!("writing {}", keys_file.display())))?;
    }
    writeln!(file, "{} # key id {}", key.public_key(), key.key_id())
        .map_err(io_err(format!("writing {}", keys_file.display())))?;
    trusted.push(key.public_key().to_hex());
    Ok((key, trusted))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn every_start_adds_its_key_and_keeps_the_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auditor-keys.pub");
        let (first, trusted) = start_key(&path).unwrap();
        assert_eq!(trusted, vec![first.public_key().to_hex()]);
        let (second, trusted) = start_key(&path).unwrap();
        assert_ne!(first.key_id(), second.key_id());
        assert_eq!(
            trusted,
            vec![first.public_key().to_hex(), second.public_key().to_hex()]
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&first.to_secret_hex()));
        assert_eq!(TrustedKeys::parse_list(&text).unwrap().keys().len(), 2);
        std::fs::write(&path, "garbage\n").unwrap();
        assert!(matches!(start_key(&path), Err(StackError::Config(_))));
    }
}
