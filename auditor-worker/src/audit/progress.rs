//! What a running audit tells while it works: its stage and the check running (n of m). The
//! worker publishes each change as an `AuditProgress` notice, throttled like an executor's
//! (`loopgate_transport::runtime::send_throttled`); the default handle tells nobody.

use loopgate_protocol::wire::AuditStage;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Where a running audit stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuditNow {
    pub(crate) stage: AuditStage,
    /// The id of the check running, while one is.
    pub(crate) check: Option<String>,
    /// The ordinal of the check running or last run (1-based; 0: none yet).
    pub(crate) check_index: u32,
    pub(crate) checks_total: u32,
}

impl Default for AuditNow {
    fn default() -> Self {
        AuditNow {
            stage: AuditStage::Checks,
            check: None,
            check_index: 0,
            checks_total: 0,
        }
    }
}

/// A handle the audit's phases tell their progress to (cheap to clone).
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditProgressTx {
    tx: Option<watch::Sender<AuditNow>>,
    /// Cancelled once the audit's own work is done (see [`AuditProgressTx::work_done`]).
    work_done: Option<CancellationToken>,
}

impl AuditProgressTx {
    /// Tell `tx` each change.
    pub(crate) fn new(tx: watch::Sender<AuditNow>) -> Self {
        AuditProgressTx {
            tx: Some(tx),
            work_done: None,
        }
    }

    /// Cancel `token` once the audit's own work is done.
    pub(crate) fn on_work_done(mut self, token: CancellationToken) -> Self {
        self.work_done = Some(token);
        self
    }

    /// The checks, the judge and the rubric are done: only storing the audit's evidence and
    /// its report is left (the worker's claim then holds through a NATS outage).
    pub(crate) fn work_done(&self) {
        if let Some(token) = &self.work_done {
            token.cancel();
        }
    }

    /// Check `id`, the `index`-th (1-based) of `total`, starts.
    pub(crate) fn check(&self, id: &str, index: u32, total: u32) {
        self.update(|now| {
            now.stage = AuditStage::Checks;
            now.check = Some(id.to_string());
            now.check_index = index;
            now.checks_total = total;
        });
    }

    /// The checks are done; the audit goes on with `stage`.
    pub(crate) fn stage(&self, stage: AuditStage) {
        self.update(|now| {
            now.stage = stage;
            now.check = None;
        });
    }

    fn update(&self, f: impl FnOnce(&mut AuditNow)) {
        if let Some(tx) = &self.tx {
            tx.send_modify(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each check and stage reaches the receiver; the default handle tells nobody.
    #[test]
    fn tells_checks_and_stages() {
        let (tx, rx) = watch::channel(AuditNow::default());
        let progress = AuditProgressTx::new(tx);
        progress.check("tests", 2, 3);
        let want = AuditNow {
            stage: AuditStage::Checks,
            check: Some("tests".into()),
            check_index: 2,
            checks_total: 3,
        };
        assert_eq!(*rx.borrow(), want);
        progress.stage(AuditStage::Judge);
        let want = AuditNow {
            stage: AuditStage::Judge,
            check: None,
            ..want
        };
        assert_eq!(*rx.borrow(), want);
        AuditProgressTx::default().check("x", 1, 1);
    }

    /// `work_done` cancels the token it was given; the default handle has none.
    #[test]
    fn work_done_cancels_its_token() {
        let token = CancellationToken::new();
        let progress = AuditProgressTx::default().on_work_done(token.clone());
        progress.check("tests", 1, 1);
        assert!(!token.is_cancelled());
        progress.work_done();
        assert!(token.is_cancelled());
        AuditProgressTx::default().work_done();
    }
}
