//! Audit reports as signed claims: what a report claims (`claims`) and the Ed25519 signature
//! over those claims (`signing`).

pub mod claims;
pub mod signing;
