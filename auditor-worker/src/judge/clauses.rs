//! Clause-by-clause judgment: one short question per goal clause the contract has no working
//! check for (a `source = "goal"` criterion without a check, or one whose derived check is
//! broken), answered `met | unmet | unknown` with a one-line reason. Small models are far more
//! reliable at one question at a time than at one holistic verdict. Each answer becomes the
//! criterion's evidence on the candidate (`met` passes, `unmet` fails, `unknown` is
//! inconclusive), so the gate stays closed on anything but `met` and the next executor sees the
//! clause in its failing evidence.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use loopgate_common::clause_reading::clause_commands;
use loopgate_common::goal_criteria::{
    broken_check, clause_excerpt, judged_clauses, parse_clause_answer, ClauseVerdict,
};
use loopgate_common::goal_words::exact_words;
use loopgate_common::snapshot::{Manifest, PathChange};
use loopgate_common::task::{Criterion, CriterionSource};
use loopgate_common::usage::Usage;
use loopgate_common::verdict::{CheckVerdict, Evidence};
use loopgate_common::wire::AuditRequest;
use loopgate_models::{ChatClient, ChatMessage, ChatRequest};

use crate::audit::rules::unix_millis;
use crate::audit::Auditor;
use crate::judge::prompt::{tail_chars, verdict_word};
use crate::rubric::judge::changed_file_excerpts;
use crate::rubric::prompt::{FileExcerpt, FileView};

/// Characters of each check's output shown with a clause.
const CLAUSE_EXCERPT_CHARS: usize = 300;
/// Characters of a clause command's output shown with its clause.
const COMMAND_OUTPUT_CHARS: usize = 600;
/// Each of a clause's own commands gets this long on the candidate.
const CLAUSE_COMMAND_SECS: u64 = 30;

/// What one of a clause's own commands printed on the candidate, run in the checks' sandbox for
/// the judge to read. Never evidence: only checks and judgments are.
#[derive(Debug, Clone)]
pub(crate) struct CommandRun {
    pub command: String,
    /// The criteria whose clause quotes it.
    pub for_clauses: Vec<String>,
    pub exit_code: Option<i32>,
    pub output: String,
}

/// Measured on 2026-12-02 by replaying the 25 clause questions of two `arms-bench --judge`
/// sittings whose artifacts passed every check (the 1.5B judge): this wording answered `met` on
/// 10. A version that also told the judge a sentence stating the problem is met once fixed,
/// and that a passing check is evidence, and that listed each check's command, answered `met`
/// on 4 (with the old question and checks but the new system prompt: 4 of 21). It was
/// reverted. Replayed again on 2026-12-02 on the 11 questions still judged once clauses are
/// read mechanically: this wording 3 and 5 `met` (two replays), the goal without its problem
/// sentence 1, the problem sentence labelled 4, "look for a concrete violation" 0
/// (docs/benchmarks.md, sitting j). Kept.
pub(crate) const CLAUSE_SYSTEM: &str = "You check ONE requirement of a coding task against \
the files of a frozen snapshot of the workspace. Read the requirement word by word (order, \
exact names, formats, what must not happen) and the files. Answer with a single line: \
`met - <reason>` when the files clearly satisfy the requirement exactly as worded, `unmet - \
<reason>` when they break it, `unknown - <reason>` when you cannot tell from what you see.";

const CLAUSE_REPAIR: &str =
    "Your answer could not be read. Reply with one line only: met|unmet|unknown - <reason>";

/// A clause to judge: its criterion, and why its own check does not decide (broken), if it has
/// one.
#[derive(Debug, Clone)]
pub(crate) struct ClauseQuestion<'a> {
    pub criterion: &'a Criterion,
    pub clause: &'a str,
    pub broken: Option<String>,
}

/// The clauses of `req`'s contract to ask about, given the checks' evidence on the candidate:
/// blocking goal criteria without a check, and derived checks found broken.
pub(crate) fn clause_questions<'a>(
    req: &'a AuditRequest,
    evidence: &[Evidence],
) -> Vec<ClauseQuestion<'a>> {
    let mut out: Vec<ClauseQuestion<'a>> = judged_clauses(&req.contract.criteria)
        .filter_map(|c| {
            Some(ClauseQuestion {
                criterion: c,
                clause: c.clause.as_deref()?,
                broken: None,
            })
        })
        .collect();
    for c in &req.contract.criteria {
        if c.source != CriterionSource::Goal || c.check.is_none() {
            continue;
        }
        let (Some(clause), Some(e)) = (
            c.clause.as_deref(),
            evidence.iter().find(|e| e.check_id == c.id),
        ) else {
            continue;
        };
        if e.verdict == CheckVerdict::Pass {
            continue;
        }
        if let Some(why) = broken_check(e.exit_code, &e.output_excerpt) {
            out.push(ClauseQuestion {
                criterion: c,
                clause,
                broken: Some(why),
            });
        }
    }
    out
}

