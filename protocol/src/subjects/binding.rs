//! Messages bound to their subjects: on the results stream each kind is accepted only on the
//! channel whose publishers the NATS users restrict to the role that sends it, about the run
//! the subject names. The payload's own `kind` and `run_id` prove nothing (anyone who may
//! publish anywhere on the stream can write them); the subject is what the server checked.
//!
//! | kind | only on | published by (deploy/nats/loopgate-users.conf) |
//! |---|---|---|
//! | `exec_result` | `result.exec.<run>` | executors |
//! | `audit_report` | `result.audit.<run>` | auditors |
//! | `decide_request` | `result.decide.<run>` | managers |
//! | `episode_started` (role executor) | `result.started.exec.<run>` | executors |
//! | `episode_started` (role auditor) | `result.started.audit.<run>` | auditors |
//! | `episode_progress` | `result.progress.exec.<run>` | executors |
//! | `audit_progress` | `result.progress.audit.<run>` | auditors |
//!
//! Anything else (another kind, another subject, the run id or role disagreeing with the
//! subject, an audit report without a spec hash) is refused before it reaches `decide`.
//!
//! The message's `Nats-Msg-Id` is bound the same way ([`check_msg_id`]): an id with the shape of
//! another role's (`crate::dispatch_id::id_owner`) than the subject's publishers is an attempt
//! to squat that role's dedup id, refused whatever the payload (even an undecodable one).

use crate::dispatch_id::{id_owner, IdOwner};
use crate::subjects::{ResultChannel, Subjects};
use crate::wire::{EpisodeRole, Message};

/// How much of a refused message id a refusal quotes.
const QUOTED_ID_CHARS: usize = 120;

/// Why a results-stream message was refused. `reason()` is the stable name (log field and
/// metric attribute).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    #[error("subject {subject} is not a results subject this manager accepts")]
    UnknownSubject { subject: String },
    #[error("{kind} is not accepted on {subject} (only on {expected})")]
    WrongSubject {
        kind: &'static str,
        subject: String,
        expected: &'static str,
    },
    #[error("the message is about run {payload}, but its subject names run {subject}")]
    RunMismatch { payload: String, subject: String },
    #[error("an episode_started with role {payload} arrived on {subject}, which is for the {expected} role")]
    RoleMismatch {
        payload: &'static str,
        subject: String,
        expected: &'static str,
    },
    #[error("the audit report names no spec hash (reports must name the contract they checked)")]
    MissingSpecHash,
    #[error("message id {msg_id:?} on {subject} has the shape of the {owner} role's ids, but only the {publisher} role publishes there (an attempt to squat another role's dedup id)")]
    ForeignMsgId {
        msg_id: String,
        subject: String,
        owner: &'static str,
        publisher: &'static str,
    },
}

impl BindingError {
    /// Never: a message on the wrong subject stays on the wrong subject.
    pub fn is_retryable(&self) -> bool {
        false
    }

    /// The stable name of the refusal: `unknown_subject`, `wrong_subject`, `run_mismatch`,
    /// `role_mismatch`, `missing_spec_hash`, `foreign_msg_id`.
    pub fn reason(&self) -> &'static str {
        match self {
            BindingError::UnknownSubject { .. } => "unknown_subject",
            BindingError::WrongSubject { .. } => "wrong_subject",
            BindingError::RunMismatch { .. } => "run_mismatch",
            BindingError::RoleMismatch { .. } => "role_mismatch",
            BindingError::MissingSpecHash => "missing_spec_hash",
            BindingError::ForeignMsgId { .. } => "foreign_msg_id",
        }
    }
}

/// The role whose NATS user may publish on `channel`.
fn publisher_of(channel: ResultChannel) -> IdOwner {
    match channel {
        ResultChannel::Exec | ResultChannel::ExecStarted | ResultChannel::ExecProgress => {
            IdOwner::Executor
        }
        ResultChannel::Audit | ResultChannel::AuditStarted | ResultChannel::AuditProgress => {
            IdOwner::Auditor
        }
        ResultChannel::Decide => IdOwner::Manager,
    }
}

