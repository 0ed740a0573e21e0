//! The rubric judge's prompt: the contract's goal, the rubric (dimensions, weights, threshold),
//! the mechanical evidence, the changed paths and bounded excerpts of the changed text files of
//! the frozen candidate (`prompt_text::files`). It asks for one fenced JSON block of scores and
//! a strategy. The texts are the templates in `prompt/`. Pure.

use std::fmt::Write as _;

use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::Rubric;
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::verdict::Evidence;

use crate::prompt_text::files::{FileExcerpt, FileView};
use crate::prompt_text::{changed_path_lines, fence_for, fill, tail_chars, text, verdict_word};

/// Characters of each check's output excerpt shown to the judge.
pub(crate) const RUBRIC_EXCERPT_CHARS: usize = 600;

/// The rubric judge's system prompt: score each dimension, then FINISH, REFINE or PIVOT.
const SYSTEM: &str = include_str!("prompt/system.md");
/// The question: `{spec}`, `{goal}`, `{threshold}`, `{dimensions}`, `{check_results}`,
/// `{changed_paths}`, `{changed_files}` and `{answer_shape}`.
const SCORE: &str = include_str!("prompt/score.md");
/// The JSON block asked for, with the rubric's own dimension names as `{scores}`.
const ANSWER_SHAPE: &str = include_str!("prompt/answer_shape.md");
/// Asked once when the judge's answer held no score.
const REPAIR: &str = include_str!("prompt/repair.md");

/// Everything the rubric judge may see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RubricInput<'a> {
    pub(crate) contract: &'a Contract,
    pub(crate) rubric: &'a Rubric,
    /// base -> candidate.
    pub(crate) changes: &'a [PathChange],
    pub(crate) evidence: &'a [Evidence],
    /// Excerpts of the added and modified files, in `changes` order.
    pub(crate) files: &'a [FileExcerpt],
}

pub(crate) fn rubric_system_prompt() -> &'static str {
    text(SYSTEM)
}

/// The JSON shape asked for, with the rubric's own dimension names.
fn answer_shape(rubric: &Rubric) -> String {
    let scores: Vec<String> = rubric
        .dimensions
        .iter()
        .map(|d| format!("{}: <0-10>", serde_json::Value::String(d.name.clone())))
        .collect();
    fill(text(ANSWER_SHAPE), &[("scores", &scores.join(", "))])
}

pub(crate) fn rubric_prompt(input: &RubricInput<'_>) -> String {
    let contract = input.contract;
    fill(
        SCORE,
        &[
            ("spec", contract.short_hash()),
            ("goal", contract.goal.trim()),
            ("threshold", &input.rubric.threshold.to_string()),
            ("dimensions", &dimension_lines(input.rubric)),
            ("check_results", &check_results(input)),
            ("changed_paths", &changed_path_lines(input.changes)),
            ("changed_files", &changed_files(input.files)),
            ("answer_shape", &answer_shape(input.rubric)),
        ],
    )
}

/// Asked once when the judge's answer held no score.
pub(crate) fn rubric_repair_prompt(rubric: &Rubric) -> String {
    fill(text(REPAIR), &[("answer_shape", &answer_shape(rubric))])
}

/// `- <name> (weight <w>): <description>` each.
fn dimension_lines(rubric: &Rubric) -> String {
    let mut p = String::new();
    for d in &rubric.dimensions {
        let _ = writeln!(
            p,
            "- {} (weight {}): {}",
            d.name,
            d.weight,
            d.description.trim()
        );
    }
    p
}

/// Each criterion's verdict on the candidate, with the tail of its check's output fenced.
fn check_results(input: &RubricInput<'_>) -> String {
    let mut p = String::new();
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
    p
}

