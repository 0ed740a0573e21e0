//! The results loop's first step after decoding: a message is admitted only on its own subject
//! (`loopgate_protocol::subjects::binding`), under an id that does not have the shape of
//! another role's dedup id (`binding::check_msg_id`: an attempt to squat it), and, when this
//! manager trusts auditor keys, an audit report only with a valid signature by one of them
//! (`loopgate_protocol::report::signing`). A refusal is a security event: a warning under the
//! log target [`SECURITY_TARGET`] with the field `security_event = "message_refused"`, a count
//! in `loopgate.security.refused_messages{kind, reason}`, and the message terminated, so it
//! never reaches `decide`. The same goes for a message `decide` distrusts (usage no episode
//! could spend, a second start of an episode: [`record_distrust`]).

use loopgate_common::decide::Distrust;
use loopgate_protocol::report::signing::{SignatureError, TrustedKeys};
use loopgate_protocol::subjects::binding::{check_binding, check_msg_id, BindingError};
use loopgate_protocol::subjects::Subjects;
use loopgate_protocol::wire::Message;
use loopgate_telemetry::metrics::Metrics;
use opentelemetry::KeyValue;

/// The `tracing` target of security events.
pub(crate) const SECURITY_TARGET: &str = "loopgate::security";

/// The kind a refusal names for a message that did not decode.
pub(crate) const UNDECODABLE: &str = "undecodable";

/// Why a message was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(transparent)]
    Binding(#[from] BindingError),
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

impl Refusal {
    /// The stable name (log field and metric attribute).
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Refusal::Binding(e) => e.reason(),
            Refusal::Signature(e) => e.reason(),
        }
    }
}

/// Pure: is `message`, received on `subject` under the id `msg_id`, admitted? With no trusted
/// keys, reports are accepted unsigned (and signatures are not looked at).
pub(crate) fn admit(
    subjects: &Subjects,
    keys: &TrustedKeys,
    subject: &str,
    msg_id: Option<&str>,
    message: &Message,
) -> Result<(), Refusal> {
    check_msg_id(subjects, subject, msg_id)?;
    check_binding(subjects, subject, message)?;
    if let Message::AuditReport(report) = message {
        if !keys.is_empty() {
            keys.verify_report(report)?;
        }
    }
    Ok(())
}

/// Log and count a refusal of `message`; the caller terminates the message.
pub(crate) fn record_refusal(metrics: &Metrics, subject: &str, message: &Message, why: &Refusal) {
    refused(metrics, subject, message.kind(), message.run_id(), why);
}

/// Log and count a refusal of a message that did not decode (its id squatted another role's);
/// the caller terminates it.
pub(crate) fn record_undecodable_refusal(metrics: &Metrics, subject: &str, why: &Refusal) {
    refused(metrics, subject, UNDECODABLE, "", why);
}

fn refused(metrics: &Metrics, subject: &str, kind: &'static str, run_id: &str, why: &Refusal) {
    let reason = why.reason();
    tracing::warn!(
        target: SECURITY_TARGET,
        security_event = "message_refused",
        kind,
        reason,
        subject,
        run_id,
        error = %why,
        "refused a results message: it never reaches the run"
    );
    count(metrics, kind, reason);
}

/// Log and count a message `decide` distrusted (it claims what its sender could not have
/// done); nothing of it reached the run.
pub(crate) fn record_distrust(metrics: &Metrics, run_id: &str, why: &Distrust) {
    tracing::warn!(
        target: SECURITY_TARGET,
        security_event = "message_refused",
        kind = why.kind,
        reason = why.reason,
        run_id,
        error = %why.detail,
        "refused a results message: it never reaches the run"
    );
    count(metrics, why.kind, why.reason);
}

fn count(metrics: &Metrics, kind: &'static str, reason: &'static str) {
    metrics.refused_messages.add(
        1,
        &[KeyValue::new("kind", kind), KeyValue::new("reason", reason)],
    );
}

