//! The run's secret for the dedup ids the manager publishes on the results stream (its
//! decision requests). JetStream deduplicates `LG_RESULTS` across every subject, and every
//! role may publish there: an id another role can predict can be squatted (published first
//! with junk, so the honest message is dropped as a duplicate). The manager's ids therefore
//! end in a seal keyed by this secret (`loopgate_protocol::dispatch_id::sealed`), made at the
//! impure edge when the run is created (random, see the manager's engine) and never sent to a
//! worker. The seal is a pure function of the secret and the id's prefix, so `decide` stays
//! pure, and a replayed transition or the outbox relay publishes the very same id.

use std::fmt;

use loopgate_protocol::dispatch_id::sealed;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Hex digits of a seal (128 bits).
const SEAL_HEX: usize = 32;
/// Domain separation of the seal's digest.
const SEAL_DOMAIN: &[u8] = b"loopgate.results-msg-id.v1\0";

/// A run's msg-id secret (stored as the record's `msg_id_secret`). Empty in a record stored
/// before the secret existed: the manager gives such a record a fresh one before its next
/// transition, and until then its ids are the bare prefixes they always were.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MsgIdSecret(String);

impl MsgIdSecret {
    /// A secret made by the caller (random: at least 128 bits from the OS).
    pub fn new(secret: String) -> MsgIdSecret {
        MsgIdSecret(secret)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The id to publish a message with this `prefix` under: `{prefix}:{seal}`, the seal the
    /// first [`SEAL_HEX`] hex digits of `sha256(domain, len(secret), secret, prefix)`. Without
    /// a secret, the bare prefix.
    pub fn seal(&self, prefix: &str) -> String {
        if self.0.is_empty() {
            return prefix.to_string();
        }
        let mut digest = Sha256::new();
        digest.update(SEAL_DOMAIN);
        digest.update((self.0.len() as u64).to_be_bytes());
        digest.update(self.0.as_bytes());
        digest.update(prefix.as_bytes());
        let mut seal = hex::encode(digest.finalize());
        seal.truncate(SEAL_HEX);
        sealed(prefix, &seal)
    }
}

impl fmt::Debug for MsgIdSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = if self.0.is_empty() {
            "<none>"
        } else {
            "<redacted>"
        };
        write!(f, "MsgIdSecret({shown})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_are_stable_per_secret_and_unguessable_without_it() {
        let a = MsgIdSecret::new("a".repeat(64));
        let b = MsgIdSecret::new("b".repeat(64));
        let prefix = "r1:1:decide:2";
        let sealed_a = a.seal(prefix);
        assert_eq!(sealed_a, a.clone().seal(prefix), "the same id every time");
        assert!(sealed_a.starts_with("r1:1:decide:2:"), "{sealed_a}");
        assert_eq!(sealed_a.len(), prefix.len() + 1 + SEAL_HEX);
        assert_ne!(sealed_a, b.seal(prefix), "another secret, another id");
        assert_ne!(
            sealed_a,
            a.seal("r1:1:decide:3"),
            "another prefix, another id"
        );
        assert_eq!(MsgIdSecret::default().seal(prefix), prefix);
        assert_eq!(format!("{a:?}"), "MsgIdSecret(<redacted>)");
        assert!(!format!("{a:?}").contains('a'.to_string().repeat(8).as_str()));
        // Stored as a plain string; a record without one reads as empty.
        assert_eq!(
            serde_json::to_string(&a).ok(),
            Some(format!("\"{}\"", "a".repeat(64)))
        );
    }
}