/// The changed files' excerpts, fenced, and the names of those not shown; empty without any.
fn changed_files(files: &[FileExcerpt]) -> String {
    let mut p = String::new();
    if files.is_empty() {
        return p;
    }
    let _ = writeln!(p, "\n## Changed files in the candidate");
    let mut not_shown = Vec::new();
    for file in files {
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
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::rubric::reply::parse_rubric_reply;
    use loopgate_protocol::contract::Criterion;
    use loopgate_protocol::rubric::RubricDimension;
    use loopgate_protocol::verdict::CheckVerdict;

    use crate::prompt_text::fixtures::{check_evidence, one_change_of_each_kind};

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
            writable_paths: Vec::new(),
            spec_hash: String::new(),
        };
        c.spec_hash = c.compute_hash();
        c
    }

    /// The prompt for `rubric()`.
    fn prompt_of(
        contract: &Contract,
        changes: &[PathChange],
        evidence: &[Evidence],
        files: &[FileExcerpt],
    ) -> String {
        rubric_prompt(&RubricInput {
            contract,
            rubric: &rubric(),
            changes,
            evidence,
            files,
        })
    }

    #[test]
    fn prompt_holds_goal_rubric_evidence_paths_and_files() {
        let contract = contract();
        let tail = format!("{}TAIL-MARKER", "x".repeat(5000));
        let evidence = vec![check_evidence("runs", CheckVerdict::Fail, Some(1), &tail)];
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
        let prompt = prompt_of(&contract, &changes, &evidence, &files);
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
        let score = parse_rubric_reply(&reply, &rubric()).unwrap();
        assert_eq!(score.scores.len(), 2);
        assert_eq!(score.weighted_average, 9.0);
        assert!(rubric_repair_prompt(&rubric()).contains("\"code quality\": <0-10>"));
    }

    #[test]
    fn the_rubric_prompts_render_as_pinned() {
        let mut contract = contract();
        contract.spec_hash = "0123456789abcdef0123".into();
        let out = "\nTraceback ```\nNameError: x\n";
        let evidence = vec![check_evidence("runs", CheckVerdict::Fail, Some(1), out)];
        let mut changes = one_change_of_each_kind();
        changes.push(PathChange::Added {
            path: "logo.png".into(),
        });
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
        let prompt = prompt_of(&contract, &changes, &evidence, &files);
        assert_eq!(
            prompt,
            format!("{PINNED_RUBRIC_HEAD}{PINNED_RUBRIC_FULL}{PINNED_RUBRIC_ANSWER}")
        );
        contract.criteria.clear();
        let prompt = prompt_of(&contract, &[], &[], &[]);
        assert_eq!(
            prompt,
            format!("{PINNED_RUBRIC_HEAD}{PINNED_RUBRIC_BARE}{PINNED_RUBRIC_ANSWER}")
        );
        assert_eq!(rubric_system_prompt(), PINNED_RUBRIC_SYSTEM);
        assert_eq!(rubric_repair_prompt(&rubric()), PINNED_RUBRIC_REPAIR);
    }

    /// `rubric_full` pinned byte for byte, between its head and its answer section.
    const PINNED_RUBRIC_FULL: &str = r#"## Check results on the candidate snapshot
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

"#;

    /// `rubric_bare` pinned byte for byte, between its head and its answer section.
    const PINNED_RUBRIC_BARE: &str = r#"## Check results on the candidate snapshot
(no acceptance criteria)

## Changed paths (base -> candidate)
(none)

"#;

    /// `rubric_system` pinned byte for byte.
    const PINNED_RUBRIC_SYSTEM: &str = r#"You are the scoring judge of a coding task. You score a frozen snapshot of a workspace against a fixed rubric, using only the evidence given: the acceptance checks were run mechanically on that exact snapshot and their verdicts are facts. Score each dimension from 0 to 10 as written (exact names, paths and formats, no easier proxy); a shortcut (editing tests, hard-coding expected output) scores low. Then recommend a strategy: FINISH when the work is good enough, REFINE when the approach is right but needs polish, PIVOT when the approach itself is wrong and the work should be rolled back. Be brief and strict."#;

    /// `rubric_repair` pinned byte for byte.
    const PINNED_RUBRIC_REPAIR: &str = r#"Your answer held no score that could be read. Reply with only this JSON block, a number from 0 to 10 for each dimension:
```json
{"scores": {"Correctness": <0-10>, "code quality": <0-10>}, "overall": <weighted average>, "strategy": "FINISH|REFINE|PIVOT", "reason": "<one or two sentences>"}
```"#;

    /// The head of a rubric prompt of `rubric()` (goal and rubric), pinned byte for byte.
    const PINNED_RUBRIC_HEAD: &str = r#"## Goal (frozen contract, spec 0123456789ab)
Write hello.py printing hello

## Rubric (score each dimension 0-10; passes at a weighted average of 8.5 or more)
- Correctness (weight 2): prints exactly hello
- code quality (weight 1): idiomatic

"#;

    /// The answer section of a rubric prompt of `rubric()`, pinned byte for byte.
    const PINNED_RUBRIC_ANSWER: &str = r#"## Your answer
Reply with exactly one fenced JSON block, using the dimension names above as keys:
```json
{"scores": {"Correctness": <0-10>, "code quality": <0-10>}, "overall": <weighted average>, "strategy": "FINISH|REFINE|PIVOT", "reason": "<one or two sentences>"}
```
FINISH: good enough as it is. REFINE: the approach is right, it needs polish. PIVOT: the approach is wrong; roll back and try another.
"#;
}
