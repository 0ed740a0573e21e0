//! What a running audit tells while it works: its stage and the check running (n of m). The
//! worker publishes each change as an `AuditProgress` notice, throttled like an executor's
//! (`loopgate_transport::runtime::send_throttled`); the default handle tells nobody.

use loopgate_protocol::wire::AuditStage;
use tokio::sync::watch;

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
pub(crate) struct AuditProgressTx(Option<watch::Sender<AuditNow>>);

impl AuditProgressTx {
    /// Tell `tx` each change.
    pub(crate) fn new(tx: watch::Sender<AuditNow>) -> Self {
        AuditProgressTx(Some(tx))
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
        if let Some(tx) = &self.0 {
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
}