/// Refuse a message whose `Nats-Msg-Id` has the shape of another role's id than the role that
/// publishes on `subject`. An id of no role's shape, a missing id and a subject that is not a
/// results subject pass (the subject is [`check_binding`]'s to judge).
pub fn check_msg_id(
    subjects: &Subjects,
    subject: &str,
    msg_id: Option<&str>,
) -> Result<(), BindingError> {
    let (Some(msg_id), Some(parsed)) = (msg_id, subjects.parse_result(subject)) else {
        return Ok(());
    };
    let publisher = publisher_of(parsed.channel);
    match id_owner(msg_id) {
        Some(owner) if owner != publisher => Err(BindingError::ForeignMsgId {
            msg_id: msg_id.chars().take(QUOTED_ID_CHARS).collect(),
            subject: subject.to_string(),
            owner: owner.as_str(),
            publisher: publisher.as_str(),
        }),
        _ => Ok(()),
    }
}

fn role_word(role: EpisodeRole) -> &'static str {
    match role {
        EpisodeRole::Executor => "executor",
        EpisodeRole::Auditor => "auditor",
    }
}

/// The one channel `message` may arrive on; `None` for kinds that never travel on the results
/// stream (work requests, control notices).
pub fn channel_for(message: &Message) -> Option<ResultChannel> {
    match message {
        Message::ExecResult(_) => Some(ResultChannel::Exec),
        Message::AuditReport(_) => Some(ResultChannel::Audit),
        Message::DecideRequest(_) => Some(ResultChannel::Decide),
        Message::EpisodeStarted(s) => Some(match s.role {
            EpisodeRole::Executor => ResultChannel::ExecStarted,
            EpisodeRole::Auditor => ResultChannel::AuditStarted,
        }),
        Message::EpisodeProgress(_) => Some(ResultChannel::ExecProgress),
        Message::AuditProgress(_) => Some(ResultChannel::AuditProgress),
        Message::ExecRequest(_) | Message::AuditRequest(_) | Message::CancelEpisodes(_) => None,
    }
}

