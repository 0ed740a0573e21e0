//! The rubric judgment of one audit: excerpts of the changed text files read from the
//! materialized candidate, one call to the auditor's judge model, one repair call when its reply
//! holds no score, all within the audit's remaining episode time. It never fails: without a
//! score the verdict says why and its evidence is inconclusive.

use std::path::{Component, Path};
use std::time::{Duration, Instant};

use loopgate_models::{ChatClient, ChatMessage, ChatRequest};
use loopgate_protocol::contract::RUBRIC_EVIDENCE_ID;
use loopgate_protocol::rubric::{Rubric, RubricVerdict};
use loopgate_protocol::snapshot::PathChange;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Evidence;
use loopgate_protocol::wire::AuditRequest;
use tokio::io::AsyncReadExt;

use crate::audit::rules::unix_millis;
use crate::audit::Auditor;
use crate::judge::prompt::MAX_PROMPT_PATHS;
use crate::rubric::prompt::{
    file_view, rubric_prompt, rubric_repair_prompt, FileExcerpt, FileView, RubricInput,
    MAX_EXCERPTS_TOTAL_BYTES, MAX_FILE_EXCERPT_BYTES, RUBRIC_SYSTEM,
};
use crate::rubric::verdict::{rubric_evidence, unscored, verdict_from_reply};

/// What the rubric judgment adds to an audit.
#[derive(Debug, Clone)]
pub(crate) struct RubricFindings {
    pub verdict: RubricVerdict,
    /// The `rubric` evidence record, bound to the candidate.
    pub evidence: Evidence,
    pub gaps: Vec<String>,
    pub usage: Usage,
}

/// The judge's answer: the verdict, every reply it gave (for the evidence log) and the tokens.
#[derive(Debug, Clone)]
pub(crate) struct RubricJudgement {
    pub verdict: RubricVerdict,
    pub replies: Vec<String>,
    pub usage: Usage,
}

impl Auditor {
    /// Score the candidate against the contract's rubric with the request's auditor model.
    pub(crate) async fn rubric_findings(
        &self,
        req: &AuditRequest,
        rubric: &Rubric,
        workspace: &Path,
        changes: &[PathChange],
        evidence: &[Evidence],
        deadline: Instant,
    ) -> RubricFindings {
        let started = Instant::now();
        let judgement = match &req.auditor_profile {
            None => no_judge(rubric, "the run has no auditor model to score the rubric"),
            Some(name) => match self.judges.get(name) {
                None => no_judge(
                    rubric,
                    format!("auditor model '{name}' not configured here"),
                ),
                Some(client) => {
                    let files = changed_file_excerpts(workspace, changes).await;
                    let prompt = rubric_prompt(&RubricInput {
                        contract: &req.contract,
                        rubric,
                        changes,
                        evidence,
                        files: &files,
                    });
                    let budget = deadline.saturating_duration_since(Instant::now());
                    judge_rubric(client, prompt, rubric, budget).await
                }
            },
        };
        let mut gaps = Vec::new();
        let log_digest = if judgement.replies.is_empty() {
            None
        } else {
            let log = judgement.replies.join("\n\n----- next reply -----\n\n");
            self.store_output(RUBRIC_EVIDENCE_ID, log.as_bytes(), &mut gaps)
                .await
        };
        let verdict = judgement.verdict;
        tracing::info!(run_id = %req.run_id, summary = %verdict.summary(), "rubric judged");
        if !verdict.passed() {
            gaps.push(verdict.summary());
        }
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        RubricFindings {
            evidence: rubric_evidence(
                &verdict,
                &req.candidate_snapshot,
                unix_millis(),
                duration_ms,
                log_digest,
            ),
            verdict,
            gaps,
            usage: judgement.usage,
        }
    }
}

fn no_judge(rubric: &Rubric, why: impl Into<String>) -> RubricJudgement {
    RubricJudgement {
        verdict: unscored(rubric, why),
        replies: Vec::new(),
        usage: Usage::default(),
    }
}

/// Ask `client` for the rubric scores. Never fails: without a score, the verdict says why.
pub(crate) async fn judge_rubric(
    client: &ChatClient,
    prompt: String,
    rubric: &Rubric,
    budget: Duration,
) -> RubricJudgement {
    let deadline = Instant::now() + budget;
    let model = client.profile().name.clone();
    let mut out = no_judge(rubric, String::new());
    let mut messages = vec![
        ChatMessage::system(RUBRIC_SYSTEM),
        ChatMessage::user(prompt),
    ];
    for attempt in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            out.verdict = unscored(
                rubric,
                format!("auditor model '{model}' ran out of episode time"),
            );
            return out;
        }
        let request = ChatRequest::new(messages.clone());
        let reply = match tokio::time::timeout(left, client.chat(&request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(err)) => {
                tracing::warn!(model = %model, error = %err, "rubric judge call failed");
                out.verdict = unscored(
                    rubric,
                    format!("auditor model '{model}' call failed ({:?})", err.kind()),
                );
                return out;
            }
            Err(_) => {
                out.verdict = unscored(
                    rubric,
                    format!(
                        "auditor model '{model}' did not answer within {}s",
                        left.as_secs().max(1)
                    ),
                );
                return out;
            }
        };
        out.usage.add(reply.usage);
        let text = reply.content.unwrap_or_default();
        out.replies.push(text.clone());
        match verdict_from_reply(&text, rubric) {
            Ok(verdict) => {
                out.verdict = verdict;
                return out;
            }
            Err(err) => {
                tracing::info!(model = %model, attempt, error = %err, "rubric reply held no score");
            }
        }
        messages.push(ChatMessage::assistant_text(text));
        messages.push(ChatMessage::user(rubric_repair_prompt(rubric)));
    }
    out.verdict = unscored(
        rubric,
        format!("auditor model '{model}' gave no usable score, even after a repair request"),
    );
    out
}

