//! The error body every rejection answers with: `{"error": {"code": "...", "message": "..."}}`.
//! `code` is stable (clients branch on it); `message` is for people.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::lenient;

/// An error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code, e.g. `invalid_task`, `not_found`, `unauthorized`, `not_resumable`.
    #[schema(examples("invalid_task", "not_found", "unauthorized", "not_resumable"))]
    pub code: String,
    #[serde(default, deserialize_with = "lenient::or_default")]
    #[schema(required = true)]
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code: code.into(),
                message: message.into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn error_bodies_keep_their_wire_shape() {
        let body = serde_json::to_string(&ErrorBody::new("not_found", "run x not found")).unwrap();
        assert_eq!(
            body,
            r#"{"error":{"code":"not_found","message":"run x not found"}}"#
        );
        let cases: [(&str, Option<&str>); 3] = [
            (r#"{"error":{"code":"c","message":1}}"#, Some("c")),
            (r#"{"error":{"message":"m"}}"#, None),
            (r#"{"other":1}"#, None),
        ];
        for (text, code) in cases {
            let parsed = serde_json::from_str::<ErrorBody>(text).ok();
            assert_eq!(
                parsed.as_ref().map(|b| b.error.code.as_str()),
                code,
                "{text}"
            );
        }
    }
}
