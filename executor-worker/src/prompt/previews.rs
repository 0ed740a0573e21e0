//! Which workspace files' current contents the first prompt shows, and which a retry's prompt
//! withholds.

use loopgate_protocol::wire::{ExecFeedback, ExecRequest};

/// At most this many files' current contents in the first prompt.
const PREVIEW_FILES: usize = 4;
/// A file over this many bytes is never shown whole (the agent reads it with `read_file`).
pub(crate) const PREVIEW_FILE_BYTES: u64 = 3 * 1024;
/// All shown contents together.
const PREVIEW_TOTAL_BYTES: u64 = 4 * 1024;

/// A workspace file's current text, shown in the first prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePreview {
    pub(crate) path: String,
    pub(crate) text: String,
}

/// The workspace files (path, size) whose current contents the first prompt shows: the small
/// files the goal, the step or a check names, and in a workspace of at most a few files every
/// small file; at most `PREVIEW_FILES`, `PREVIEW_FILE_BYTES` each and `PREVIEW_TOTAL_BYTES`
/// in all. Small models that are told to complete a file and never call `read_file` otherwise
/// overwrite it with an invented one.
///
/// Not previewed: a file the run added that a failing check names ([`withheld_previews`]).
pub(crate) fn preview_paths(req: &ExecRequest, entries: &[(String, u64)]) -> Vec<String> {
    let mut named_in = vec![req.contract.goal.as_str(), req.increment.objective.as_str()];
    named_in.extend(req.increment.goal_clauses.iter().map(String::as_str));
    for c in &req.contract.criteria {
        named_in.push(c.description.as_str());
        named_in.extend(c.check.as_deref());
    }
    let named = |path: &str| named_in.iter().any(|text| names_path(text, path));
    let small_workspace = entries.len() <= PREVIEW_FILES;
    let mut order: Vec<&(String, u64)> = entries.iter().filter(|(p, _)| named(p)).collect();
    if small_workspace {
        order.extend(entries.iter().filter(|(p, _)| !named(p)));
    }
    let withheld = withheld_previews(&req.feedback);
    let mut total = 0u64;
    let mut shown = Vec::new();
    for (path, size) in order {
        if shown.len() == PREVIEW_FILES {
            break;
        }
        if withheld.contains(&path.as_str()) {
            continue;
        }
        if *size == 0 || *size > PREVIEW_FILE_BYTES || total + size > PREVIEW_TOTAL_BYTES {
            continue;
        }
        total += size;
        shown.push(path.clone());
    }
    shown
}

/// The files whose contents a retry's prompt does not show: those the run added that a failing
/// check names, in its command or its output, so the agent writes such a file anew instead of
/// copying what failed. A file the task started with keeps its preview: it carries what the
/// task gave (a docstring, the code around a bug). So does one the run added that no failing
/// check names (work that holds).
pub(crate) fn withheld_previews(feedback: &ExecFeedback) -> Vec<&str> {
    feedback
        .added_paths
        .iter()
        .filter(|path| {
            feedback.failing.iter().any(|f| {
                f.check.as_deref().is_some_and(|c| names_path(c, path))
                    || names_path(&f.output_excerpt, path)
            })
        })
        .map(String::as_str)
        .collect()
}

/// Whether `text` names `path` as a whole word: `solution.py` names it, `my_solution.py` and
/// `solution.pyc` do not.
pub(crate) fn names_path(text: &str, path: &str) -> bool {
    let part_of_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/');
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + path.len()..].chars().next();
        before.is_none_or(|c| !part_of_name(c))
            && after.is_none_or(|c| {
                !part_of_name(c)
                    || c == '.' && {
                        // A sentence's full stop after the name still names it.
                        text[at + path.len() + 1..]
                            .chars()
                            .next()
                            .is_none_or(char::is_whitespace)
                    }
            })
    })
}
