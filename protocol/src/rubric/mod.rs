//! Scored evaluation as it crosses the wire: the contract's optional rubric (`[[rubric]]
//! name/weight/description` and `rubric_threshold` in a task file), the judge's scores and
//! strategy, and the outcome the gate counts. The auditor reads the judge's reply into these
//! types (`loopgate-auditor`'s `rubric/parse/`).

mod keys;
mod types;

pub use keys::normalize_key;
pub use types::*;
