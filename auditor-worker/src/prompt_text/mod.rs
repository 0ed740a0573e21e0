//! The pieces of text the judge's, the clause judge's and the rubric judge's prompts share:
//! verdict and change words, the changed-path list, fences, text cut to a length, the
//! templates' `fill` (`loopgate_common::prompt_template`) and what a prompt shows of the
//! candidate's files (`files`). Pure, but for reading the files.

pub(crate) mod files;
#[cfg(test)]
pub(crate) mod fixtures;

use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::verdict::CheckVerdict;

pub(crate) use loopgate_common::prompt_template::{fill, text};

/// Changed paths listed in a prompt; the rest are counted.
pub(crate) const MAX_PROMPT_PATHS: usize = 100;

/// How a check's verdict reads in a prompt and in the report's backcheck lines.
pub(crate) fn verdict_word(verdict: CheckVerdict) -> &'static str {
    match verdict {
        CheckVerdict::Pass => "pass",
        CheckVerdict::Fail => "fail",
        CheckVerdict::Inconclusive => "inconclusive",
    }
}

/// How a change (base -> candidate) reads in a prompt.
pub(crate) fn change_word(change: &PathChange) -> &'static str {
    match change {
        PathChange::Added { .. } => "added",
        PathChange::Modified { .. } => "modified",
        PathChange::Removed { .. } => "removed",
    }
}

/// One `- <path> (<change>)` line per change, at most `MAX_PROMPT_PATHS`, then how many more
/// there are; `(none)` without a change.
pub(crate) fn changed_path_lines(changes: &[PathChange]) -> String {
    if changes.is_empty() {
        return "(none)\n".to_string();
    }
    let mut lines: String = changes
        .iter()
        .take(MAX_PROMPT_PATHS)
        .map(|change| format!("- {} ({})\n", change.path(), change_word(change)))
        .collect();
    if changes.len() > MAX_PROMPT_PATHS {
        lines.push_str(&format!(
            "- ... and {} more\n",
            changes.len() - MAX_PROMPT_PATHS
        ));
    }
    lines
}

/// The fence that safely wraps `text` (longer than any run of backticks in it).
pub(crate) fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The last `max` characters of `text`.
pub(crate) fn tail_chars(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    let start = text
        .char_indices()
        .nth(count - max)
        .map(|(i, _)| i)
        .unwrap_or(0);
    &text[start..]
}

/// The first `max` characters of `text`.
pub(crate) fn head_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// The first `max` characters of `text`, with `…` where it was cut.
pub(crate) fn cap_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_character_boundaries() {
        assert_eq!(tail_chars("héllo", 3), "llo");
        assert_eq!(tail_chars("hé", 3), "hé");
        assert_eq!(head_chars("héllo", 2), "hé");
        assert_eq!(head_chars("hé", 3), "hé");
        assert_eq!(cap_chars("héllo", 2), "hé…");
        assert_eq!(cap_chars("hé", 2), "hé");
    }

    #[test]
    fn fences_outrun_the_backticks_inside() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b"), "````");
        assert_eq!(fence_for("`````"), "``````");
    }

    #[test]
    fn the_path_list_counts_what_it_leaves_out() {
        assert_eq!(changed_path_lines(&[]), "(none)\n");
        let changes: Vec<PathChange> = (0..MAX_PROMPT_PATHS + 2)
            .map(|i| PathChange::Removed {
                path: format!("f{i}"),
            })
            .collect();
        let lines = changed_path_lines(&changes);
        assert!(lines.starts_with("- f0 (removed)\n"), "{lines}");
        assert!(
            lines.ends_with("- f99 (removed)\n- ... and 2 more\n"),
            "{lines}"
        );
    }
}
