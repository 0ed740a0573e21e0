//! Per-round snapshots (for `checkout --round` and `diff`) and resuming an ended run.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use loopgate_api::{ResumeRequest, RoundList, RoundView, RunView};
use loopgate_common::decide::RunEvent;
use loopgate_common::state::{LogEntry, LogEvent};

use crate::engine::Applied;
use crate::http::error::{ApiError, ChangeErrors, ReadErrors};
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::state::{load_run, Shared};
use crate::http::views::{run_view, with_sorted_keys};

/// Rebuild the rounds from the run log (the log is the source of truth).
pub(crate) fn rounds_from_log(entries: &[LogEntry]) -> Vec<RoundView> {
    let mut rounds: Vec<RoundView> = Vec::new();
    for e in entries {
        let current = rounds
            .iter_mut()
            .rev()
            .find(|r| r.round == e.round && r.generation == e.generation);
        match (&e.event, current) {
            (
                LogEvent::ExecDispatched {
                    objective,
                    base_snapshot,
                    ..
                },
                _,
            ) => rounds.push(RoundView {
                generation: e.generation,
                round: e.round,
                objective: objective.clone(),
                base_snapshot: base_snapshot.clone(),
                candidate: None,
                verdicts: None,
                gate_passed: None,
            }),
            // A step of several attempts: its round's candidate is the winner's, and its
            // verdicts the winner's full audit's (the siblings' checks-only audits are not).
            (
                LogEvent::ExecResult {
                    candidate,
                    step_attempt: None,
                    ..
                },
                Some(r),
            ) => r.candidate = candidate.clone(),
            (LogEvent::AttemptWon { candidate, .. }, Some(r)) => {
                r.candidate = Some(candidate.clone());
                r.verdicts = None;
            }
            (
                LogEvent::AuditReport {
                    verdicts,
                    snapshot,
                    step_attempt: None,
                    ..
                },
                Some(r),
            ) if r.candidate.as_ref() == Some(snapshot) => r.verdicts = Some(*verdicts),
            (LogEvent::Gate { passed, .. }, Some(r))
                if r.verdicts.is_some() && r.gate_passed.is_none() =>
            {
                r.gate_passed = Some(*passed)
            }
            _ => {}
        }
    }
    rounds
}

/// Each round's base and candidate snapshots with the audit's verdicts, from the run log.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/rounds",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    responses((status = 200, description = "the rounds, oldest first", body = RoundList), ReadErrors)
)]
pub(crate) async fn list_rounds(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    load_run(&s, &id).await?;
    let entries: Vec<LogEntry> = s
        .engine
        .full_log(&id)
        .await?
        .iter()
        .filter_map(|r| serde_json::from_str::<LogEntry>(&r.entry).ok())
        .collect();
    Ok(with_sorted_keys(&RoundList {
        rounds: rounds_from_log(&entries),
    }))
}

