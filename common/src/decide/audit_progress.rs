//! A running audit's progress notice: the latest one of the audit in flight is kept in the
//! record (`audit_progress`), and it is logged when its stage or its check changed from the
//! one kept (so the run log grows by about one entry per check, whatever the auditor's rate).

use loopgate_protocol::wire::AuditProgress;

use super::tx::Tx;
use super::Decision;
use crate::state::{LogEvent, Phase, RunRecord};

/// Keep `progress` as the latest of the audit in flight; log it when its stage or check is new.
pub(super) fn on_audit_progress(
    record: &RunRecord,
    progress: &AuditProgress,
    now: i64,
) -> Decision {
    if progress.generation != record.generation {
        return Decision::Ignore(format!("stale generation {}", progress.generation));
    }
    let auditing = matches!(&record.phase,
        Phase::Auditing { round, purpose, .. }
            if *round == progress.round && *purpose == progress.purpose);
    if !auditing {
        return Decision::Ignore(format!(
            "no {} audit of round {} is running",
            progress.purpose.as_str(),
            progress.round
        ));
    }
    let same_audit = |p: &AuditProgress| {
        p.generation == progress.generation
            && p.round == progress.round
            && p.purpose == progress.purpose
    };
    let previous = record.audit_progress.as_ref().filter(|p| same_audit(p));
    if previous.is_some_and(|p| p.elapsed_ms > progress.elapsed_ms && p.worker == progress.worker) {
        return Decision::Ignore("an older progress notice than the one kept".into());
    }
    let news = previous.is_none_or(|p| {
        p.stage != progress.stage || p.check != progress.check || p.worker != progress.worker
    });
    let mut tx = Tx::new(record, now);
    tx.record.audit_progress = Some(progress.clone());
    if news {
        tx.log(LogEvent::AuditProgress {
            worker: progress.worker.clone(),
            stage: progress.stage,
            check: progress.check.clone(),
            check_index: progress.check_index,
            checks_total: progress.checks_total,
            elapsed_ms: progress.elapsed_ms,
        });
    }
    tx.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::decide::tests::{exec_done, reply, started};
    use crate::decide::{decide, RunEvent};
    use loopgate_protocol::wire::{AuditPurpose, AuditStage};

    fn notice(
        round: u32,
        stage: AuditStage,
        check: Option<&str>,
        elapsed_ms: u64,
    ) -> AuditProgress {
        AuditProgress {
            run_id: "r1".into(),
            generation: 1,
            round,
            purpose: AuditPurpose::Round,
            delivery_attempt: 1,
            worker: "a".into(),
            stage,
            check: check.map(str::to_string),
            check_index: 1,
            checks_total: 2,
            elapsed_ms,
        }
    }

    fn auditing() -> RunRecord {
        let executing = reply(&started(), "Next: cli\nTask: write hello.py").record;
        let r = exec_done(&executing, "cand").record;
        assert!(
            matches!(r.phase, Phase::Auditing { round: 1, .. }),
            "{:?}",
            r.phase
        );
        r
    }

    fn apply(r: &RunRecord, p: AuditProgress) -> Option<(RunRecord, usize)> {
        match decide(r, &RunEvent::AuditProgress(p), 1_000) {
            Decision::Apply(step) => Some((step.record, step.log.len())),
            _ => None,
        }
    }

    /// The latest notice is kept; a new check or stage is logged, the same one is not; another
    /// round's, another purpose's, an older one, or one while nothing is audited is ignored.
    #[test]
    fn latest_kept_and_news_logged() {
        use AuditStage::{Checks, Judge};
        let r = auditing();
        let (r1, logged) = apply(&r, notice(1, Checks, Some("a"), 100)).unwrap();
        assert_eq!((r1.audit_progress.is_some(), logged), (true, 1));
        let (r2, logged) = apply(&r1, notice(1, Checks, Some("a"), 1_200)).unwrap();
        assert_eq!(
            (r2.audit_progress.as_ref().unwrap().elapsed_ms, logged),
            (1_200, 0)
        );
        let (r3, logged) = apply(&r2, notice(1, Checks, Some("b"), 2_300)).unwrap();
        assert_eq!(logged, 1);
        let (r4, logged) = apply(&r3, notice(1, Judge, None, 3_400)).unwrap();
        assert_eq!(logged, 1);
        assert!(
            apply(&r4, notice(1, Checks, Some("b"), 900)).is_none(),
            "older"
        );
        assert!(
            apply(&r4, notice(2, Judge, None, 5_000)).is_none(),
            "other round"
        );
        let mut final_audit = notice(1, Judge, None, 5_000);
        final_audit.purpose = AuditPurpose::Final;
        assert!(apply(&r4, final_audit).is_none(), "other purpose");
        let mut stale = notice(1, Judge, None, 5_000);
        stale.generation = 0;
        assert!(apply(&r4, stale).is_none(), "other generation");
        assert!(
            apply(
                &crate::decide::tests::started(),
                notice(1, Checks, None, 100)
            )
            .is_none(),
            "not auditing"
        );
        // The last applied event stays what it was: a redelivery of it is still a replay.
        assert_eq!(r4.last_event, r.last_event);
    }

    /// A progress notice that exhausted its deliveries fails nothing.
    #[test]
    fn a_lost_notice_is_no_dead_letter_event() {
        let lost =
            loopgate_protocol::wire::Message::AuditProgress(notice(1, AuditStage::Checks, None, 1));
        assert!(RunEvent::dead_lettered(&lost, "max deliveries").is_none());
    }
}
