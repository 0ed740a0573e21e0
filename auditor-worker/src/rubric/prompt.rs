//! The rubric judge's prompt: the contract's goal, the rubric (dimensions, weights, threshold),
//! the mechanical evidence, the changed paths and bounded excerpts of the changed text files of
//! the frozen candidate. It asks for one fenced JSON block of scores and a strategy. Pure: the
//! files are read by `rubric_judge.rs`; what an excerpt of their bytes is gets decided here.

use std::fmt::Write as _;

use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::Rubric;
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::verdict::Evidence;

use crate::judge::prompt::{tail_chars, verdict_word, MAX_PROMPT_PATHS};

/// Bytes of one changed file shown to the judge.
pub(crate) const MAX_FILE_EXCERPT_BYTES: usize = 4 * 1024;
/// Bytes of all changed files together shown to the judge.
pub(crate) const MAX_EXCERPTS_TOTAL_BYTES: usize = 12 * 1024;
/// Characters of each check's output excerpt shown to the judge.
pub(crate) const RUBRIC_EXCERPT_CHARS: usize = 600;

pub(crate) const RUBRIC_SYSTEM: &str =
    "You are the scoring judge of a coding task. You score a frozen \
snapshot of a workspace against a fixed rubric, using only the evidence given: the acceptance \
checks were run mechanically on that exact snapshot and their verdicts are facts. Score each \
dimension from 0 to 10 as written (exact names, paths and formats, no easier proxy); a shortcut \
(editing tests, hard-coding expected output) scores low. Then recommend a strategy: FINISH when \
the work is good enough, REFINE when the approach is right but needs polish, PIVOT when the \
approach itself is wrong and the work should be rolled back. Be brief and strict.";

/// What the judge sees of one changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileView {
    /// UTF-8 text, cut to the excerpt limits when `truncated`.
    Text { text: String, truncated: bool },
    /// Not text (a NUL byte or invalid UTF-8): named, not shown.
    Binary,
    /// Not shown: the excerpt budget was spent, or it is not a readable regular file.
    NotShown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileExcerpt {
    pub path: String,
    pub view: FileView,
}

/// Everything the rubric judge may see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RubricInput<'a> {
    pub contract: &'a Contract,
    pub rubric: &'a Rubric,
    /// base -> candidate.
    pub changes: &'a [PathChange],
    pub evidence: &'a [Evidence],
    /// Excerpts of the added and modified files, in `changes` order.
    pub files: &'a [FileExcerpt],
}

