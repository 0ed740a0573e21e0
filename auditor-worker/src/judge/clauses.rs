//! Clause-by-clause judgment: one short question per goal clause the contract has no working
//! check for (a `source = "goal"` criterion without a check, or one whose derived check is
//! broken by its own text: `check_text`), answered `met | unmet | unknown` with a one-line
//! reason; a `met` stands only on a quote of what the judge was shown (`quotes`, unless the
//! request says `unquoted_met`). Small models are far more
//! reliable at one question at a time than at one holistic verdict. Each answer becomes the
//! criterion's evidence on the candidate (`met` passes, `unmet` fails, `unknown` is
//! inconclusive), so the gate stays closed on anything but `met` and the next executor sees the
//! clause in its failing evidence. The texts are the templates in `clauses/`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use loopgate_common::goal::criteria::{clause_excerpt, parse_clause_answer, ClauseVerdict};
use loopgate_common::goal::derived_checks::SetAside;
use loopgate_common::goal::words::exact_words;
use loopgate_models::ChatClient;
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;

use crate::evidence::unix_millis;
use crate::judge::clause_commands::{command_outputs, commands_section, CommandRun};
use crate::judge::clause_questions::{clause_questions, ClauseQuestion};
use crate::judge::quotes::earned_verdict;
use crate::judge_context::{ask, Asked, JudgeContext, Question};
use crate::prompt_text::files::{changed_file_excerpts, FileExcerpt, FileView};
use crate::prompt_text::{fill, tail_chars, text, verdict_word};

/// Characters of each check's output shown with a clause.
const CLAUSE_EXCERPT_CHARS: usize = 300;
/// No question is put to the judge with less time than this left.
const LEAST_QUESTION_TIME: Duration = Duration::from_millis(50);

/// The clause judge's system prompt: judge the one requirement as worded, in one line. It
/// says nothing more: wordings that also told the judge that a passing check is evidence, or
/// listed the checks' commands, or asked for a concrete violation, made a small judge answer
/// `met` less often on work that meets the clause.
const SYSTEM: &str = include_str!("clauses/system.md");
/// One clause's question: `{clause}`, `{goal}`, `{files}`, `{commands}` (what the clause's
/// commands printed) and `{checks}` (the other checks' results).
const QUESTION: &str = include_str!("clauses/question.md");
/// Asked once when the answer could not be read.
const REPAIR: &str = include_str!("clauses/repair.md");

/// The user prompt for one clause: the quoted clause, the goal, the files it concerns (those it
/// names, and the changed ones) and the other checks' results.
pub(crate) fn clause_prompt(
    goal: &str,
    question: &ClauseQuestion<'_>,
    files: &[FileExcerpt],
    evidence: &[Evidence],
    commands: &[CommandRun],
) -> String {
    fill(
        QUESTION,
        &[
            ("clause", question.clause.trim()),
            ("goal", goal.trim()),
            ("files", &file_sections(files)),
            (
                "commands",
                &commands_section(&question.criterion.id, commands),
            ),
            ("checks", &other_checks(&question.criterion.id, evidence)),
        ],
    )
}

/// What the judge was shown of the snapshot for one clause, as a quote may be taken from it:
/// the files' text, what the clause's commands printed and the other checks' output, one
/// paragraph each. Not the clause or the goal, which are no evidence, nor the prompt's own
/// words around them (a check's `pass, exit 0` line says nothing of this clause).
fn shown_evidence(
    question: &ClauseQuestion<'_>,
    files: &[FileExcerpt],
    evidence: &[Evidence],
    commands: &[CommandRun],
) -> String {
    let mut shown = String::new();
    for f in files {
        if let FileView::Text { text, .. } = &f.view {
            let _ = writeln!(shown, "{text}\n");
        }
    }
    let id = &question.criterion.id;
    for output in command_outputs(id, commands) {
        let _ = writeln!(shown, "{output}\n");
    }
    for e in evidence.iter().filter(|e| &e.check_id != id) {
        let excerpt = tail_chars(e.output_excerpt.trim(), CLAUSE_EXCERPT_CHARS);
        let _ = writeln!(shown, "{excerpt}\n");
    }
    shown
}

