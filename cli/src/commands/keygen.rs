//! `loopgate keygen FILE`: a new Ed25519 auditor signing key. FILE gets the secret (64 hex
//! digits, mode 0600, never overwritten) and FILE.pub the public key, the line a manager lists
//! in `[manager] auditor_keys` and `loopgate verify --key` reads. `loopgate up` makes a fresh
//! key the same way on every start.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use loopgate_protocol::report::signing::ReportSigningKey;

use crate::cli_args::KeygenArgs;
use crate::errors::CliError;
use crate::output;

/// A signing key from 32 bytes of /dev/urandom.
pub fn generate_signing_key() -> std::io::Result<ReportSigningKey> {
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut seed)?;
    let key = ReportSigningKey::from_seed(&seed);
    seed.fill(0);
    Ok(key)
}

/// `path` with `.pub` appended.
pub fn public_key_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(".pub");
    PathBuf::from(name)
}

/// Create `path` (which must not exist) with `text`, readable by the owner only.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), CliError> {
    let fail = |source| CliError::WriteOutput {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)?;
    file.sync_all().map_err(fail)
}

pub fn keygen(args: &KeygenArgs) -> Result<(), CliError> {
    let key = generate_signing_key().map_err(|source| CliError::ReadInput {
        path: "/dev/urandom".into(),
        source,
    })?;
    let public_path = public_key_path(&args.file);
    write_new(&args.file, &format!("{}\n", key.to_secret_hex()), 0o600)?;
    write_new(
        &public_path,
        &format!(
            "# loopgate auditor public key {} (for [manager] auditor_keys and loopgate verify --key)\n{}\n",
            key.key_id(),
            key.public_key()
        ),
        0o644,
    )?;
    output::line(key.public_key())?;
    output::note(format!(
        "wrote the signing key {} (secret: give it to the auditors only, e.g. [auditor] \
         signing_key_env) and its public key {} (key id {})",
        args.file.display(),
        public_path.display(),
        key.key_id()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::report::signing::TrustedKeys;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keygen_writes_a_private_secret_and_a_readable_public_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auditor.key");
        let args = KeygenArgs { file: file.clone() };
        keygen(&args).unwrap();
        let secret = std::fs::read_to_string(&file).unwrap();
        let key = ReportSigningKey::parse(&secret).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let public = std::fs::read_to_string(public_key_path(&file)).unwrap();
        let trusted = TrustedKeys::parse_list(&public).unwrap();
        assert_eq!(trusted.keys(), std::slice::from_ref(key.public_key()));
        assert!(
            keygen(&args).is_err(),
            "an existing key is never overwritten"
        );
        assert_ne!(
            generate_signing_key().unwrap().key_id(),
            generate_signing_key().unwrap().key_id()
        );
    }
}
