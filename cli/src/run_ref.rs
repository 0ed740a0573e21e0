//! The RUN argument: a whole run id, or an unambiguous prefix of one (the short ids `loopgate
//! runs` and the console show). Resolved here, once, before any command runs.

use loopgate_api::{is_id_prefix, RunList};
use serde::Deserialize;

use crate::api_client::{ApiClient, ApiError};

/// The length of a whole run id (a UUID).
const FULL_ID_LEN: usize = 36;

/// Candidates named in an ambiguity error.
const SHOWN_CANDIDATES: usize = 5;

/// Why a RUN argument names no single run.
#[derive(Debug, thiserror::Error)]
pub enum RunRefError {
    #[error("no run id starts with '{prefix}' (list them with `loopgate runs`)")]
    Unknown { prefix: String },
    #[error("'{prefix}' is ambiguous: it starts {count} run ids ({shown}); give more characters")]
    Ambiguous {
        prefix: String,
        count: usize,
        shown: String,
    },
    #[error(transparent)]
    Api(#[from] ApiError),
}

/// Whether `given` is resolved through the list: a prefix of a run id's characters shorter
/// than a whole id. Anything else (a whole id, a name that is no prefix) goes to the server as
/// given.
pub fn needs_resolving(given: &str) -> bool {
    given.len() < FULL_ID_LEN && is_id_prefix(given)
}

/// The one run id `given` names: itself when it is a whole id (or no prefix at all), else the
/// only run id it starts (`GET /v1/runs?id_prefix=`).
pub async fn resolve_run(client: &ApiClient, given: &str) -> Result<String, RunRefError> {
    if !needs_resolving(given) {
        return Ok(given.to_string());
    }
    let value = client.runs_with_prefix(given).await?;
    let list = RunList::deserialize(&value).map_err(|e| ApiError::BadResponse {
        what: "GET /v1/runs?id_prefix=".into(),
        detail: e.to_string(),
    })?;
    let prefix = given.to_ascii_lowercase();
    // A manager that does not know `id_prefix` answers its first page: keep only matches.
    let ids: Vec<String> = list
        .runs
        .into_iter()
        .map(|r| r.id)
        .filter(|id| id.to_ascii_lowercase().starts_with(&prefix))
        .collect();
    pick(given, ids, list.has_more)
}

/// The single match, or why there is none.
pub fn pick(given: &str, ids: Vec<String>, more: bool) -> Result<String, RunRefError> {
    match ids.as_slice() {
        [] => Err(RunRefError::Unknown {
            prefix: given.to_string(),
        }),
        [one] if !more => Ok(one.clone()),
        many => Err(RunRefError::Ambiguous {
            prefix: given.to_string(),
            count: many.len(),
            shown: many
                .iter()
                .take(SHOWN_CANDIDATES)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
                + if many.len() > SHOWN_CANDIDATES || more {
                    ", ..."
                } else {
                    ""
                },
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn prefixes_resolve_to_one_run_or_say_why_not() {
        let a = "0193a2b4-c5d6-7000-8000-000000000001".to_string();
        let b = "0193a2b4-c5d6-7000-8000-000000000002".to_string();
        assert_eq!(pick("0193", vec![a.clone()], false).unwrap(), a);
        let cases = [
            (vec![], false, "no run id starts with"),
            (
                vec![a.clone(), b.clone()],
                false,
                "is ambiguous: it starts 2",
            ),
            (vec![a.clone()], true, "is ambiguous"),
        ];
        for (ids, more, want) in cases {
            let err = pick("0193", ids, more).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
        for (given, resolve) in [
            ("0193a2b4-c5d", true),
            (a.as_str(), false),
            ("r1", false),
            ("", false),
        ] {
            assert_eq!(needs_resolving(given), resolve, "{given}");
        }
    }
}