/// Each text file in a fence under its path.
fn file_sections(files: &[FileExcerpt]) -> String {
    let mut p = String::new();
    let mut shown = 0;
    for f in files {
        if let FileView::Text { text, truncated } = &f.view {
            shown += 1;
            let cut = if *truncated { " (cut)" } else { "" };
            let _ = writeln!(p, "### {}{cut}\n```\n{}\n```", f.path, text.trim_end());
        }
    }
    if shown == 0 {
        let _ = writeln!(p, "(no file it names exists, and no text file changed)");
    }
    p
}

/// The results of the checks other than criterion `id`'s own, one line each; empty without
/// any.
fn other_checks(id: &str, evidence: &[Evidence]) -> String {
    let checks: Vec<&Evidence> = evidence.iter().filter(|e| e.check_id != id).collect();
    let mut p = String::new();
    if checks.is_empty() {
        return p;
    }
    let _ = writeln!(p, "\n## Check results on this snapshot");
    for e in checks {
        let exit = e
            .exit_code
            .map(|c| format!(", exit {c}"))
            .unwrap_or_default();
        let excerpt = tail_chars(e.output_excerpt.trim(), CLAUSE_EXCERPT_CHARS);
        let _ = writeln!(
            p,
            "- {}: {}{exit}{}",
            e.check_id,
            verdict_word(e.verdict),
            if excerpt.is_empty() {
                String::new()
            } else {
                format!(": {}", excerpt.replace('\n', " | "))
            }
        );
    }
    p
}

/// The files a clause concerns: those it names that exist, then the changed ones.
fn clause_paths(clause: &str, changes: &[PathChange]) -> Vec<PathChange> {
    let mut paths: Vec<PathChange> = exact_words(clause)
        .names
        .into_iter()
        .filter(|n| !n.ends_with('/'))
        .map(|path| PathChange::Modified { path })
        .collect();
    for change in changes {
        if matches!(change, PathChange::Removed { .. })
            || paths.iter().any(|p| p.path() == change.path())
        {
            continue;
        }
        paths.push(change.clone());
    }
    paths
}