/// Say once, at start-up, whether audit reports are authenticated.
pub fn log_report_trust(keys: &TrustedKeys) {
    if keys.is_empty() {
        tracing::warn!(
            target: SECURITY_TARGET,
            security_event = "reports_not_authenticated",
            "no [manager] auditor_keys configured: audit reports are NOT authenticated (accepted unsigned); \
             configure the auditor pools' public keys to refuse forged reports"
        );
    } else {
        tracing::info!(
            target: SECURITY_TARGET,
            key_ids = %keys.ids(),
            "audit reports must be signed by a trusted auditor key"
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use loopgate_protocol::report::signing::ReportSigningKey;
    use loopgate_protocol::usage::Usage;
    use loopgate_protocol::verdict::{AuditStatus, ContractVerdict, Integrity, Verdicts};
    use loopgate_protocol::wire::{AuditPurpose, AuditReport};

    fn report() -> AuditReport {
        AuditReport {
            mechanical_only: false,
            run_id: "r1".into(),
            generation: 1,
            round: 1,
            purpose: AuditPurpose::Round,
            delivery_attempt: 1,
            worker: "a".into(),
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
            spec_hash: "h".into(),
            completes_run: false,
            key_id: String::new(),
            signature: String::new(),
        }
    }

    #[test]
    fn reports_are_bound_then_authenticated_when_keys_are_configured() {
        let subjects = Subjects::default();
        let pool = ReportSigningKey::from_seed(&[3u8; 32]);
        let stranger = ReportSigningKey::from_seed(&[4u8; 32]);
        let trusted = TrustedKeys::new([pool.public_key().clone()]);
        let on_audit = subjects.audit_result("r1");
        let on_exec = subjects.exec_result("r1");
        let none = TrustedKeys::default();
        let unsigned = Message::AuditReport(report());
        let mut signed = report();
        pool.sign(&mut signed);
        let mut foreign = report();
        stranger.sign(&mut foreign);
        let cases: Vec<(&TrustedKeys, &str, Message, Result<(), &str>)> = vec![
            (&none, &on_audit, unsigned.clone(), Ok(())),
            (&trusted, &on_audit, unsigned.clone(), Err("unsigned")),
            (
                &trusted,
                &on_audit,
                Message::AuditReport(signed.clone()),
                Ok(()),
            ),
            (
                &trusted,
                &on_audit,
                Message::AuditReport(foreign),
                Err("unknown_key"),
            ),
            // The binding comes first: a signed report on the executors' subject is refused.
            (
                &trusted,
                &on_exec,
                Message::AuditReport(signed),
                Err("wrong_subject"),
            ),
        ];
        for (keys, subject, message, want) in cases {
            let got = admit(&subjects, keys, subject, None, &message);
            let reason = got.as_ref().map(|_| ()).map_err(|e| e.reason());
            assert_eq!(reason, want, "{subject} {got:?}");
        }
    }

    /// The id comes first: an honest-looking report under an executor-shaped id on the
    /// auditors' subject, or anything under the auditor's report id on the executors' subject,
    /// is a squatting attempt.
    #[test]
    fn ids_of_another_role_are_refused_before_anything_else() {
        let subjects = Subjects::default();
        let none = TrustedKeys::default();
        let report_id = "r1:1:1:audit-report:round:1";
        let exec_id = "r1:1:1:exec-result:1:0123";
        let cases: Vec<(&str, String, Message, Result<(), &str>)> = vec![
            (
                report_id,
                subjects.exec_result("r1"),
                Message::AuditReport(report()),
                Err("foreign_msg_id"),
            ),
            (
                exec_id,
                subjects.audit_result("r1"),
                Message::AuditReport(report()),
                Err("foreign_msg_id"),
            ),
            (
                "r1:1:decide:2",
                subjects.exec_started("r1"),
                Message::AuditReport(report()),
                Err("foreign_msg_id"),
            ),
            (
                report_id,
                subjects.audit_result("r1"),
                Message::AuditReport(report()),
                Ok(()),
            ),
        ];
        for (id, subject, message, want) in cases {
            let got = admit(&subjects, &none, &subject, Some(id), &message);
            let reason = got.as_ref().map(|_| ()).map_err(|e| e.reason());
            assert_eq!(reason, want, "{id} on {subject}: {got:?}");
        }
    }
}
