//! The contract the audit's tests check against.

use loopgate_protocol::contract::{Contract, Criterion};

/// Three blocking criteria: `a` (`true`) and `b` (`false`) checked, `c` not.
pub(super) fn checked_contract() -> Contract {
    let criterion = |id: &str, check: Option<&str>| Criterion {
        id: id.into(),
        description: String::new(),
        check: check.map(str::to_string),
        blocking: true,
        timeout_secs: 5,
        source: Default::default(),
        clause: None,
    };
    let mut c = Contract {
        goal: "g".into(),
        criteria: vec![
            criterion("a", Some("true")),
            criterion("b", Some("false")),
            criterion("c", None),
        ],
        protected_paths: vec![],
        rubric: None,
        writable_paths: Vec::new(),
        spec_hash: String::new(),
    };
    c.spec_hash = c.compute_hash();
    c
}