/// Resume an ended run as a new generation, optionally with budget changes. The body is
/// optional.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/resume",
    tag = "runs",
    params(("id" = String, Path, description = "the run id (a UUID)")),
    request_body = Option<ResumeRequest>,
    responses((status = 200, description = "the run, as its new generation", body = RunView), ChangeErrors)
)]
pub(crate) async fn resume(
    State(s): State<Shared>,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<ResumeRequest>>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let record = load_run(&s, &id).await?;
    let req = body.map(|ApiJson(b)| b).unwrap_or_default();
    let budget = req
        .budget
        .unwrap_or_default()
        .validate_over(&record.task.budget)
        .map_err(|(field, problem)| {
            ApiError::bad_request("invalid_budget", format!("budget.{field}: {problem}"))
        })?;
    match s.engine.apply(&id, &RunEvent::Resume { budget }).await? {
        Applied::Changed(record) => Ok((StatusCode::OK, Json(run_view(&record)))),
        Applied::Ignored(reason) => {
            Err(ApiError::new(StatusCode::CONFLICT, "not_resumable", reason))
        }
        Applied::Replayed => Ok((StatusCode::OK, Json(run_view(&load_run(&s, &id).await?)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopgate_protocol::subjects::Capability;
    use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity, Verdicts};
    use loopgate_protocol::wire::AuditPurpose;

    fn entry(round: u32, event: LogEvent) -> LogEntry {
        LogEntry {
            at: 0,
            generation: 1,
            round,
            event,
        }
    }

    #[test]
    fn rounds_are_rebuilt_from_the_log() {
        let v = Verdicts {
            status: AuditStatus::Complete,
            integrity: Integrity::Clean,
            contract: ContractVerdict::Aligned,
        };
        let log = vec![
            entry(
                1,
                LogEvent::ExecDispatched {
                    attempts: None,
                    capability: Capability::Cli,
                    objective: "a".into(),
                    base_snapshot: "s0".into(),
                },
            ),
            entry(
                1,
                LogEvent::ExecResult {
                    step_attempt: None,
                    worker: "w".into(),
                    candidate: Some("s1".into()),
                    summary: String::new(),
                    claimed_done: true,
                    tool_calls: 1,
                    error: None,
                    self_check_refusals: 0,
                    agent_isolation: None,
                    tokens: None,
                },
            ),
            entry(
                1,
                LogEvent::AuditReport {
                    step_attempt: None,
                    purpose: AuditPurpose::Round,
                    worker: "a".into(),
                    snapshot: "s1".into(),
                    verdicts: v,
                    passing: 1,
                    checked: 1,
                    gaps: vec![],
                    downgraded: false,
                },
            ),
            entry(
                1,
                LogEvent::Gate {
                    passed: true,
                    snapshot: "s1".into(),
                    reasons: vec![],
                },
            ),
            entry(
                2,
                LogEvent::ExecDispatched {
                    attempts: None,
                    capability: Capability::Cli,
                    objective: "b".into(),
                    base_snapshot: "s1".into(),
                },
            ),
        ];
        let rounds = rounds_from_log(&log);
        assert_eq!(rounds.len(), 2);
        assert_eq!(rounds[0].candidate.as_deref(), Some("s1"));
        assert_eq!(rounds[0].gate_passed, Some(true));
        assert_eq!(rounds[1].base_snapshot, "s1");
        assert_eq!(rounds[1].candidate, None);
    }

    /// A round of three attempts: its candidate is the winner's, its verdicts the winner's
    /// full audit's, whatever order the siblings reported in.
    #[test]
    fn a_round_of_attempts_is_its_winner() {
        let v = |integrity| Verdicts {
            status: AuditStatus::Incomplete,
            integrity,
            contract: ContractVerdict::Aligned,
        };
        let exec = |k, c: &str| LogEvent::ExecResult {
            step_attempt: Some(k),
            worker: format!("w{k}"),
            candidate: Some(c.into()),
            summary: String::new(),
            claimed_done: true,
            tool_calls: 1,
            error: None,
            self_check_refusals: 0,
            agent_isolation: None,
            tokens: Some(10),
        };
        let audit = |k: Option<u32>, c: &str, integrity| LogEvent::AuditReport {
            step_attempt: k,
            purpose: AuditPurpose::Round,
            worker: "a".into(),
            snapshot: c.into(),
            verdicts: v(integrity),
            passing: 1,
            checked: 2,
            gaps: vec![],
            downgraded: false,
        };
        let log = vec![
            entry(
                1,
                LogEvent::ExecDispatched {
                    attempts: Some(2),
                    capability: Capability::Cli,
                    objective: "a".into(),
                    base_snapshot: "s0".into(),
                },
            ),
            entry(1, exec(2, "c2")),
            entry(1, audit(Some(2), "c2", Integrity::Clean)),
            entry(1, exec(1, "c1")),
            entry(1, audit(Some(1), "c1", Integrity::Suspect)),
            entry(
                1,
                LogEvent::AttemptWon {
                    attempt: 2,
                    of: 2,
                    candidate: "c2".into(),
                    worker: "w2".into(),
                    tokens: 10,
                    passing: 1,
                    blocking: 2,
                    early: false,
                    others: "attempt 1: 1/2 checks, outscored".into(),
                },
            ),
        ];
        let rounds = rounds_from_log(&log);
        assert_eq!(rounds[0].candidate.as_deref(), Some("c2"));
        assert_eq!(rounds[0].verdicts, None, "no full audit yet");
        let mut log = log;
        log.push(entry(1, audit(None, "c2", Integrity::Clean)));
        let rounds = rounds_from_log(&log);
        assert_eq!(rounds[0].verdicts, Some(v(Integrity::Clean)));
    }
}