/// A path from a manifest that stays inside the workspace when joined to it.
fn is_plain_relative(path: &str) -> bool {
    let path = Path::new(path);
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Excerpts of the added and modified files of `changes` (at most `MAX_PROMPT_PATHS`) as they
/// are in `workspace`: regular files only, never following a link out of it, each cut to
/// `MAX_FILE_EXCERPT_BYTES`, all together to `MAX_EXCERPTS_TOTAL_BYTES`.
pub(crate) async fn changed_file_excerpts(
    workspace: &Path,
    changes: &[PathChange],
) -> Vec<FileExcerpt> {
    let root = tokio::fs::canonicalize(workspace).await.ok();
    let mut left = MAX_EXCERPTS_TOTAL_BYTES;
    let mut excerpts = Vec::new();
    let paths = changes
        .iter()
        .filter(|c| !matches!(c, PathChange::Removed { .. }))
        .map(PathChange::path)
        .take(MAX_PROMPT_PATHS);
    for path in paths {
        let view = match (&root, left) {
            (Some(root), 1..) if is_plain_relative(path) => {
                read_excerpt(root, path, left.min(MAX_FILE_EXCERPT_BYTES)).await
            }
            _ => FileView::NotShown,
        };
        if let FileView::Text { text, .. } = &view {
            left = left.saturating_sub(text.len());
        }
        excerpts.push(FileExcerpt {
            path: path.to_string(),
            view,
        });
    }
    excerpts
}

/// The first `limit` bytes of `root/path` when it resolves to a regular file inside `root`.
async fn read_excerpt(root: &Path, path: &str, limit: usize) -> FileView {
    let Ok(real) = tokio::fs::canonicalize(root.join(path)).await else {
        return FileView::NotShown;
    };
    if !real.starts_with(root) {
        return FileView::NotShown;
    }
    let Ok(file) = tokio::fs::File::open(&real).await else {
        return FileView::NotShown;
    };
    let full_len = match file.metadata().await {
        Ok(meta) if meta.is_file() => meta.len(),
        _ => return FileView::NotShown,
    };
    let mut bytes = Vec::with_capacity(limit.min(MAX_FILE_EXCERPT_BYTES));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX);
    match file.take(cap).read_to_end(&mut bytes).await {
        Ok(_) => file_view(&bytes, limit, full_len),
        Err(_) => FileView::NotShown,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_read() {
        for (path, ok) in [
            ("hello.py", true),
            ("src/./main.rs", true),
            ("../etc/passwd", false),
            ("/etc/passwd", false),
            ("a/../../b", false),
            ("", false),
        ] {
            assert_eq!(is_plain_relative(path), ok, "{path}");
        }
    }

    #[tokio::test]
    async fn excerpts_skip_binary_links_out_and_stop_at_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "x".repeat(MAX_FILE_EXCERPT_BYTES + 10)).unwrap();
        std::fs::write(ws.join("bin"), b"\0\x01\x02").unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        for name in ["b.txt", "c.txt", "d.txt"] {
            std::fs::write(ws.join(name), "y".repeat(MAX_FILE_EXCERPT_BYTES)).unwrap();
        }
        let added = |p: &str| PathChange::Added { path: p.into() };
        let changes = vec![
            added("a.txt"),
            added("bin"),
            added("link"),
            PathChange::Removed {
                path: "gone.txt".into(),
            },
            added("b.txt"),
            added("c.txt"),
            added("d.txt"),
            added("../secret"),
        ];
        let excerpts = changed_file_excerpts(&ws, &changes).await;
        let views: Vec<(&str, &FileView)> = excerpts
            .iter()
            .map(|e| (e.path.as_str(), &e.view))
            .collect();
        assert_eq!(views.len(), 7, "{views:?}");
        assert!(matches!(
            views[0],
            ("a.txt", FileView::Text { truncated: true, text }) if text.len() == MAX_FILE_EXCERPT_BYTES
        ));
        assert_eq!(views[1], ("bin", &FileView::Binary));
        assert_eq!(views[2], ("link", &FileView::NotShown));
        assert!(matches!(
            views[3],
            (
                "b.txt",
                FileView::Text {
                    truncated: false,
                    ..
                }
            )
        ));
        assert!(matches!(
            views[4],
            (
                "c.txt",
                FileView::Text {
                    truncated: false,
                    ..
                }
            )
        ));
        assert_eq!(views[5], ("d.txt", &FileView::NotShown), "budget spent");
        assert_eq!(views[6], ("../secret", &FileView::NotShown));
        let shown: usize = excerpts
            .iter()
            .map(|e| match &e.view {
                FileView::Text { text, .. } => text.len(),
                _ => 0,
            })
            .sum();
        assert!(shown <= MAX_EXCERPTS_TOTAL_BYTES);
    }
}
