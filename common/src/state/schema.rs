//! The stored record's schema version, and decoding a stored record.
//!
//! Schema 1 is the flat layout every record has had so far. The record gained its `schema`
//! key after records were already stored, without changing any other key: a record without
//! `schema` (written before, or rewritten by a replica that predates the key and drops it) is
//! schema 1, the same layout. The version is bumped only when a change would make an older
//! replica misread a record (a key renamed, removed or given a new meaning); an added
//! `#[serde(default)]` key does not need one, older replicas ignore it. A record of a schema
//! newer than [`RUN_RECORD_SCHEMA`] is refused, never read as if it were the old layout.

use serde::{Deserialize, Deserializer};

/// The schema this code writes and the newest it reads.
pub const RUN_RECORD_SCHEMA: u32 = 1;

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "run record schema {found} is newer than this build reads (schema {RUN_RECORD_SCHEMA} \
         and older); upgrade this replica to read it"
    )]
    NewerSchema { found: u32 },
    #[error("run record schema {found} does not exist (schemas start at 1)")]
    UnknownSchema { found: u32 },
    #[error("run record is not a JSON object with a numeric `schema`: {0}")]
    Unreadable(#[source] serde_json::Error),
    #[error("run record (schema {schema}) is not valid: {source}")]
    Invalid {
        schema: u32,
        #[source]
        source: serde_json::Error,
    },
}

/// The schema of a record stored without the `schema` key.
pub(super) fn unversioned() -> u32 {
    1
}

fn check(found: u32) -> Result<u32, RecordError> {
    match found {
        0 => Err(RecordError::UnknownSchema { found }),
        n if n > RUN_RECORD_SCHEMA => Err(RecordError::NewerSchema { found }),
        n => Ok(n),
    }
}

/// `deserialize_with` for `RunRecord::schema`: any serde path refuses a schema it can't read.
pub(super) fn known<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    check(u32::deserialize(deserializer)?).map_err(serde::de::Error::custom)
}

/// Only the `schema` key: read first, so a newer record is reported as newer even when its
/// other keys would not decode.
#[derive(Deserialize)]
struct Probe {
    #[serde(default = "unversioned")]
    schema: u32,
}

/// The schema of a stored record, read before the rest of it.
pub(super) fn probe(json: &str) -> Result<u32, RecordError> {
    let probe: Probe = serde_json::from_str(json).map_err(RecordError::Unreadable)?;
    check(probe.schema)
}