/// Accept `message`, which arrived on `subject`, only where its kind belongs (see the module
/// table), about the run the subject names; an audit report must also name its spec hash.
pub fn check_binding(
    subjects: &Subjects,
    subject: &str,
    message: &Message,
) -> Result<(), BindingError> {
    let parsed = subjects
        .parse_result(subject)
        .ok_or_else(|| BindingError::UnknownSubject {
            subject: subject.to_string(),
        })?;
    let Some(expected) = channel_for(message) else {
        return Err(BindingError::WrongSubject {
            kind: message.kind(),
            subject: subject.to_string(),
            expected: "no results subject",
        });
    };
    if parsed.channel != expected {
        if let (Message::EpisodeStarted(started), ResultChannel::ExecStarted)
        | (Message::EpisodeStarted(started), ResultChannel::AuditStarted) =
            (message, parsed.channel)
        {
            let subject_role = if parsed.channel == ResultChannel::ExecStarted {
                EpisodeRole::Executor
            } else {
                EpisodeRole::Auditor
            };
            return Err(BindingError::RoleMismatch {
                payload: role_word(started.role),
                subject: subject.to_string(),
                expected: role_word(subject_role),
            });
        }
        return Err(BindingError::WrongSubject {
            kind: message.kind(),
            subject: subject.to_string(),
            expected: expected.pattern(),
        });
    }
    if message.run_id() != parsed.run_id {
        return Err(BindingError::RunMismatch {
            payload: message.run_id().to_string(),
            subject: parsed.run_id.to_string(),
        });
    }
    if let Message::AuditReport(report) = message {
        if report.spec_hash.trim().is_empty() {
            return Err(BindingError::MissingSpecHash);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Contract;
    use crate::subjects::Capability;
    use crate::usage::Usage;
    use crate::verdict::{AuditStatus, ContractVerdict, Integrity, Verdicts};
    use crate::wire::{
        AuditPurpose, AuditReport, CancelEpisodes, DecideRequest, EpisodeStarted, ExecOutcome,
        ExecRequest, ExecResult, Increment,
    };

    const RUN: &str = "r1";

    fn exec_result(run: &str) -> Message {
        Message::ExecResult(ExecResult {
            transcript: None,
            attempt: 1,
            run_id: run.into(),
            generation: 1,
            round: 1,
            delivery_attempt: 1,
            worker: "w".into(),
            outcome: ExecOutcome::Failed { error: "e".into() },
            usage: Usage::default(),
            duration_ms: 1,
            agent_isolation: None,
        })
    }

    fn audit_report(run: &str, spec_hash: &str) -> Message {
        Message::AuditReport(AuditReport {
            mechanical_only: false,
            run_id: run.into(),
            generation: 1,
            round: 1,
            purpose: AuditPurpose::Round,
            delivery_attempt: 1,
            worker: "w".into(),
            snapshot: "s".into(),
            verdicts: Verdicts {
                status: AuditStatus::Complete,
                integrity: Integrity::Clean,
                contract: ContractVerdict::Aligned,
            },
            evidence: Vec::new(),
            gaps: Vec::new(),
            backcheck: Vec::new(),
            changed_paths: Vec::new(),
            added_paths: Vec::new(),
            judgment: None,
            usage: Usage::default(),
            duration_ms: 1,
            proposal: None,
            rubric: None,
            spec_hash: spec_hash.into(),
            completes_run: false,
            key_id: String::new(),
            signature: String::new(),
        })
    }

    fn decide(run: &str) -> Message {
        Message::DecideRequest(DecideRequest {
            run_id: run.into(),
            generation: 1,
            seq: 1,
        })
    }

    fn started(run: &str, role: EpisodeRole) -> Message {
        Message::EpisodeStarted(EpisodeStarted {
            attempt: 1,
            run_id: run.into(),
            generation: 1,
            round: 1,
            role,
            delivery_attempt: 1,
            worker: "w".into(),
        })
    }

    fn audit_progress(run: &str) -> Message {
        Message::AuditProgress(crate::wire::AuditProgress {
            run_id: run.into(),
            generation: 1,
            round: 1,
            purpose: AuditPurpose::Round,
            delivery_attempt: 1,
            worker: "w".into(),
            stage: crate::wire::AuditStage::Checks,
            check: Some("c".into()),
            check_index: 1,
            checks_total: 2,
            elapsed_ms: 5,
        })
    }

    fn exec_request() -> Message {
        let contract = Contract {
            goal: "g".into(),
            criteria: Vec::new(),
            protected_paths: Vec::new(),
            rubric: None,
            writable_paths: Vec::new(),
            spec_hash: "h".into(),
        };
        Message::ExecRequest(ExecRequest {
            attempt: 1,
            run_id: RUN.into(),
            generation: 1,
            round: 1,
            capability: Capability::Cli,
            contract,
            increment: Increment {
                objective: "o".into(),
                instructions: String::new(),
                acceptance_checks: Vec::new(),
                write_scope: Vec::new(),
                goal_clauses: Vec::new(),
            },
            base_snapshot: "b".into(),
            executor_profile: "p".into(),
            episode_secs: 1,
            max_steps: 1,
            start_by_ms: None,
            ignore: Vec::new(),
            episode: Default::default(),
            feedback: Default::default(),
            self_checks: 0,
            max_tokens: None,
            gui: None,
        })
    }

    /// Every kind on every subject: accepted exactly where the module table says.
    #[test]
    fn binding_table() {
        let s = Subjects::default();
        let subjects = [
            ("exec", s.exec_result(RUN)),
            ("audit", s.audit_result(RUN)),
            ("decide", s.decide(RUN)),
            ("started.exec", s.exec_started(RUN)),
            ("started.audit", s.audit_started(RUN)),
            ("progress.audit", s.audit_progress(RUN)),
            ("started (old)", format!("loopgate.result.started.{RUN}")),
            ("work queue", s.exec(Capability::Cli)),
            ("control", s.control(RUN)),
        ];
        // (message, the one subject name it is accepted on, the refusal elsewhere on a
        // results subject)
        let messages: Vec<(&str, Message, &str, &str)> = vec![
            ("exec_result", exec_result(RUN), "exec", "wrong_subject"),
            (
                "audit_report",
                audit_report(RUN, "h"),
                "audit",
                "wrong_subject",
            ),
            ("decide_request", decide(RUN), "decide", "wrong_subject"),
            (
                "started(executor)",
                started(RUN, EpisodeRole::Executor),
                "started.exec",
                "wrong_subject",
            ),
            (
                "started(auditor)",
                started(RUN, EpisodeRole::Auditor),
                "started.audit",
                "wrong_subject",
            ),
            (
                "audit_progress",
                audit_progress(RUN),
                "progress.audit",
                "wrong_subject",
            ),
            ("exec_request", exec_request(), "", "wrong_subject"),
        ];
        for (name, message, accepted_on, elsewhere) in &messages {
            for (subject_name, subject) in &subjects {
                let got = check_binding(&s, subject, message).map_err(|e| e.reason());
                let want = if subject_name == accepted_on {
                    Ok(())
                } else if matches!(*subject_name, "started (old)" | "work queue" | "control") {
                    Err("unknown_subject")
                } else if name.starts_with("started(") && subject_name.starts_with("started.") {
                    Err("role_mismatch")
                } else {
                    Err(*elsewhere)
                };
                assert_eq!(got, want, "{name} on {subject_name} ({subject})");
            }
        }
    }

    #[test]
    fn the_run_must_be_the_subjects_and_reports_must_name_their_contract() {
        let s = Subjects::default();
        let cases: Vec<(Message, String, Result<(), &str>)> = vec![
            (exec_result("r2"), s.exec_result(RUN), Err("run_mismatch")),
            (
                audit_report("r2", "h"),
                s.audit_result(RUN),
                Err("run_mismatch"),
            ),
            (decide("r2"), s.decide(RUN), Err("run_mismatch")),
            (
                started("r2", EpisodeRole::Auditor),
                s.audit_started(RUN),
                Err("run_mismatch"),
            ),
            (
                audit_report(RUN, ""),
                s.audit_result(RUN),
                Err("missing_spec_hash"),
            ),
            (
                audit_report(RUN, "  "),
                s.audit_result(RUN),
                Err("missing_spec_hash"),
            ),
            (audit_report(RUN, "h"), s.audit_result(RUN), Ok(())),
            (
                Message::CancelEpisodes(CancelEpisodes {
                    run_id: RUN.into(),
                    generation: 1,
                    reason: "x".into(),
                    dispatch: None,
                }),
                s.decide(RUN),
                Err("wrong_subject"),
            ),
        ];
        for (message, subject, want) in cases {
            let got = check_binding(&s, &subject, &message);
            assert_eq!(
                got.clone().map_err(|e| e.reason()),
                want,
                "{} on {subject}: {got:?}",
                message.kind()
            );
        }
        let err = check_binding(&s, &s.exec_result(RUN), &audit_report(RUN, "h")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "audit_report is not accepted on loopgate.result.exec.r1 (only on result.audit.<run>)"
        );
    }

    /// Every role's id shape on every results subject: refused exactly where another role
    /// publishes.
    #[test]
    fn message_ids_bound_to_their_publishers() {
        use crate::dispatch_id::{decide_msg_id, sealed, StepKey};
        let s = Subjects::default();
        let step = StepKey {
            run_id: RUN,
            generation: 1,
            round: 1,
        };
        let ids = [
            ("executor", sealed(&step.exec_result_msg_id(1), "n")),
            ("executor", step.exec_started_msg_id(2)),
            (
                "auditor",
                sealed(&step.audit_report_msg_id(AuditPurpose::Round, 1), "n"),
            ),
            ("auditor", step.audit_started_msg_id(AuditPurpose::Final, 1)),
            (
                "auditor",
                sealed(&step.audit_progress_msg_id(AuditPurpose::Round, 1, 3), "n"),
            ),
            ("manager", sealed(&decide_msg_id(RUN, 1, 1), "t")),
            ("nobody", "forged-report-0".to_string()),
        ];
        let subjects = [
            ("executor", s.exec_result(RUN)),
            ("executor", s.exec_started(RUN)),
            ("auditor", s.audit_result(RUN)),
            ("auditor", s.audit_started(RUN)),
            ("auditor", s.audit_progress(RUN)),
            ("manager", s.decide(RUN)),
            ("unknown", s.control(RUN)),
        ];
        for (owner, id) in &ids {
            for (publisher, subject) in &subjects {
                let got = check_msg_id(&s, subject, Some(id)).map_err(|e| e.reason());
                let foreign = *owner != "nobody" && *publisher != "unknown" && owner != publisher;
                let want = if foreign {
                    Err("foreign_msg_id")
                } else {
                    Ok(())
                };
                assert_eq!(got, want, "{id} on {subject}");
            }
        }
        assert_eq!(check_msg_id(&s, &s.exec_result(RUN), None), Ok(()));
        let err = check_msg_id(&s, &s.exec_result(RUN), Some(&ids[2].1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message id \"r1:1:1:audit-report:round:1:n\" on loopgate.result.exec.r1 has the shape \
             of the auditor role's ids, but only the executor role publishes there (an attempt \
             to squat another role's dedup id)"
        );
    }
}
