//! Where a run's starting workspace came from when it was a commit of the user's git
//! repository (`loopgate submit --repo PATH`): the commit and tree ids, so `loopgate apply`
//! can put the result on a branch whose parent is that commit.

use serde::{Deserialize, Serialize};

/// Longest `ref_name` accepted.
pub const MAX_REF_NAME_CHARS: usize = 256;

/// The git commit a run started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RepoOrigin {
    /// The start commit's id (40 lowercase hex digits, or 64 in a sha256 repository).
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
    )]
    pub commit: String,
    /// The id of that commit's tree: the starting workspace, unless `dirty`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
    )]
    pub tree: String,
    /// The name the commit was given by (`HEAD`, `refs/heads/main`, `v1.2`), for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 256, pattern = r"^[^\u0000-\u001f\u007f]+$")
    )]
    pub ref_name: Option<String>,
    /// The upload also held tracked files modified in the working tree (`--include-dirty`).
    #[serde(default)]
    pub dirty: bool,
}

/// Whether `id` is a git object id: 40 (sha1) or 64 (sha256) lowercase hex digits.
pub fn is_git_object_id(id: &str) -> bool {
    matches!(id.len(), 40 | 64) && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl RepoOrigin {
    /// The first field that is not well formed, with what is wrong with it.
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        if !is_git_object_id(&self.commit) {
            return Some((
                "commit",
                "must be a git object id (40 or 64 lowercase hex digits)",
            ));
        }
        if !is_git_object_id(&self.tree) {
            return Some((
                "tree",
                "must be a git object id (40 or 64 lowercase hex digits)",
            ));
        }
        if let Some(name) = &self.ref_name {
            if name.is_empty() || name.chars().count() > MAX_REF_NAME_CHARS {
                return Some(("ref_name", "must hold 1 to 256 characters"));
            }
            if name.chars().any(|c| c.is_ascii_control()) {
                return Some(("ref_name", "must not hold control characters"));
            }
        }
        None
    }

    /// `main @ 1a2b3c4d5e6f`, `1a2b3c4d5e6f` without a name, `+ uncommitted changes` when dirty.
    pub fn describe(&self) -> String {
        let short = self.commit.get(..12).unwrap_or(&self.commit);
        let name = self
            .ref_name
            .as_deref()
            .map(|n| n.strip_prefix("refs/heads/").unwrap_or(n));
        let mut text = match name {
            Some(name) => format!("{name} @ {short}"),
            None => short.to_string(),
        };
        if self.dirty {
            text.push_str(" + uncommitted changes");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> RepoOrigin {
        RepoOrigin {
            commit: "a".repeat(40),
            tree: "b".repeat(64),
            ref_name: Some("refs/heads/main".into()),
            dirty: false,
        }
    }

    #[test]
    fn fields_are_checked_and_described() {
        assert_eq!(origin().problem(), None);
        assert_eq!(origin().describe(), format!("main @ {}", "a".repeat(12)));
        type Change = fn(&mut RepoOrigin);
        let cases: Vec<(Change, &str)> = vec![
            (|o| o.commit = "A".repeat(40), "commit"),
            (|o| o.commit = "a".repeat(41), "commit"),
            (|o| o.tree = String::new(), "tree"),
            (|o| o.ref_name = Some(String::new()), "ref_name"),
            (|o| o.ref_name = Some("a\nb".into()), "ref_name"),
            (|o| o.ref_name = Some("x".repeat(257)), "ref_name"),
        ];
        for (change, field) in cases {
            let mut o = origin();
            change(&mut o);
            assert_eq!(o.problem().map(|p| p.0), Some(field), "{o:?}");
        }
        let mut dirty = origin();
        dirty.ref_name = None;
        dirty.dirty = true;
        assert_eq!(
            dirty.describe(),
            format!("{} + uncommitted changes", "a".repeat(12))
        );
    }
}