/// The user prompt for one clause: the quoted clause, the goal, the files it concerns (those it
/// names, and the changed ones) and the other checks' results.
pub(crate) fn clause_prompt(
    goal: &str,
    question: &ClauseQuestion<'_>,
    files: &[FileExcerpt],
    evidence: &[Evidence],
    commands: &[CommandRun],
) -> String {
    let mut p = String::new();
    let _ = writeln!(
        p,
        "## Requirement (quoted from the goal)\n\"{}\"\n",
        question.clause.trim()
    );
    let _ = writeln!(p, "## The whole goal, for context\n{}\n", goal.trim());
    let _ = writeln!(p, "## Files");
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
    let runs: Vec<&CommandRun> = commands
        .iter()
        .filter(|r| r.for_clauses.contains(&question.criterion.id))
        .collect();
    if !runs.is_empty() {
        let _ = writeln!(p, "\n## The requirement's commands, run on this snapshot");
        for r in runs {
            let exit = r
                .exit_code
                .map_or("did not finish".to_string(), |c| format!("exit {c}"));
            let out = tail_chars(r.output.trim_end(), COMMAND_OUTPUT_CHARS);
            let _ = writeln!(p, "`{}` ({exit}) printed:\n```\n{out}\n```", r.command);
        }
    }
    let checks: Vec<&Evidence> = evidence
        .iter()
        .filter(|e| e.check_id != question.criterion.id)
        .collect();
    if !checks.is_empty() {
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
    }
    let _ = write!(
        p,
        "\n## Your answer\nDoes the snapshot meet the requirement above, exactly as worded? One \
         line: met|unmet|unknown - <one-line reason>\n"
    );
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

/// The checks that run each command the clause questions quote, as criteria of a throwaway
/// contract (ids `clause-command-N`, not blocking), each with the criteria whose clause quotes
/// it. A command filled in from a check runs only when every file it names is in `manifest`.
fn command_criteria(
    questions: &[ClauseQuestion<'_>],
    criteria: &[Criterion],
    manifest: &Manifest,
) -> Vec<(Criterion, Vec<String>)> {
    let checks: Vec<&str> = criteria.iter().filter_map(|c| c.check.as_deref()).collect();
    let present = |command: &str| {
        exact_words(command)
            .names
            .iter()
            .all(|n| manifest.entries.iter().any(|e| e.path == *n))
    };
    let mut out: Vec<(Criterion, Vec<String>)> = Vec::new();
    for q in questions {
        for c in clause_commands(q.clause, &checks) {
            if c.from_check && !present(&c.command) {
                continue;
            }
            let id = q.criterion.id.clone();
            if let Some((_, ids)) = out
                .iter_mut()
                .find(|(k, _)| k.check.as_deref() == Some(c.command.as_str()))
            {
                if !ids.contains(&id) {
                    ids.push(id);
                }
                continue;
            }
            let criterion = Criterion {
                id: format!("clause-command-{}", out.len() + 1),
                description: "a command a goal clause quotes, run for its judge".to_string(),
                check: Some(c.command),
                blocking: false,
                timeout_secs: CLAUSE_COMMAND_SECS,
                source: CriterionSource::Task,
                clause: None,
            };
            out.push((criterion, vec![id]));
        }
    }
    out
}

impl Auditor {
    /// Run the commands the clause questions quote (`` `python3 fizzbuzz.py` ``) on the
    /// candidate, each in its own sandboxed copy like a check, under `scratch/clause-commands`.
    /// A failure to run them leaves the judge without them (logged), never fails the audit.
    pub(crate) async fn run_clause_commands(
        &self,
        req: &AuditRequest,
        scratch: &Path,
        pristine: &Path,
        manifest: &Manifest,
        evidence: &[Evidence],
    ) -> Vec<CommandRun> {
        let planned = command_criteria(
            &clause_questions(req, evidence),
            &req.contract.criteria,
            manifest,
        );
        let judged_here = req
            .auditor_profile
            .as_ref()
            .is_some_and(|n| self.judges.contains_key(n));
        if planned.is_empty() || !judged_here {
            return Vec::new();
        }
        let dir = scratch.join("clause-commands");
        if let Err(err) = tokio::fs::create_dir_all(&dir).await {
            tracing::warn!(error = %err, "preparing to run the clauses' commands; skipped");
            return Vec::new();
        }
        let mut probe = req.clone();
        probe.contract.criteria = planned.iter().map(|(c, _)| c.clone()).collect();
        let mut gaps = Vec::new();
        let runs = match self
            .run_checks(&probe, &dir, pristine, manifest, &mut gaps)
            .await
        {
            Ok(runs) => runs,
            Err(err) => {
                tracing::warn!(error = %err, "running the clauses' commands; skipped");
                return Vec::new();
            }
        };
        planned
            .into_iter()
            .filter_map(|(c, for_clauses)| {
                let run = runs.iter().find(|e| e.check_id == c.id)?;
                Some(CommandRun {
                    command: c.check?,
                    for_clauses,
                    exit_code: run.exit_code,
                    output: run.output_excerpt.clone(),
                })
            })
            .collect()
    }

    /// Ask the request's judge about every clause question of the audit, in order, within
    /// `deadline`: the answers replace or add to the checks' evidence for those criteria.
    /// Returns the gap lines and the tokens. Without a judge model here every question is
    /// `unknown` (nothing could judge it), which keeps the gate closed.
    pub(crate) async fn judge_clauses(
        &self,
        req: &AuditRequest,
        workspace: &Path,
        changes: &[PathChange],
        evidence: &mut Vec<Evidence>,
        commands: &[CommandRun],
        deadline: Instant,
    ) -> (Vec<String>, Usage) {
        let client = req
            .auditor_profile
            .as_ref()
            .and_then(|n| self.judges.get(n));
        judge_clauses(
            client, req, workspace, changes, evidence, commands, deadline,
        )
        .await
    }
}

async fn judge_clauses(
    client: Option<&ChatClient>,
    req: &AuditRequest,
    workspace: &Path,
    changes: &[PathChange],
    evidence: &mut Vec<Evidence>,
    commands: &[CommandRun],
    deadline: Instant,
) -> (Vec<String>, Usage) {
    let questions: Vec<ClauseQuestion<'_>> = clause_questions(req, evidence);
    let mut gaps = Vec::new();
    let mut usage = Usage::default();
    let mut judged: Vec<Evidence> = Vec::new();
    for q in &questions {
        let started = Instant::now();
        let (verdict, reason) = match client {
            None => (
                ClauseVerdict::Unknown,
                "no judge model is configured on this auditor".to_string(),
            ),
            Some(client) => {
                let files =
                    changed_file_excerpts(workspace, &clause_paths(q.clause, changes)).await;
                let prompt = clause_prompt(&req.contract.goal, q, &files, evidence, commands);
                let (answer, used) = ask(client, prompt, deadline).await;
                usage.add(used);
                answer
            }
        };
        let mut excerpt = clause_excerpt(q.clause, verdict, &reason);
        if let Some(why) = &q.broken {
            gaps.push(format!(
                "derived check '{}' is broken ({why}): it does not decide; its clause was judged \
                 instead ({})",
                q.criterion.id,
                verdict.as_str()
            ));
            excerpt = format!("derived check broken: {why}; {excerpt}");
        }
        if verdict != ClauseVerdict::Met {
            gaps.push(format!(
                "goal clause '{}' judged {}: {reason}",
                q.criterion.id,
                verdict.as_str()
            ));
        }
        judged.push(Evidence {
            artifact_version: req.candidate_snapshot.clone(),
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
        });
    }
    for j in judged {
        evidence.retain(|e| e.check_id != j.check_id);
        evidence.push(j);
    }
    (gaps, usage)
}

/// One question, one repair when the answer cannot be read; `unknown` when the model fails,
/// runs out of time or still cannot be read.
async fn ask(
    client: &ChatClient,
    prompt: String,
    deadline: Instant,
) -> ((ClauseVerdict, String), Usage) {
    let mut usage = Usage::default();
    let mut messages = vec![
        ChatMessage::system(CLAUSE_SYSTEM),
        ChatMessage::user(prompt),
    ];
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(50) {
            return (
                (
                    ClauseVerdict::Unknown,
                    "the judge ran out of time".to_string(),
                ),
                usage,
            );
        }
        let request = ChatRequest::new(messages.clone());
        let reply = match tokio::time::timeout(left, client.chat(&request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => {
                let why = format!("the judge's call failed ({:?})", err.kind());
                return ((ClauseVerdict::Unknown, why), usage);
            }
            Err(_) => {
                let why = "the judge did not answer in time".to_string();
                return ((ClauseVerdict::Unknown, why), usage);
            }
        };
        usage.add(reply.usage);
        let text = reply.content.unwrap_or_default();
        if let Some(answer) = parse_clause_answer(&text) {
            return (answer, usage);
        }
        messages.push(ChatMessage::assistant_text(text));
        messages.push(ChatMessage::user(CLAUSE_REPAIR));
    }
    (
        (
            ClauseVerdict::Unknown,
            "the judge's answer could not be read".to_string(),
        ),
        usage,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ev(id: &str, verdict: CheckVerdict, exit: Option<i32>, out: &str) -> Evidence {
        Evidence {
            artifact_version: "s".into(),
            check_id: id.into(),
            verdict,
            produced_at: 0,
            log_digest: None,
            exit_code: exit,
            duration_ms: 0,
            output_excerpt: out.into(),
            isolated: None,
            screenshots: Vec::new(),
        }
    }

    #[test]
    fn the_prompt_quotes_the_clause_and_shows_files_and_checks() {
        let c = Criterion {
            id: "goal-1".into(),
            description: String::new(),
            check: None,
            blocking: true,
            timeout_secs: 5,
            source: CriterionSource::Goal,
            clause: Some("keeping the order of first occurrence".into()),
        };
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
            &[ev("two-lines", CheckVerdict::Pass, Some(0), "ok")],
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

    #[test]
    fn the_prompt_shows_what_the_clauses_own_commands_print() {
        let clause = "Running `python3 fizzbuzz.py` prints 1 to 3, Fizz for 3.";
        let c = Criterion {
            id: "goal-2".into(),
            description: String::new(),
            check: None,
            blocking: true,
            timeout_secs: 5,
            source: CriterionSource::Goal,
            clause: Some(clause.into()),
        };
        let q = ClauseQuestion {
            criterion: &c,
            clause,
            broken: None,
        };
        let run = |command: &str, for_clause: &str, exit_code, output: &str| CommandRun {
            command: command.into(),
            for_clauses: vec![for_clause.into()],
            exit_code,
            output: output.into(),
        };
        let commands = [
            run("python3 fizzbuzz.py", "goal-2", Some(0), "1\n2\nFizz\n"),
            run("python3 other.py", "goal-9", Some(1), "not this clause's"),
        ];
        let p = clause_prompt("Create fizzbuzz.py.", &q, &[], &[], &commands);
        assert!(
            p.contains("`python3 fizzbuzz.py` (exit 0) printed:\n```\n1\n2\nFizz\n```"),
            "{p}"
        );
        assert!(!p.contains("other.py"), "{p}");
        let timed_out = [run("python3 fizzbuzz.py", "goal-2", None, "")];
        let p = clause_prompt("Create fizzbuzz.py.", &q, &[], &[], &timed_out);
        assert!(p.contains("(did not finish)"), "{p}");
        // The commands to run are those of the clauses asked about, once each.
        let mut other = c.clone();
        other.id = "goal-3".into();
        let q3 = ClauseQuestion {
            criterion: &other,
            clause,
            broken: None,
        };
        let planned = command_criteria(
            &[q.clone(), q3],
            &[],
            &Manifest {
                v: 1,
                entries: vec![],
            },
        );
        assert_eq!(planned.len(), 1);
        assert_eq!(planned[0].0.check.as_deref(), Some("python3 fizzbuzz.py"));
        assert!(!planned[0].0.blocking);
        assert_eq!(
            planned[0].1,
            vec!["goal-2".to_string(), "goal-3".to_string()]
        );
        // Filled in from a check: run only when the files it names are in the snapshot.
        let placeholder = "`sh count.sh FILE` prints the count.";
        let q = ClauseQuestion {
            criterion: &c,
            clause: placeholder,
            broken: None,
        };
        let mut checks = vec![c.clone(), c.clone()];
        checks[0].check = Some("test \"$(sh count.sh app.log)\" = 3".into());
        checks[1].check = Some("printf 'x' > new.log; test \"$(sh count.sh new.log)\" = 0".into());
        let entry = |path: &str| loopgate_common::snapshot::ManifestEntry {
            path: path.into(),
            mode: 420,
            size: 1,
            sha256: String::new(),
        };
        let manifest = Manifest {
            v: 1,
            entries: vec![entry("count.sh"), entry("app.log")],
        };
        let planned = command_criteria(std::slice::from_ref(&q), &checks, &manifest);
        let commands: Vec<&str> = planned
            .iter()
            .filter_map(|(c, _)| c.check.as_deref())
            .collect();
        assert_eq!(commands, vec!["sh count.sh app.log"]);
    }
}