/// The view of a file whose first `bytes` were read (up to `limit`); `full_len` is its size.
/// Text is cut back to a character boundary; a NUL byte or invalid UTF-8 before the cut is
/// binary.
pub(crate) fn file_view(bytes: &[u8], limit: usize, full_len: u64) -> FileView {
    let head = &bytes[..bytes.len().min(limit)];
    if head.contains(&0) {
        return FileView::Binary;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // Cut inside a multi-byte character at the end: keep what precedes it.
        Err(err) if err.error_len().is_none() => {
            std::str::from_utf8(&head[..err.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return FileView::Binary,
    };
    FileView::Text {
        text: text.to_string(),
        truncated: (text.len() as u64) < full_len,
    }
}

fn change_word(change: &PathChange) -> &'static str {
    match change {
        PathChange::Added { .. } => "added",
        PathChange::Modified { .. } => "modified",
        PathChange::Removed { .. } => "removed",
    }
}

/// The fence that safely wraps `text` (longer than any run of backticks in it).
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The JSON shape asked for, with the rubric's own dimension names.
fn answer_shape(rubric: &Rubric) -> String {
    let scores: Vec<String> = rubric
        .dimensions
        .iter()
        .map(|d| format!("{}: <0-10>", serde_json::Value::String(d.name.clone())))
        .collect();
    format!(
        "```json\n{{\"scores\": {{{}}}, \"overall\": <weighted average>, \
         \"strategy\": \"FINISH|REFINE|PIVOT\", \"reason\": \"<one or two sentences>\"}}\n```",
        scores.join(", ")
    )
}

pub(crate) fn rubric_prompt(input: &RubricInput<'_>) -> String {
    let mut p = String::new();
    let _ = writeln!(
        p,
        "## Goal (frozen contract, spec {})\n{}\n",
        input.contract.short_hash(),
        input.contract.goal.trim()
    );
    let _ = writeln!(
        p,
        "## Rubric (score each dimension 0-10; passes at a weighted average of {} or more)",
        input.rubric.threshold
    );
    for d in &input.rubric.dimensions {
        let _ = writeln!(
            p,
            "- {} (weight {}): {}",
            d.name,
            d.weight,
            d.description.trim()
        );
    }
    let _ = writeln!(p, "\n## Check results on the candidate snapshot");
    if input.contract.criteria.is_empty() {
        let _ = writeln!(p, "(no acceptance criteria)");
    }
    for c in &input.contract.criteria {
        match input.evidence.iter().find(|e| e.check_id == c.id) {
            Some(e) => {
                let _ = writeln!(
                    p,
                    "### {}: {} ({})",
                    c.id,
                    verdict_word(e.verdict),
                    c.description.trim()
                );
                let excerpt = tail_chars(e.output_excerpt.trim(), RUBRIC_EXCERPT_CHARS);
                if !excerpt.is_empty() {
                    let fence = fence_for(excerpt);
                    let _ = writeln!(p, "{fence}\n{excerpt}\n{fence}");
                }
            }
            None => {
                let _ = writeln!(p, "### {}: not checked ({})", c.id, c.description.trim());
            }
        }
    }
    let _ = writeln!(p, "\n## Changed paths (base -> candidate)");
    if input.changes.is_empty() {
        let _ = writeln!(p, "(none)");
    }
    for change in input.changes.iter().take(MAX_PROMPT_PATHS) {
        let _ = writeln!(p, "- {} ({})", change.path(), change_word(change));
    }
    if input.changes.len() > MAX_PROMPT_PATHS {
        let _ = writeln!(
            p,
            "- ... and {} more",
            input.changes.len() - MAX_PROMPT_PATHS
        );
    }
    if !input.files.is_empty() {
        let _ = writeln!(p, "\n## Changed files in the candidate");
    }
    let mut not_shown = Vec::new();
    for file in input.files {
        match &file.view {
            FileView::Text { text, truncated } => {
                let cut = if *truncated { " (first part only)" } else { "" };
                let fence = fence_for(text);
                let _ = writeln!(p, "### {}{cut}\n{fence}\n{text}\n{fence}", file.path);
            }
            FileView::Binary => not_shown.push(format!("{} (binary)", file.path)),
            FileView::NotShown => not_shown.push(file.path.clone()),
        }
    }
    if !not_shown.is_empty() {
        let _ = writeln!(p, "Not shown: {}", not_shown.join(", "));
    }
    let _ = write!(
        p,
        "\n## Your answer\n\
         Reply with exactly one fenced JSON block, using the dimension names above as keys:\n\
         {}\n\
         FINISH: good enough as it is. REFINE: the approach is right, it needs polish. \
         PIVOT: the approach is wrong; roll back and try another.\n",
        answer_shape(input.rubric)
    );
    p
}

/// Asked once when the judge's answer held no score.
pub(crate) fn rubric_repair_prompt(rubric: &Rubric) -> String {
    format!(
        "Your answer held no score that could be read. Reply with only this JSON block, \
         a number from 0 to 10 for each dimension:\n{}",
        answer_shape(rubric)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::rubric::reply::parse_judge_output;
    use loopgate_protocol::contract::Criterion;
    use loopgate_protocol::rubric::RubricDimension;
    use loopgate_protocol::verdict::CheckVerdict;

    fn rubric() -> Rubric {
        Rubric {
            dimensions: vec![
                RubricDimension {
                    name: "Correctness".into(),
                    weight: 2.0,
                    description: "prints exactly hello".into(),
                },
                RubricDimension {
                    name: "code quality".into(),
                    weight: 1.0,
                    description: "idiomatic".into(),
                },
            ],
            threshold: 8.5,
        }
    }

    fn contract() -> Contract {
        let mut c = Contract {
            goal: "Write hello.py printing hello".into(),
            criteria: vec![
                Criterion {
                    id: "runs".into(),
                    description: "it runs".into(),
                    check: Some("python3 hello.py".into()),
                    blocking: true,
                    timeout_secs: 5,
                    source: Default::default(),
                    clause: None,
                },
                Criterion {
                    id: "style".into(),
                    description: "reads well".into(),
                    check: None,
                    blocking: false,
                    timeout_secs: 5,
                    source: Default::default(),
                    clause: None,
                },
            ],
            protected_paths: vec![],
            rubric: Some(rubric()),
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    #[test]
    fn file_view_cases() {
        let cases: &[(&[u8], usize, u64, FileView)] = &[
            (
                b"print('hi')\n",
                100,
                12,
                FileView::Text {
                    text: "print('hi')\n".into(),
                    truncated: false,
                },
            ),
            (
                b"abcdef",
                3,
                6,
                FileView::Text {
                    text: "abc".into(),
                    truncated: true,
                },
            ),
            // "é" is two bytes; a cut between them keeps the text before it.
            (
                "aé".as_bytes(),
                2,
                3,
                FileView::Text {
                    text: "a".into(),
                    truncated: true,
                },
            ),
            (b"\x7fELF\0\x01", 100, 6, FileView::Binary),
            (b"\xff\xfe\xfdabc", 100, 6, FileView::Binary),
            (
                b"",
                100,
                0,
                FileView::Text {
                    text: String::new(),
                    truncated: false,
                },
            ),
        ];
        for (bytes, limit, len, want) in cases {
            assert_eq!(&file_view(bytes, *limit, *len), want, "{bytes:?}");
        }
    }

    #[test]
    fn prompt_holds_goal_rubric_evidence_paths_and_files() {
        let contract = contract();
        let evidence = vec![Evidence {
            artifact_version: "snap".into(),
            check_id: "runs".into(),
            verdict: CheckVerdict::Fail,
            produced_at: 1,
            log_digest: None,
            exit_code: Some(1),
            duration_ms: 3,
            output_excerpt: format!("{}TAIL-MARKER", "x".repeat(5000)),
            isolated: None,
            screenshots: Vec::new(),
        }];
        let changes = vec![
            PathChange::Added {
                path: "hello.py".into(),
            },
            PathChange::Removed {
                path: "old.py".into(),
            },
            PathChange::Added {
                path: "logo.png".into(),
            },
        ];
        let files = vec![
            FileExcerpt {
                path: "hello.py".into(),
                view: FileView::Text {
                    text: "print('hello') # ```".into(),
                    truncated: true,
                },
            },
            FileExcerpt {
                path: "logo.png".into(),
                view: FileView::Binary,
            },
        ];
        let prompt = rubric_prompt(&RubricInput {
            contract: &contract,
            rubric: &rubric(),
            changes: &changes,
            evidence: &evidence,
            files: &files,
        });
        for needle in [
            "Write hello.py printing hello",
            "weighted average of 8.5 or more",
            "- Correctness (weight 2): prints exactly hello",
            "- code quality (weight 1): idiomatic",
            "### runs: fail (it runs)",
            "TAIL-MARKER",
            "### style: not checked (reads well)",
            "- hello.py (added)",
            "- old.py (removed)",
            "### hello.py (first part only)\n````\nprint('hello') # ```\n````",
            "Not shown: logo.png (binary)",
            "\"Correctness\": <0-10>, \"code quality\": <0-10>",
            "FINISH|REFINE|PIVOT",
        ] {
            assert!(prompt.contains(needle), "missing {needle}:\n{prompt}");
        }
        assert!(!prompt.contains(&"x".repeat(RUBRIC_EXCERPT_CHARS + 1)));
    }

    #[test]
    fn the_asked_for_shape_is_what_the_parser_reads() {
        let reply = answer_shape(&rubric())
            .replace("<0-10>", "9")
            .replace("<weighted average>", "9")
            .replace("FINISH|REFINE|PIVOT", "FINISH")
            .replace("<one or two sentences>", "fine");
        let score = parse_judge_output(&reply, &rubric()).unwrap();
        assert_eq!(score.scores.len(), 2);
        assert_eq!(score.weighted_average, 9.0);
        assert!(rubric_repair_prompt(&rubric()).contains("\"code quality\": <0-10>"));
    }

    #[test]
    fn the_rubric_prompts_render_as_pinned() {
        let mut contract = contract();
        contract.spec_hash = "0123456789abcdef0123".into();
        let evidence = vec![Evidence {
            artifact_version: "snap".into(),
            check_id: "runs".into(),
            verdict: CheckVerdict::Fail,
            produced_at: 1,
            log_digest: None,
            exit_code: Some(1),
            duration_ms: 3,
            output_excerpt: "\nTraceback ```\nNameError: x\n".into(),
            isolated: None,
            screenshots: Vec::new(),
        }];
        let changes = vec![
            PathChange::Added {
                path: "hello.py".into(),
            },
            PathChange::Modified {
                path: "README.md".into(),
            },
            PathChange::Removed {
                path: "old.py".into(),
            },
            PathChange::Added {
                path: "logo.png".into(),
            },
        ];
        let files = vec![
            FileExcerpt {
                path: "hello.py".into(),
                view: FileView::Text {
                    text: "print('hello')\n".into(),
                    truncated: false,
                },
            },
            FileExcerpt {
                path: "README.md".into(),
                view: FileView::Text {
                    text: "# Hello ````".into(),
                    truncated: true,
                },
            },
            FileExcerpt {
                path: "logo.png".into(),
                view: FileView::Binary,
            },
            FileExcerpt {
                path: "huge.txt".into(),
                view: FileView::NotShown,
            },
        ];
        let prompt = rubric_prompt(&RubricInput {
            contract: &contract,
            rubric: &rubric(),
            changes: &changes,
            evidence: &evidence,
            files: &files,
        });
        assert_eq!(prompt, PINNED_RUBRIC_FULL);
        contract.criteria.clear();
        let prompt = rubric_prompt(&RubricInput {
            contract: &contract,
            rubric: &rubric(),
            changes: &[],
            evidence: &[],
            files: &[],
        });
        assert_eq!(prompt, PINNED_RUBRIC_BARE);
        assert_eq!(RUBRIC_SYSTEM, PINNED_RUBRIC_SYSTEM);
        assert_eq!(rubric_repair_prompt(&rubric()), PINNED_RUBRIC_REPAIR);
    }

    /// `rubric_full` pinned byte for byte.
    const PINNED_RUBRIC_FULL: &str = r#"## Goal (frozen contract, spec 0123456789ab)
Write hello.py printing hello

## Rubric (score each dimension 0-10; passes at a weighted average of 8.5 or more)
- Correctness (weight 2): prints exactly hello
- code quality (weight 1): idiomatic

## Check results on the candidate snapshot
### runs: fail (it runs)
````
Traceback ```
NameError: x
````
### style: not checked (reads well)

## Changed paths (base -> candidate)
- hello.py (added)
- README.md (modified)
- old.py (removed)
- logo.png (added)

## Changed files in the candidate
### hello.py
```
print('hello')

```
### README.md (first part only)
`````
# Hello ````
`````
Not shown: logo.png (binary), huge.txt

## Your answer
Reply with exactly one fenced JSON block, using the dimension names above as keys:
```json
{"scores": {"Correctness": <0-10>, "code quality": <0-10>}, "overall": <weighted average>, "strategy": "FINISH|REFINE|PIVOT", "reason": "<one or two sentences>"}
```
FINISH: good enough as it is. REFINE: the approach is right, it needs polish. PIVOT: the approach is wrong; roll back and try another.
"#;

    /// `rubric_bare` pinned byte for byte.
    const PINNED_RUBRIC_BARE: &str = r#"## Goal (frozen contract, spec 0123456789ab)
Write hello.py printing hello

## Rubric (score each dimension 0-10; passes at a weighted average of 8.5 or more)
- Correctness (weight 2): prints exactly hello
- code quality (weight 1): idiomatic

## Check results on the candidate snapshot
(no acceptance criteria)

## Changed paths (base -> candidate)
(none)

## Your answer
Reply with exactly one fenced JSON block, using the dimension names above as keys:
```json
{"scores": {"Correctness": <0-10>, "code quality": <0-10>}, "overall": <weighted average>, "strategy": "FINISH|REFINE|PIVOT", "reason": "<one or two sentences>"}
```
FINISH: good enough as it is. REFINE: the approach is right, it needs polish. PIVOT: the approach is wrong; roll back and try another.
"#;

    /// `rubric_system` pinned byte for byte.
    const PINNED_RUBRIC_SYSTEM: &str = r#"You are the scoring judge of a coding task. You score a frozen snapshot of a workspace against a fixed rubric, using only the evidence given: the acceptance checks were run mechanically on that exact snapshot and their verdicts are facts. Score each dimension from 0 to 10 as written (exact names, paths and formats, no easier proxy); a shortcut (editing tests, hard-coding expected output) scores low. Then recommend a strategy: FINISH when the work is good enough, REFINE when the approach is right but needs polish, PIVOT when the approach itself is wrong and the work should be rolled back. Be brief and strict."#;

    /// `rubric_repair` pinned byte for byte.
    const PINNED_RUBRIC_REPAIR: &str = r#"Your answer held no score that could be read. Reply with only this JSON block, a number from 0 to 10 for each dimension:
```json
{"scores": {"Correctness": <0-10>, "code quality": <0-10>}, "overall": <weighted average>, "strategy": "FINISH|REFINE|PIVOT", "reason": "<one or two sentences>"}
```"#;
}