/// Ask the request's judge about every clause question of the audit (`set_aside`: the derived
/// checks whose clause is judged instead), in order, within the audit's deadline: the answers
/// replace or add to the checks' evidence for those criteria.
/// Returns the gap lines and the tokens. Without a judge model here every question is
/// `unknown` (nothing could judge it), which keeps the gate closed.
pub(crate) async fn judge_clauses(
    cx: &JudgeContext<'_>,
    evidence: &mut Vec<Evidence>,
    commands: &[CommandRun],
    set_aside: &[SetAside<'_>],
) -> (Vec<String>, Usage) {
    let questions: Vec<ClauseQuestion<'_>> = clause_questions(cx.req, set_aside);
    let mut gaps = Vec::new();
    let mut usage = Usage::default();
    let mut judged: Vec<Evidence> = Vec::new();
    for q in &questions {
        let started = Instant::now();
        let (verdict, reason) = match cx.model.client() {
            None => (
                ClauseVerdict::Unknown,
                "no judge model is configured on this auditor".to_string(),
            ),
            Some(client) => {
                let files =
                    changed_file_excerpts(cx.workspace, &clause_paths(q.clause, cx.changes)).await;
                let prompt = clause_prompt(&cx.req.contract.goal, q, &files, evidence, commands);
                let shown =
                    (!cx.req.unquoted_met).then(|| shown_evidence(q, &files, evidence, commands));
                ask_clause(client, prompt, shown.as_deref(), cx.deadline, &mut usage).await
            }
        };
        gaps.extend(clause_gaps(q, verdict, &reason));
        judged.push(clause_evidence(cx, q, verdict, &reason, started));
    }
    for j in judged {
        evidence.retain(|e| e.check_id != j.check_id);
        evidence.push(j);
    }
    (gaps, usage)
}

/// The gap lines of one judged clause: its derived check broken, its answer not `met`.
fn clause_gaps(q: &ClauseQuestion<'_>, verdict: ClauseVerdict, reason: &str) -> Vec<String> {
    let mut gaps = Vec::new();
    if let Some(why) = &q.broken {
        gaps.push(format!(
            "derived check '{}' is broken ({why}): it does not decide; its clause was judged \
             instead ({})",
            q.criterion.id,
            verdict.as_str()
        ));
    }
    if verdict != ClauseVerdict::Met {
        gaps.push(format!(
            "goal clause '{}' judged {}: {reason}",
            q.criterion.id,
            verdict.as_str()
        ));
    }
    gaps
}

/// The judged clause as its criterion's evidence on the candidate.
fn clause_evidence(
    cx: &JudgeContext<'_>,
    q: &ClauseQuestion<'_>,
    verdict: ClauseVerdict,
    reason: &str,
    started: Instant,
) -> Evidence {
    let mut excerpt = clause_excerpt(q.clause, verdict, reason);
    if let Some(why) = &q.broken {
        excerpt = format!("derived check broken: {why}; {excerpt}");
    }
    Evidence {
        artifact_version: cx.req.candidate_snapshot.clone(),
        check_id: q.criterion.id.clone(),
        verdict: verdict.check_verdict(),
        produced_at: unix_millis(),
        log_digest: None,
        exit_code: None,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        output_excerpt: excerpt,
        // A judgment, not a command: nothing ran in or out of the sandbox.
        isolated: None,
        screenshots: Vec::new(),
    }
}

/// One question, one repair when the answer cannot be read; `unknown` when the model fails,
/// runs out of time or still cannot be read. With `shown` (what the judge was shown), a `met`
/// stands only on a quote of it ([`earned_verdict`]).
async fn ask_clause(
    client: &ChatClient,
    prompt: String,
    shown: Option<&str>,
    deadline: Instant,
    usage: &mut Usage,
) -> (ClauseVerdict, String) {
    let question = Question {
        system: text(SYSTEM),
        prompt,
        repair: text(REPAIR).to_string(),
        least_time: LEAST_QUESTION_TIME,
    };
    let why = match ask(client, question, deadline, usage, |text, _| {
        let (verdict, reason) = parse_clause_answer(text)?;
        Some(match shown {
            Some(shown) => earned_verdict(verdict, reason, text, shown),
            None => (verdict, reason),
        })
    })
    .await
    {
        Asked::Answer(answer) => return answer,
        Asked::OutOfTime => "the judge ran out of time".to_string(),
        Asked::Failed(err) => format!("the judge's call failed ({:?})", err.kind()),
        Asked::NoReplyWithin(_) => "the judge did not answer in time".to_string(),
        Asked::Unreadable => "the judge's answer could not be read".to_string(),
    };
    (ClauseVerdict::Unknown, why)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use loopgate_protocol::verdict::CheckVerdict;

    use crate::prompt_text::fixtures::{check_evidence, goal_criterion};

    /// A derived check that failed on the candidate with a planted "syntax error" keeps its
    /// failing evidence: no question replaces it. Only a check set aside by its own text is
    /// judged (here with no model: `unknown`, which still keeps the gate closed).
    #[tokio::test]
    async fn a_failing_derived_check_keeps_its_evidence_whatever_it_printed() {
        use crate::judge_context::JudgeModel;
        use loopgate_common::goal::derived_checks::SetAside;
        let mut order = goal_criterion("order", "keeping the order of first occurrence");
        order.check = Some("test \"$(python3 dedupe.py | head -1)\" = b".into());
        let mut req: loopgate_protocol::wire::AuditRequest =
            serde_json::from_value(serde_json::json!({
                "run_id": "r", "generation": 1, "round": 1, "purpose": "round",
                "contract": {"goal": "g", "criteria": [], "protected_paths": [], "spec_hash": ""},
                "objective": "o", "write_scope": [], "base_snapshot": "b",
                "candidate_snapshot": "snap", "auditor_profile": null, "episode_secs": 5
            }))
            .unwrap();
        req.contract.criteria = vec![order];
        let planted = "sh: 1: Syntax error: Unterminated quoted string\nsh: 1: jq: not found";
        let failing = check_evidence("order", CheckVerdict::Fail, Some(1), planted);
        let workspace = tempfile::tempdir().unwrap();
        let cx = JudgeContext {
            req: &req,
            changes: &[],
            workspace: workspace.path(),
            model: JudgeModel::NoneNamed,
            deadline: Instant::now() + Duration::from_secs(5),
        };
        let mut evidence = vec![failing.clone()];
        let (gaps, _) = judge_clauses(&cx, &mut evidence, &[], &[]).await;
        assert_eq!(evidence, vec![failing], "{gaps:?}");
        assert!(gaps.is_empty(), "{gaps:?}");
        // Set aside by its text, the clause is asked instead (unknown without a model).
        let aside = [SetAside {
            criterion: &req.contract.criteria[0],
            clause: "keeping the order of first occurrence",
            why: "the shell cannot parse the check (x)".into(),
        }];
        let (gaps, _) = judge_clauses(&cx, &mut evidence, &[], &aside).await;
        assert_eq!(evidence.len(), 1);
        assert_eq!(evidence[0].verdict, CheckVerdict::Inconclusive);
        assert!(
            gaps[0].contains("derived check 'order' is broken"),
            "{gaps:?}"
        );
    }

    #[test]
    fn the_prompt_quotes_the_clause_and_shows_files_and_checks() {
        let c = goal_criterion("goal-1", "keeping the order of first occurrence");
        let q = ClauseQuestion {
            criterion: &c,
            clause: "keeping the order of first occurrence",
            broken: None,
        };
        let files = vec![FileExcerpt {
            path: "dedupe.py".into(),
            view: FileView::Text {
                text: "print(sorted(set(lines)))".into(),
                truncated: false,
            },
        }];
        let p = clause_prompt(
            "Write dedupe.py",
            &q,
            &files,
            &[check_evidence(
                "two-lines",
                CheckVerdict::Pass,
                Some(0),
                "ok",
            )],
            &[],
        );
        for needle in [
            "\"keeping the order of first occurrence\"",
            "### dedupe.py",
            "sorted(set(lines))",
            "- two-lines: pass, exit 0: ok",
            "met|unmet|unknown",
        ] {
            assert!(p.contains(needle), "missing {needle}\n{p}");
        }
        // What the clause's commands printed is in its prompt.
        let run = CommandRun {
            command: "python3 dedupe.py".into(),
            call: None,
            for_clauses: vec!["goal-1".into()],
            exit_code: Some(0),
            output: "b\na\n".into(),
        };
        let p = clause_prompt("Write dedupe.py", &q, &files, &[], &[run]);
        assert!(p.contains("`python3 dedupe.py` (exit 0) printed:"), "{p}");
        let paths = clause_paths(
            "Write dedupe.py into out/",
            &[
                PathChange::Added {
                    path: "dedupe.py".into(),
                },
                PathChange::Removed {
                    path: "old.py".into(),
                },
                PathChange::Added {
                    path: "notes.md".into(),
                },
            ],
        );
        let names: Vec<&str> = paths.iter().map(PathChange::path).collect();
        assert_eq!(names, vec!["dedupe.py", "notes.md"]);
    }

    /// A quote must come from the files or from what a command printed: the prompt's own
    /// words around them (a check's verdict line, a command's header) are no evidence.
    #[test]
    fn what_a_met_may_quote_is_the_files_and_the_outputs() {
        let c = goal_criterion("goal-1", "sorted by age");
        let q = ClauseQuestion {
            criterion: &c,
            clause: "sorted by age",
            broken: None,
        };
        let files = vec![FileExcerpt {
            path: "people.csv".into(),
            view: FileView::Text {
                text: "name,age\nbob,7\nada,19\n".into(),
                truncated: false,
            },
        }];
        let evidence = [check_evidence(
            "row-count",
            CheckVerdict::Pass,
            Some(0),
            "3 rows counted",
        )];
        let run = CommandRun {
            command: "python3 show_people.py".into(),
            call: None,
            for_clauses: vec!["goal-1".into()],
            exit_code: Some(0),
            output: "ages in order: 7 19\n".into(),
        };
        let shown = shown_evidence(&q, &files, &evidence, &[run]);
        use crate::judge::quotes::quote_found;
        for (answer, found) in [
            ("met - `bob,7 ada,19`", true),
            ("met - `ages in order: 7 19`", true),
            ("met - `3 rows counted`", true),
            ("met - `row-count: pass, exit 0`", false),
            ("met - `python3 show_people.py`", false),
            ("met - `sorted by age`", false),
        ] {
            assert_eq!(quote_found(answer, &shown), found, "{answer}\n{shown}");
        }
    }

    #[test]
    fn the_clause_prompt_renders_as_pinned() {
        let c = goal_criterion("goal-1", "keeping the order of first occurrence");
        let q = ClauseQuestion {
            criterion: &c,
            clause: " keeping the order of first occurrence\n",
            broken: None,
        };
        let files = vec![
            FileExcerpt {
                path: "dedupe.py".into(),
                view: FileView::Text {
                    text: "import sys\nprint(sorted(set(lines)))\n\n".into(),
                    truncated: false,
                },
            },
            FileExcerpt {
                path: "big.txt".into(),
                view: FileView::Text {
                    text: "a\nb".into(),
                    truncated: true,
                },
            },
            FileExcerpt {
                path: "logo.png".into(),
                view: FileView::Binary,
            },
            FileExcerpt {
                path: "gone.txt".into(),
                view: FileView::NotShown,
            },
        ];
        let evidence = [
            check_evidence("two-lines", CheckVerdict::Pass, Some(0), "ok\nfine\n"),
            check_evidence("goal-1", CheckVerdict::Fail, Some(1), "its own"),
            check_evidence("slow", CheckVerdict::Inconclusive, None, ""),
        ];
        let commands = [
            CommandRun {
                command: "python3 dedupe.py".into(),
                call: None,
                for_clauses: vec!["goal-1".into()],
                exit_code: Some(0),
                output: "b\na\n".into(),
            },
            CommandRun {
                command: "python3 -c ...".into(),
                call: Some("dedupe(['b', 'a', 'b'])".into()),
                for_clauses: vec!["goal-1".into()],
                exit_code: Some(0),
                output: "['b', 'a']\n".into(),
            },
            CommandRun {
                command: "python3 -c ...".into(),
                call: Some("dedupe(None)".into()),
                for_clauses: vec!["goal-1".into()],
                exit_code: None,
                output: "Traceback\nTypeError".into(),
            },
        ];
        let p = clause_prompt("Write dedupe.py\n", &q, &files, &evidence, &commands);
        assert_eq!(p, PINNED_CLAUSE_FULL);
        let p = clause_prompt("Write dedupe.py", &q, &[], &[], &[]);
        assert_eq!(p, PINNED_CLAUSE_BARE);
        assert_eq!(text(SYSTEM), PINNED_CLAUSE_SYSTEM);
        assert_eq!(text(REPAIR), PINNED_CLAUSE_REPAIR);
    }

    /// `clause_full` pinned byte for byte.
    const PINNED_CLAUSE_FULL: &str = r#"## Requirement (quoted from the goal)
"keeping the order of first occurrence"

## The whole goal, for context
Write dedupe.py

## Files
### dedupe.py
```
import sys
print(sorted(set(lines)))
```
### big.txt (cut)
```
a
b
```

## The requirement's commands, run on this snapshot
`python3 dedupe.py` (exit 0) printed:
```
b
a
```

## What the goal's calls return on this snapshot (evaluated with Python)
- `dedupe(['b', 'a', 'b'])` returns `['b', 'a']`
- `dedupe(None)` (did not finish):
```
Traceback
TypeError
```

## Check results on this snapshot
- two-lines: pass, exit 0: ok | fine
- slow: inconclusive

## Your answer
Does the snapshot meet the requirement above, exactly as worded? One line: met|unmet|unknown - <one-line reason>
A `met` quotes in backticks the line of a file or output above that it rests on, copied exactly: met - `<the line>` <reason>
"#;

    /// `clause_bare` pinned byte for byte.
    const PINNED_CLAUSE_BARE: &str = r#"## Requirement (quoted from the goal)
"keeping the order of first occurrence"

## The whole goal, for context
Write dedupe.py

## Files
(no file it names exists, and no text file changed)

## Your answer
Does the snapshot meet the requirement above, exactly as worded? One line: met|unmet|unknown - <one-line reason>
A `met` quotes in backticks the line of a file or output above that it rests on, copied exactly: met - `<the line>` <reason>
"#;

    /// `clause_system` pinned byte for byte.
    const PINNED_CLAUSE_SYSTEM: &str = r#"You check ONE requirement of a coding task against the files of a frozen snapshot of the workspace. Read the requirement word by word (order, exact names, formats, what must not happen) and the files. Answer with a single line: `met - <reason>` when the files clearly satisfy the requirement exactly as worded, quoting in backticks the line of a file or of a command's output that shows it, copied exactly; `unmet - <reason>` when they break it; `unknown - <reason>` when you cannot tell from what you see. A `met` without such a quote counts as `unknown`."#;

    /// `clause_repair` pinned byte for byte.
    const PINNED_CLAUSE_REPAIR: &str = r#"Your answer could not be read. Reply with one line only: met|unmet|unknown - <reason> (a `met` quotes in backticks the line it rests on)"#;
}
